package redlock

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/internal/keys"
)

// maxMultiKeys caps the keys of a multi-key Mutex: each acquire, extend and
// release is one script over every key, which holds its node for as long.
const maxMultiKeys = 64

// NewMultiMutex returns a Mutex that locks all of keys or none, in one
// round: two multi-key locks over overlapping keys never both hold nor
// deadlock, and one excludes a plain Mutex on any of its keys. It returns
// a *ConfigError as NewMutex does, and for a repeated key, more than 64
// keys, or keys a Cluster or Ring client would place on different servers
// (give them one hash tag). With fencing each key has a token
// (Lease.Tokens). Lock polls: the queue of waiters is a plain Mutex's
// (docs/shapes.md, Multi-key locks).
func (e *Client) NewMultiMutex(keys []string, opts ...Option) (*Mutex, error) {
	return e.newMultiMutex(keys, buildConfig(opts))
}

// newMultiMutex validates keys and the merged configuration, for a lock on
// every key at once: an acquire sets all of them or none, on each node in
// one script (multi_acquire.lua). Each key is checked as NewMutex checks
// one; an empty list, a repeated key (prefix included) and more than
// MaxMultiKeys keys are refused, as are keys that a Cluster or Ring client
// would send to different servers (checkColocated). One key gives a plain
// Mutex. With fencing over several nodes, phase 2 (multi_fence.lua) gives
// every key the one token a majority acknowledged for all of them.
func (e *Client) newMultiMutex(keys []string, over config) (*Mutex, error) {
	switch {
	case len(keys) == 0:
		return nil, &ConfigError{Pkg: e.pkg, Field: "keys", Msg: "empty list"}
	case len(keys) > maxMultiKeys:
		return nil, &ConfigError{Pkg: e.pkg, Field: "keys", Msg: fmt.Sprintf("%d keys, more than the %d a multi-key lock takes", len(keys), maxMultiKeys)}
	}
	m, err := e.newMutex(keys[0], over) // the configuration and the first key
	if err != nil || len(keys) == 1 {
		return m, err
	}
	full := make([]string, len(keys))
	for i, k := range keys {
		if k == "" {
			return nil, &ConfigError{Pkg: e.pkg, Field: "keys", Msg: fmt.Sprintf("key %d is empty", i)}
		}
		full[i] = m.cfg.keyPrefix + k
		if why := reservedKey(full[i]); why != "" {
			return nil, &ConfigError{Pkg: e.pkg, Field: "keys", Msg: fmt.Sprintf("%q is %s", full[i], why)}
		}
		if j := slices.Index(full[:i], full[i]); j >= 0 {
			return nil, &ConfigError{Pkg: e.pkg, Field: "keys", Msg: fmt.Sprintf("keys %d and %d are both %q", j, i, full[i])}
		}
	}
	if err := checkColocated(e.pkg, e.nodes, full, multiColocation); err != nil {
		return nil, err
	}
	m.keys = full
	m.spanAttrs = spanOpts(trace.WithAttributes(
		attribute.String("redfence.key", m.key),
		attribute.Int("redfence.keys", len(full)),
		attribute.Int("redfence.nodes", len(e.nodes)),
		attribute.Int("redfence.quorum", e.need),
		attribute.Bool("redfence.fencing", m.cfg.fenced)))
	m.keyAttrs = spanOpts(trace.WithAttributes(attribute.String("redfence.key", m.key), attribute.Int("redfence.keys", len(full))))
	m.acquireTmpl = m.multiAcquireTemplate()
	m.releaseTmpl = m.multiTemplate(multiReleaseScript)
	m.shape = &shape{extendTmpl: m.multiTemplate(multiExtendScript, m.cfg.ttl.Milliseconds()), decode: decodeAcquire}
	m.setProven(acquireQuarantineArg)
	if !m.cfg.fenced || len(e.nodes) == 1 {
		m.shape.decode = decodeMultiPlain // fence1: replaced by acquire's own multiTokens
	}
	return m, nil
}

// Keys returns the lock's Redis keys, prefix included, in the order given.
func (m *Mutex) Keys() []string {
	if m.keys == nil {
		return []string{m.key}
	}
	return slices.Clone(m.keys)
}

// multi reports whether m locks several keys.
func (m *Mutex) multi() bool { return m.keys != nil }

// multiTemplate is the command of script s over every lock key, with a nil
// for the value (withValue).
func (m *Mutex) multiTemplate(s *redis.Script, args ...any) []any {
	a := make([]any, 0, 4+len(m.keys)+len(args))
	a = append(a, "evalsha", s.Hash(), len(m.keys))
	for _, k := range m.keys {
		a = append(a, k)
	}
	a = append(a, nil)
	return append(a, args...)
}

// multiAcquireTemplate is acquireTemplate for several keys: the lock keys,
// their fence hashes with fencing, the marker with the quarantine on.
func (m *Mutex) multiAcquireTemplate() []any {
	n := len(m.keys)
	numKeys := n
	if m.cfg.fenced {
		numKeys += n
	}
	if m.cfg.quarantine > 0 {
		numKeys++
	}
	a := make([]any, 0, 3+numKeys+7)
	a = append(a, "evalsha", multiAcquireScript.Hash(), numKeys)
	for _, k := range m.keys {
		a = append(a, k)
	}
	if m.cfg.fenced {
		for _, k := range m.keys {
			a = append(a, keys.Fence(k))
		}
	}
	if m.cfg.quarantine > 0 {
		a = append(a, keys.Marker)
	}
	return append(a, nil, m.cfg.ttl.Milliseconds(), m.fenceMode(), m.cfg.quarantine.Milliseconds(),
		m.cfg.fenceRetention.Milliseconds(), m.floorArg(), strconv.Itoa(n))
}

// multiTokens collects the tokens of a fenced multi-key acquire on one
// node (fence1): decode writes them before the round gets the reply, so they are
// there once the round has decided. Without fencing it collects nothing.
type multiTokens struct {
	fenced bool
	v      []uint64
}

// decodeMultiPlain reads an unfenced multi-key acquire's replies.
var decodeMultiPlain = (&multiTokens{}).decode

// decode reads multi_acquire.lua's reply: the first token (or 0) as the
// vote and, with fencing, every key's token into t.
func (t *multiTokens) decode(cmd *redis.Cmd) (int64, error) {
	v, err := cmd.Result()
	if err != nil {
		return 0, err
	}
	a, ok := v.([]any)
	if !ok || len(a) < 2 {
		return 0, fmt.Errorf("unexpected script reply %v", v)
	}
	ns := make([]int64, len(a))
	for i, x := range a {
		if ns[i], ok = x.(int64); !ok {
			return 0, fmt.Errorf("unexpected script reply %v", v)
		}
	}
	switch st := ns[0]; {
	case st == 0:
		return 0, ErrTaken
	case st == -2:
		return 0, quarantineError{left: time.Duration(ns[1]) * time.Millisecond}
	case st != 1:
		return 0, fmt.Errorf("unexpected acquire status %d", st)
	}
	if !t.fenced {
		return 0, nil
	}
	t.v = make([]uint64, len(ns)-1)
	for i, n := range ns[1:] {
		if n <= 0 {
			return 0, fmt.Errorf("fence counter is %d: the key was changed outside redfence", n)
		}
		t.v[i] = uint64(n)
	}
	return ns[1], nil
}
