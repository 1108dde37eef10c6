package core

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/internal/nilcheck"
)

// RWMutex is a read-write lock on one key: readers share it, a writer holds
// it alone (docs/shapes.md, Read-write lock). Each of its modes is a Mutex
// with a shape of its own, so every lease has a plain lease's lifecycle.
type RWMutex struct {
	read  *Mutex // RLock, TryRLock: rw_rlock.lua
	write *Mutex // TryLock: rw_lock.lua, leaving no intent marker
	wait  *Mutex // Lock: rw_lock.lua, leaving the intent marker when readers hold
}

// The suffixes of a read-write lock's own keys beside its lock key.
const (
	readersSuffix = ":rw:readers"
	intentSuffix  = ":rw:intent"
)

// ReadersKey returns the key of the sorted set of readers of the read-write
// lock on lock key k, and IntentKey the key of its writer-intent marker. Both
// share k's Redis Cluster hash slot, as FenceKey does.
func ReadersKey(k string) string { return sideKey(k, readersSuffix) }

// IntentKey returns the key of the writer-intent marker of the read-write
// lock on lock key k (see ReadersKey).
func IntentKey(k string) string { return sideKey(k, intentSuffix) }

// sideKey is k with suffix, in k's hash slot: k's own hash tag when it has
// one, otherwise k wrapped in braces (FenceKey's rule).
func sideKey(k, suffix string) string {
	if _, ok := tagOf(k); ok || strings.Contains(k, "}") {
		return k + suffix // a tag to keep, or none usable: fine outside Cluster (checkColocated)
	}
	return "{" + k + "}" + suffix
}

// rwReserved says why the full key k is a read-write lock's readers' set or
// intent marker, or "".
func rwReserved(k string) string {
	for _, s := range [...]struct{ suffix, what string }{{readersSuffix, "readers' set"}, {intentSuffix, "writer-intent marker"}} {
		base, ok := strings.CutSuffix(k, s.suffix)
		if !ok || base == "" || sideKey(base, s.suffix) != k {
			continue
		}
		if inner, ok := strings.CutPrefix(base, "{"); ok && sideKey(strings.TrimSuffix(inner, "}"), s.suffix) == k {
			base = strings.TrimSuffix(inner, "}") // "{x}:rw:readers" is x's
		}
		return fmt.Sprintf("the %s of the read-write lock key %q", s.what, base)
	}
	return ""
}

// NewRWMutex validates key and the merged configuration, for a read-write
// lock: on each node the lock key holds a writer's value, as a plain lock's
// (so a plain Mutex on the key excludes readers and writers alike), or
// "redfence:readers" while readers hold; the readers are a sorted set of
// lease values scored with their own expiries. Readers and writers each
// need the majority. Writers get fencing tokens with fencing on (the lock
// key's, shared with plain locks on it); readers never do.
func (e *Engine) NewRWMutex(key string, over Config) (*RWMutex, error) {
	w, err := e.NewMutex(key, over)
	if err != nil {
		return nil, err
	}
	readers, intent := ReadersKey(w.key), IntentKey(w.key)
	if err := checkColocated(e.pkg, e.nodes, []string{w.key, readers, intent}, rwColocation); err != nil {
		return nil, err
	}
	ttl := w.cfg.TTL.Milliseconds()

	r := *w // the reader: same key and configuration, no fencing
	r.cfg.Fencing = false
	r.spanAttrs = rwSpanAttrs(&r, "read")
	if r.cfg.Quarantine > 0 { // with the marker key; not with Cluster clients: refused by NewMutex
		r.acquireTmpl = []any{"evalsha", rwReadScript.Hash(), 4, r.key, readers, intent, MarkerKey, nil, ttl, r.cfg.Quarantine.Milliseconds()}
	} else {
		r.acquireTmpl = []any{"evalsha", rwReadScript.Hash(), 3, r.key, readers, intent, nil, ttl, 0}
	}
	r.releaseTmpl = []any{"evalsha", rwReadReleaseScript.Hash(), 2, r.key, readers, nil}
	r.shape = &shape{extendTmpl: []any{"evalsha", rwReadExtendScript.Hash(), 2, r.key, readers, nil, ttl}, decode: decodeRW}
	r.setProven(3) // rw_rlock.lua's ARGV[3]

	w.spanAttrs = rwSpanAttrs(w, "write")
	w.acquireTmpl = w.rwWriteTemplate(readers, intent, 0) // releaseTmpl: release.lua, as NewMutex made it
	w.shape = &shape{extendTmpl: []any{"evalsha", extendScript.Hash(), 1, w.key, nil, ttl}, decode: decodeRW}
	if w.cfg.Fencing && len(e.nodes) == 1 {
		w.shape.decode = decodeRWFence1
	}
	w.setProven(acquireQuarantineArg)

	wait := *w // the waiting writer: leaves the marker for a TTL, polls at least every TTL/4
	wait.acquireTmpl = w.rwWriteTemplate(readers, intent, ttl)
	wait.setProven(acquireQuarantineArg)
	wait.cfg.Retry = capRetry(w.cfg.Retry, w.cfg.TTL/4)
	sh := *w.shape
	sh.gaveUp = func(ctx context.Context) {
		// Withdraw the marker: the deletes go out now, each bounded by the
		// node timeout, and are not waited for (Close waits for them).
		e.run(ctx, len(e.nodes), w.cfg.RoundTimeout(), []any{"del", intent}, decodeAny)
	}
	wait.shape = &sh
	return &RWMutex{read: &r, write: w, wait: &wait}, nil
}

