package redlock

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/internal/keys"
	"github.com/redfence/redfence/redisconn"
)

// maxMultiKeys caps a multi-key Mutex: each of its scripts holds its node
// for as long as it runs over every key.
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
	switch {
	case len(keys) == 0:
		return nil, &ConfigError{Pkg: e.pkg, Field: "keys", Msg: "empty list"}
	case len(keys) > maxMultiKeys:
		return nil, &ConfigError{Pkg: e.pkg, Field: "keys", Msg: fmt.Sprintf("%d keys, more than the %d a multi-key lock takes", len(keys), maxMultiKeys)}
	}
	m, err := e.NewMutex(keys[0], opts...) // the configuration and the first key
	if err != nil || len(keys) == 1 {
		return m, err // one key: a plain Mutex
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
	m.spanAttrs = m.acquireSpanAttrs(attribute.Int("redfence.keys", len(full)))
	m.keyAttrs = []trace.SpanStartOption{trace.WithAttributes(attribute.String("redfence.key", m.key),
		attribute.Int("redfence.keys", len(full)))}
	m.acquireTmpl = m.voteTemplate(multiAcquireScript, m.multiKeys(m.cfg.fenced), strconv.Itoa(len(full)))
	m.releaseTmpl = m.scriptTemplate(multiReleaseScript, false, full)
	m.extendTmpl = m.scriptTemplate(multiExtendScript, false, full, m.cfg.ttl.Milliseconds())
	m.shape = &shape{decode: decodeAcquire}
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

func (m *Mutex) multi() bool { return m.keys != nil }

func (m *Mutex) multiKeys(fenced bool) []string {
	ks := slices.Clone(m.keys)
	if fenced {
		for _, k := range m.keys {
			ks = append(ks, keys.Fence(k))
		}
	}
	return ks
}

// multiTokens collects a fenced multi-key acquire's tokens on one node
// (fence1), written before the round gets the reply.
type multiTokens struct {
	fenced bool
	v      []fencing.Token
}

var decodeMultiPlain = (&multiTokens{}).decode

// decode reads multi_acquire.lua's reply: the first token (or 0) is the vote.
func (t *multiTokens) decode(cmd *redis.Cmd) (int64, error) {
	v, err := cmd.Result()
	if err != nil {
		return 0, err
	}
	a, ok := v.([]any)
	ns := make([]int64, len(a))
	for i := 0; ok && i < len(a); i++ {
		ns[i], ok = a[i].(int64)
	}
	if !ok || len(a) < 2 {
		return 0, fmt.Errorf("unexpected script reply %v", v)
	}
	if st := ns[0]; st != 1 {
		return 0, statusError("acquire", st, ns[1])
	}
	if !t.fenced {
		return 0, nil
	}
	t.v = make([]fencing.Token, len(ns)-1)
	for i, n := range ns[1:] {
		if n <= 0 {
			return 0, counterError(n)
		}
		t.v[i] = fencing.Token(n)
	}
	return ns[1], nil
}

const clusterSlots = 16384

// hashTag returns the part of k that Redis Cluster and go-redis's Ring hash.
func hashTag(k string) string {
	if t, ok := keys.Tag(k); ok {
		return t
	}
	return k
}

func slotOf(k string) int {
	var crc uint16
	for _, b := range []byte(hashTag(k)) {
		crc ^= uint16(b) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % clusterSlots
}

// colocation is why a lock's keys must reach one server, and how.
type colocation struct{ why, fix string }

var (
	multiColocation = colocation{
		why: "a multi-key lock runs one script per node over all its keys",
		fix: "give the keys a common hash tag, such as {orders}:a and {orders}:b",
	}
	rwColocation = colocation{
		why: "a read-write lock keeps its readers' set and writer-intent marker beside its key and runs one script per node over all three",
		fix: "give the key a hash tag, such as {catalog} or {catalog}:lock, or leave '}' out of it (the lock then puts it in braces itself)",
	}
)

// checkColocated refuses keys that a Cluster or Ring client would send to
// different servers: one script per node must see every key.
func checkColocated(pkg string, nodes []node, keys []string, c colocation) error {
	for i, n := range nodes {
		switch n.conn.Info().Topology {
		case redisconn.Cluster:
			for _, k := range keys[1:] {
				if slotOf(k) != slotOf(keys[0]) {
					return &ConfigError{Pkg: pkg, Field: "keys", Msg: fmt.Sprintf("client %d is a Redis Cluster client and keys %q (slot %d) and %q (slot %d) hash to different slots: %s, which Cluster allows only within one slot; %s",
						i, keys[0], slotOf(keys[0]), k, slotOf(k), c.why, c.fix)}
				}
			}
		case redisconn.Ring:
			for _, k := range keys[1:] {
				if hashTag(k) != hashTag(keys[0]) {
					return &ConfigError{Pkg: pkg, Field: "keys", Msg: fmt.Sprintf("client %d is a Ring and keys %q and %q have different hash tags, so the Ring may place them on different shards: %s; %s",
						i, keys[0], k, c.why, c.fix)}
				}
			}
		}
	}
	return nil
}
