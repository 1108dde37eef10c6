package redlock

import (
	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/internal/core"
)

// MaxMultiKeys is the most keys NewMultiMutex takes: every acquire, extend
// and release is one script over all of them on each node.
const MaxMultiKeys = core.MaxMultiKeys

// NewMultiMutex returns a Mutex that locks every one of keys at once, with
// opts overriding the Client's defaults. An acquire sets all the keys or
// none: on each node one script checks that every key is free (or already
// this acquire's) and only then sets them all, so two multi-key locks over
// overlapping keys never both hold and never deadlock, and a multi-key lock
// and a plain Mutex on one of its keys exclude each other. Extend renews
// every key only where every key still holds the lease's value (a missing
// key is never re-created: the lease is lost, as for one key), and Release
// deletes only the keys that hold it. The lease's lifecycle, errors and
// validity are those of a one-key Mutex; see docs/shapes.md.
//
// Keys are checked as NewMutex checks one (prefix applied). It returns a
// *ConfigError for an empty list, an empty or reserved key, a key given
// twice, more than MaxMultiKeys keys, and keys that a Cluster client would
// send to different hash slots (or a Ring to different shards: give them a
// common hash tag, such as {orders}:a and {orders}:b). One key gives the
// plain Mutex of NewMutex.
//
// With WithFencing, each key has a token (Lease.Tokens), and each key's
// tokens increase with every acquisition of that key, by a multi-key lock or
// a plain one (docs/fencing.md's guarantee, per key). With one node each key
// gets its own next token; over several nodes, fenced Redlock's second phase
// proposes one token for the whole set, which every key then carries.
//
// A Lock on a multi-key Mutex waits by polling under its retry policy: the
// wake-up of WithWakeup is per key, and does not apply.
func (c *Client) NewMultiMutex(keys []string, opts ...Option) (*Mutex, error) {
	m, err := c.e.NewMultiMutex(keys, buildConfig(opts))
	if err != nil {
		return nil, err
	}
	return &Mutex{m: m}, nil
}

// Keys returns the Redis keys of the lock, prefix included: the one key of
// NewMutex, or NewMultiMutex's keys in the order given.
func (m *Mutex) Keys() []string { return m.m.Keys() }

// Keys returns the Redis keys of the lease, as Mutex.Keys.
func (l *Lease) Keys() []string { return l.core().Keys() }

// Tokens returns the lease's fencing tokens, one per key in Keys' order (for
// one key, Token's alone), or nil when fencing is off. For a multi-key lease,
// Token returns the first key's; over several nodes every key carries the
// same token. Each key's tokens increase with every acquisition of that key,
// by a multi-key lock or a plain one.
func (l *Lease) Tokens() []fencing.Token {
	ts := l.core().Tokens()
	if ts == nil {
		return nil
	}
	out := make([]fencing.Token, len(ts))
	for i, t := range ts {
		out[i] = fencing.Token(t)
	}
	return out
}