// rwWriteTemplate is acquireTemplate for a read-write lock's writer: the
// lock key, its fence hash, the readers' set, the intent marker and, with the
// quarantine on, the node's marker; acquireTemplate's arguments, and the
// intent marker's TTL in ms (0: leave none).
func (m *Mutex) rwWriteTemplate(readers, intent string, intentMs int64) []any {
	mode, retention, floor := m.fenceMode(), m.cfg.FenceRetention.Milliseconds(), m.floorArg()
	if m.cfg.Quarantine > 0 {
		return []any{"evalsha", rwWriteScript.Hash(), 5, m.key, m.fenceKey, readers, intent, MarkerKey,
			nil, m.cfg.TTL.Milliseconds(), mode, m.cfg.Quarantine.Milliseconds(), retention, floor, intentMs}
	}
	return []any{"evalsha", rwWriteScript.Hash(), 4, m.key, m.fenceKey, readers, intent,
		nil, m.cfg.TTL.Milliseconds(), mode, 0, retention, floor, intentMs}
}

func rwSpanAttrs(m *Mutex, mode string) []trace.SpanStartOption {
	return spanOpts(trace.WithAttributes(
		attribute.String("redfence.key", m.key),
		attribute.String("redfence.rw", mode),
		attribute.Int("redfence.nodes", len(m.e.nodes)),
		attribute.Int("redfence.quorum", m.need),
		attribute.Bool("redfence.fencing", m.cfg.Fencing)))
}

// capRetry returns retry with every delay cut to at most most: a waiting
// writer must try again before its intent marker lapses.
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

func (c cappedBackOff) NextBackOff() time.Duration {
	d := c.BackOff.NextBackOff()
	if d == backoff.Stop {
		return d
	}
	return min(d, c.most)
}

// Key returns the full Redis key.
func (rw *RWMutex) Key() string { return rw.write.key }

// Reader returns the Mutex whose Lock and TryLock take read leases.
func (rw *RWMutex) Reader() *Mutex { return rw.read }

// Writer returns the Mutex whose TryLock takes a write lease in one
// attempt, leaving no intent marker.
func (rw *RWMutex) Writer() *Mutex { return rw.write }

// WaitingWriter returns the Mutex whose Lock waits for a write lease: its
// attempts refused by readers leave the intent marker, which holds new
// readers back; if it gives up, it deletes the marker.
func (rw *RWMutex) WaitingWriter() *Mutex { return rw.wait }

// takenError is a node's refusal that says why the key is taken; it is
// ErrTaken for errors.Is.
type takenError string

func (e takenError) Error() string        { return string(e) }
func (e takenError) Is(target error) bool { return target == ErrTaken }

const (
	errReadersHold = takenError("redfence: key held by readers")
	errWriterWaits = takenError("redfence: a writer waits for the key (new readers are held back)")
)

// decodeRW reads rw_rlock.lua's and rw_lock.lua's replies.
func decodeRW(cmd *redis.Cmd) (int64, error) {
	st, n, err := pair(cmd)
	switch {
	case err != nil, st == 1:
	case st == 0:
		err = ErrTaken
	case st == 2:
		err = errReadersHold
	case st == 3:
		err = errWriterWaits
	case st == -2:
		err = QuarantineError{Left: time.Duration(n) * time.Millisecond}
	default:
		err = fmt.Errorf("unexpected acquire status %d", st)
	}
	return n, err
}

// decodeRWFence1 is decodeRW for a fenced writer on one node: the reply
// carries the token.
func decodeRWFence1(cmd *redis.Cmd) (int64, error) {
	n, err := decodeRW(cmd)
	if err == nil && n <= 0 {
		err = fmt.Errorf("fence counter is %d: the key was changed outside redfence", n)
	}
	return n, err
}

// decodeAny accepts any reply that is not an error.
func decodeAny(cmd *redis.Cmd) (int64, error) { return 0, cmd.Err() }
