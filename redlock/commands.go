package redlock

import (
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/internal/keys"
)

// acquireArgs returns the command of phase 1 of an acquire on each node: the
// quarantine check, the lock key and, with fencing, the counter (one node: the
// token itself; several: the node's counter). Without quarantine or fencing it
// is a plain SET NX PX.
func (m *Mutex) acquireArgs(value any) []any {
	return withValue(m.acquireTmpl, value)
}

// claimArgs is acquireArgs for a waiter's claim of a key that releases
// handed it (waiting.go): the acquire script even where a plain SET NX
// would do, since only the script grants a value that holds the key
// already.
func (m *Mutex) claimArgs(value string) []any {
	if m.acquireTmpl[0] != "set" {
		return m.acquireArgs(value)
	}
	return []any{"evalsha", acquireScript.Hash(), 2, m.key, m.fenceKey, value, m.cfg.ttl.Milliseconds(), m.fenceMode(), 0,
		m.cfg.fenceRetention.Milliseconds(), m.floorArg()}
}

// acquireQuarantineArg is the ARGV index of the quarantine in acquire.lua
// and multi_acquire.lua (rw_lock.lua's too).
const acquireQuarantineArg = 4

// setProven gives m the proven form of its acquire (proof.go), with the
// quarantine on: for a plain unfenced lock the bare SET NX PX, otherwise the
// acquire script with its quarantine argument (ARGV[qArg]) at 0, off. Call
// it after setting acquireTmpl.
func (m *Mutex) setProven(qArg int) {
	m.provenTmpl, m.provenSet = nil, false
	switch {
	case m.cfg.quarantine == 0:
	case m.shape == nil && !m.multi() && !m.cfg.fenced && m.acquireTmpl[1] == acquireScript.Hash():
		m.provenTmpl, m.provenSet = []any{"set", m.key, nil, "px", m.cfg.ttl.Milliseconds(), "nx"}, true
	default:
		t := slices.Clone(m.acquireTmpl)
		t[3+t[2].(int)+qArg-1] = 0
		m.provenTmpl = t
	}
}

// acquireProof returns the proven form of the acquire of value, whose full
// form decodes with dec.
func (m *Mutex) acquireProof(value any, dec decoder) proof {
	switch {
	case m.provenTmpl == nil:
		return proof{}
	case m.provenSet:
		return proof{args: withValue(m.provenTmpl, value), decode: decodeSetNX}
	}
	return proof{args: withValue(m.provenTmpl, value), decode: dec}
}

// releaseTemplate is release.lua's command with a nil for the value: the
// lock key and, with the quarantine on, the node's marker (a hand-over is
// an acquire for the waiter: the node must be allowed to vote); the queue's
// key ("" with wake-up off), the release channel and the quarantine.
func (m *Mutex) releaseTemplate() []any {
	if m.cfg.quarantine > 0 {
		return []any{"evalsha", releaseScript.Hash(), 2, m.key, keys.Marker, nil, m.queueKey, keys.ReleasedPrefix + m.key, m.cfg.quarantine.Milliseconds()}
	}
	return []any{"evalsha", releaseScript.Hash(), 1, m.key, nil, m.queueKey, keys.ReleasedPrefix + m.key, 0}
}

// withValue copies a command template and puts value in its one nil slot.
func withValue(tmpl []any, value any) []any {
	args := make([]any, len(tmpl))
	copy(args, tmpl)
	for i, a := range args {
		if a == nil {
			args[i] = value
			break
		}
	}
	return args
}

// acquireTemplate builds acquireArgs' command with a nil for the value, once
// per Mutex: the fixed arguments are boxed once, not per acquire.
func (m *Mutex) acquireTemplate() []any {
	ttl := m.cfg.ttl.Milliseconds()
	if !m.cfg.fenced && m.cfg.quarantine == 0 {
		return []any{"set", m.key, nil, "px", ttl, "nx"}
	}
	mode, retention, floor := m.fenceMode(), m.cfg.fenceRetention.Milliseconds(), m.floorArg()
	if m.cfg.quarantine > 0 { // with the marker key; not with Cluster clients: refused at New/NewMutex
		return []any{"evalsha", acquireScript.Hash(), 3, m.key, m.fenceKey, keys.Marker, nil, ttl, mode, m.cfg.quarantine.Milliseconds(), retention, floor}
	}
	return []any{"evalsha", acquireScript.Hash(), 2, m.key, m.fenceKey, nil, ttl, mode, 0, retention, floor}
}

// fenceMode is the acquire scripts' fencing mode: "plain" without fencing,
// "fence1" when the one node issues the token itself, "fenceN" when each
// node proposes from its counter.
func (m *Mutex) fenceMode() string {
	switch {
	case !m.cfg.fenced:
		return "plain"
	case len(m.e.nodes) == 1:
		return "fence1"
	}
	return "fenceN"
}

// floorArg is the scripts' clock-floor switch: "1" unless a test turned the
// floor off.
func (m *Mutex) floorArg() string {
	if m.cfg.noClockFloor {
		return "0"
	}
	return "1"
}

// acquireDecoder returns how acquireArgs' replies read as votes.
func (m *Mutex) acquireDecoder() decoder {
	switch {
	case m.shape != nil:
		return m.shape.decode
	case !m.cfg.fenced && m.cfg.quarantine == 0:
		return decodeSetNX
	case m.cfg.fenced && len(m.e.nodes) == 1:
		return decodeAcquireFence1
	}
	return decodeAcquire
}

func decodeSetNX(cmd *redis.Cmd) (int64, error) {
	err := cmd.Err()
	if err == redis.Nil { //nolint:errorlint // go-redis returns the sentinel itself
		err = ErrTaken
	}
	return 0, err
}

func decodeAcquireFence1(cmd *redis.Cmd) (int64, error) {
	n, err := decodeAcquire(cmd)
	if err == nil && n <= 0 {
		err = fmt.Errorf("fence counter is %d: the key was changed outside redfence", n)
	}
	return n, err
}

func decodeAcquire(cmd *redis.Cmd) (int64, error) {
	st, n, err := pair(cmd)
	switch {
	case err != nil:
	case st == 0:
		err = ErrTaken
	case st == -2:
		err = quarantineError{left: time.Duration(n) * time.Millisecond}
	case st != 1:
		err = fmt.Errorf("unexpected acquire status %d", st)
	}
	return n, err
}

// pair parses cmd's {status, counter} script reply.
func pair(cmd *redis.Cmd) (status, counter int64, err error) {
	v, err := cmd.Result()
	if err != nil {
		return 0, 0, err
	}
	a, ok := v.([]any)
	if !ok || len(a) != 2 {
		return 0, 0, fmt.Errorf("unexpected script reply %v", v)
	}
	s, ok1 := a[0].(int64)
	c, ok2 := a[1].(int64)
	if !ok1 || !ok2 {
		return 0, 0, fmt.Errorf("unexpected script reply %v", v)
	}
	return s, c, nil
}
