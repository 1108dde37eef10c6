package lockbench

import (
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-redsync/redsync/v4"

	"github.com/redfence/redfence/redlock"
)

// Counting retries, for scenario 3. Both libraries draw one retry delay after
// each failed attempt that is followed by another (redsync calls its delay
// function before every try but the first; redfence's Lock calls NextBackOff
// after every failed attempt unless its context ended), so the delays drawn
// per grant are the failed attempts per grant: the price of split votes and
// lost races. The counters wrap the very policy the row uses, so the row's
// behaviour is unchanged. With one Client shared by several workers,
// redfence's Lock also draws a delay when its queue, not the nodes, said
// "not yet" (a poll while another worker of the Client is ahead).

// countingBackOff is a back-off that counts its NextBackOff calls.
type countingBackOff struct {
	backoff.BackOff
	n *atomic.Int64
}

func (c countingBackOff) NextBackOff() time.Duration {
	c.n.Add(1)
	return c.BackOff.NextBackOff()
}

// rfCounted is redfenceRedlock with the retry policy policy (nil:
// redfence's default, redlock.DefaultRetry) wrapped to count the delays
// drawn.
func rfCounted(name string, vouch bool, policy func() backoff.BackOff, opts ...redlock.Option) lib {
	if policy == nil {
		policy = defaultRetry
	}
	n := new(atomic.Int64)
	counted := func() backoff.BackOff { return countingBackOff{policy(), n} }
	l := redfenceRedlock(name, vouch, append(opts, redlock.WithRetry(counted))...)
	l.retries = n
	return l
}

// rsCounted is redsync with the uniform lo-hi retry delay of redsyncJitter
// and a million tries (so that the wait bound, not the tries, ends a wait),
// counting the delays drawn.
func rsCounted(name string, lo, hi time.Duration) lib {
	n := new(atomic.Int64)
	delay := redsync.WithRetryDelayFunc(func(int) time.Duration {
		n.Add(1)
		return lo + randDuration(hi-lo)
	})
	l := redsyncLib(name, delay, redsync.WithTries(1_000_000))
	l.retries = n
	return l
}

// defaultQuarantine is redlock's restart quarantine over several nodes
// when WithQuarantine is not given.
const defaultQuarantine = 60 * time.Second

// defaultRetry is redlock's default retry policy (WithRetry): 20ms,
// growing by 1.6x up to 500ms, each delay randomised by +-50%, no limit.
func defaultRetry() backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.Multiplier, b.MaxInterval = 20*time.Millisecond, 1.6, 500*time.Millisecond
	b.RandomizationFactor, b.MaxElapsedTime = 0.5, 0
	b.Reset()
	return b
}
