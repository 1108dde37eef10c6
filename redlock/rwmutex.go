package redlock

import (
	"context"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"

	"github.com/redfence/redfence/internal/keys"
	"github.com/redfence/redfence/internal/nilcheck"
)

// NewRWMutex returns the two sides of a read-write lock on key: readers
// share it (r), a writer holds it alone (w). A waiting w.Lock holds new
// readers back (an intent marker for a TTL); w.TryLock leaves none. Write
// leases get fencing tokens with WithFencing, read leases never. It
// returns a *ConfigError as NewMutex does, and for a key a Cluster client
// would split from its readers' set. Lock polls (docs/shapes.md,
// Read-write lock).
func (e *Client) NewRWMutex(key string, opts ...Option) (w, r *Mutex, err error) {
	w, err = e.NewMutex(key, opts...)
	if err != nil {
		return nil, nil, err
	}
	readers, intent := keys.ReadersOf(w.key), keys.Intent(w.key)
	if err := checkColocated(e.pkg, e.nodes, []string{w.key, readers, intent}, rwColocation); err != nil {
		return nil, nil, err
	}
	ttl := w.cfg.ttl.Milliseconds()

	rd := *w // the reader: same key and configuration, no fencing
	rd.cfg.fenced = false
	rd.spanAttrs = rd.acquireSpanAttrs(attribute.String("redfence.rw", "read"))
	rd.acquireTmpl = rd.scriptTemplate(rwReadScript, true, []string{rd.key, readers, intent}, ttl, rd.cfg.quarantine.Milliseconds())
	rd.releaseTmpl = rd.scriptTemplate(rwReadReleaseScript, false, []string{rd.key, readers})
	rd.extendTmpl = rd.scriptTemplate(rwReadExtendScript, false, []string{rd.key, readers}, ttl)
	rd.shape = &shape{decode: decodeRW}
	rd.setProven(3) // rw_rlock.lua's ARGV[3]

	w.spanAttrs = w.acquireSpanAttrs(attribute.String("redfence.rw", "write"))
	wks := []string{w.key, w.fenceKey, readers, intent}
	w.acquireTmpl = w.voteTemplate(rwWriteScript, wks, 0) // the intent marker's TTL in ms, 0: none; releaseTmpl: release.lua, as NewMutex made it
	w.shape = &shape{decode: decodeRW}
	if w.cfg.fenced && len(e.nodes) == 1 {
		w.shape.decode = decodeRWFence1
	}
	w.setProven(acquireQuarantineArg)

	wait := *w // the waiting writer: leaves the marker for a TTL, polls at least every TTL/4
	wait.acquireTmpl = w.voteTemplate(rwWriteScript, wks, ttl)
	wait.setProven(acquireQuarantineArg)
	wait.cfg.retry = capRetry(w.cfg.retry, w.cfg.ttl/4)
	sh := *w.shape
	sh.gaveUp = func(ctx context.Context) {
		// Withdraw the marker; Close, not the caller, waits for the deletes.
		e.run(ctx, anyOrder, len(e.nodes), w.cfg.roundTimeout(), []any{"del", intent}, decodeAny, proof{})
	}
	wait.shape = &sh
	wait.try = w // TryLock: one attempt, leaving no intent marker
	return &wait, &rd, nil
}

// capRetry cuts retry's delays to most: a waiting writer must try again
// before its intent marker lapses.
func capRetry(retry func() backoff.BackOff, most time.Duration) func() backoff.BackOff {
	return func() backoff.BackOff {
		b := retry()
		if nilcheck.IsNil(b) {
			return nil // Lock reports it
		}
		return cappedBackOff{b, most}
	}
}

type cappedBackOff struct {
	backoff.BackOff
	most time.Duration
}

// NextBackOff keeps backoff.Stop (-1): most is positive.
func (c cappedBackOff) NextBackOff() time.Duration { return min(c.BackOff.NextBackOff(), c.most) }

type takenError string

func (e takenError) Error() string        { return string(e) }
func (e takenError) Is(target error) bool { return target == ErrTaken }

const (
	errReadersHold = takenError("redfence: key held by readers")
	errWriterWaits = takenError("redfence: a writer waits for the key (new readers are held back)")
)

func decodeRW(cmd *redis.Cmd) (int64, error) {
	st, n, err := pair(cmd)
	switch {
	case err != nil, st == 1:
	case st == 2:
		err = errReadersHold
	case st == 3:
		err = errWriterWaits
	default:
		err = statusError("acquire", st, n)
	}
	return n, err
}

func decodeAny(cmd *redis.Cmd) (int64, error) { return 0, cmd.Err() }
