package chaos

import (
	"fmt"
	"net"
	"time"

	"github.com/redis/rueidis"

	"github.com/redfence/redfence/rfrueidis"
)

// rueidisOptions are the settings of a lock client's rueidis connection,
// those of lockClientOptions where rueidis has them: RESP2, no retries, and
// fast answers when a node is gone.
func rueidisOptions(addr string) rueidis.ClientOption {
	return rueidis.ClientOption{
		InitAddress:       []string{addr},
		ForceSingleClient: true,
		DisableCache:      true,
		DisableRetry:      true,
		AlwaysRESP2:       true,
		ConnWriteTimeout:  500 * time.Millisecond,
		BlockingPoolSize:  4,
		Dialer:            net.Dialer{Timeout: 250 * time.Millisecond},
	}
}

// newRueidisLockClient is newLockClient over rueidis clients (RunOptions.
// Client): the same locks and options through module rfrueidis.
func (r *run) newRueidisLockClient(addrs []string, quarantine time.Duration) (*lockClient, error) {
	rcs := make([]rueidis.Client, len(addrs))
	for i, a := range addrs {
		c, err := rueidis.NewClient(rueidisOptions(a))
		if err != nil {
			return nil, fmt.Errorf("rueidis client for %s: %w", a, err)
		}
		r.rconns = append(r.rconns, c)
		rcs[i] = c
	}
	if r.lock == LockSingle {
		return r.mutexClient(rfrueidis.NewSingle(rcs[0], r.singleOptions(quarantine)...))
	}
	return r.mutexClient(rfrueidis.New(rcs, r.redlockOptions(quarantine)...))
}
