package lockbench

import (
	"context"
	"fmt"

	"github.com/redis/rueidis"

	"github.com/redfence/redfence/redlock"
	"github.com/redfence/redfence/rfrueidis"
)

// Rows of redfence over rueidis (module rfrueidis), beside the same locks
// over go-redis: rueidis pipelines concurrent commands on a shared
// connection by itself (auto-pipelining), below redfence's own batcher;
// the no-auto-pipelining row takes pooled connections instead, as go-redis
// does.
const (
	NameRFRueidisQ0     = "redfence redlock over rueidis, quarantine off"
	NameRFRueidisQ0Pool = "redfence redlock over rueidis, quarantine off, DisableAutoPipelining"
	NameRFRueidisSingle = "redfence single over rueidis, defaults"
)

// rueidisOptions are the rueidis clients' options: no client-side cache
// (the locks never read through it), no retries (as MaxRetries -1 for
// go-redis), and a pool like the go-redis clients'.
func rueidisOptions(addr string, poolSize int, autoPipelining bool) rueidis.ClientOption {
	return rueidis.ClientOption{
		InitAddress:           []string{addr},
		DisableCache:          true,
		DisableRetry:          true,
		BlockingPoolSize:      poolSize,
		DisableAutoPipelining: !autoPipelining,
	}
}

// redfenceRueidis builds redfence over rueidis clients, one per node:
// Redlock (rfrueidis.New) over every address, or with one set the single
// lock (rfrueidis.NewSingle) over the first.
func redfenceRueidis(name string, one, autoPipelining bool, opts ...redlock.Option) lib {
	return lib{name: name, build: func(_ context.Context, addrs []string, poolSize int) (impl, error) {
		if one {
			addrs = addrs[:1]
		}
		cs := make([]rueidis.Client, 0, len(addrs))
		closeAll := func() {
			for _, c := range cs {
				c.Close()
			}
		}
		for _, a := range addrs {
			c, err := rueidis.NewClient(rueidisOptions(a, poolSize, autoPipelining))
			if err != nil {
				closeAll()
				return nil, fmt.Errorf("rueidis client for %s: %w", a, err)
			}
			cs = append(cs, c)
		}
		var (
			c   *redlock.Client
			err error
		)
		if one {
			c, err = rfrueidis.NewSingle(cs[0], opts...)
		} else {
			c, err = rfrueidis.New(cs, opts...)
		}
		if err != nil {
			closeAll()
			return nil, err
		}
		return &rfImpl{c: c, closeClients: func() error { closeAll(); return nil }}, nil
	}}
}
