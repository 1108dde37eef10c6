package redlock

import (
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/internal/keys"
)

func (m *Mutex) acquireArgs(value any) []any {
	return withValue(m.acquireTmpl, value)
}

// acquireQuarantineArg is the quarantine's ARGV index in acquire.lua,
// multi_acquire.lua and rw_lock.lua.
const acquireQuarantineArg = 4

// setProven gives m the proven form of its acquire (proof.go) with the
// quarantine on: the bare SET NX PX for a plain unfenced lock, else the
// script with its quarantine, ARGV[qArg], off. Call it after acquireTmpl.
func (m *Mutex) setProven(qArg int) {
	m.provenTmpl, m.provenSet = nil, false
	switch {
	case m.cfg.quarantine == 0:
	case m.shape == nil && !m.multi() && !m.cfg.fenced && m.acquireTmpl[1] == acquireScript.Hash():
		m.provenTmpl, m.provenSet = []any{"set", m.key, nil, "px", m.cfg.ttl.Milliseconds(), "nx"}, true
	default:
		m.provenTmpl = unquarantined(m.acquireTmpl, qArg)
	}
}

// unquarantined returns a copy of a script's command, its quarantine off.
func unquarantined(args []any, qArg int) []any {
	a := slices.Clone(args)
	a[3+a[2].(int)+qArg-1] = 0
	return a
}

func (m *Mutex) acquireProof(value any, dec decoder) proof {
	switch {
	case m.provenTmpl == nil:
		return proof{}
	case m.provenSet:
		dec = decodeSetNX
	}
	return proof{args: withValue(m.provenTmpl, value), decode: dec}
}

// scriptTemplate is script s's command over ks, then, if marked and the
// quarantine is on, the node's marker (not with Cluster clients: refused at
// New and NewMutex), a nil for the value (withValue), and args. Templates are
// made once per Mutex, so that their arguments are boxed once.
func (m *Mutex) scriptTemplate(s *redis.Script, marked bool, ks []string, args ...any) []any {
	if marked && m.cfg.quarantine > 0 {
		ks = append(slices.Clip(ks), keys.Marker)
	}
	return evalsha(s, ks, append([]any{nil}, args...)...)
}

// withValue copies a template and puts value in its one nil slot.
func withValue(tmpl []any, value any) []any {
	args := slices.Clone(tmpl)
	args[slices.Index(args, nil)] = value
	return args
}

// voteTemplate is scriptTemplate, marked, for the acquire of a lock that
// may be fenced (acquire.lua, multi_acquire.lua, rw_lock.lua): the TTL,
// fencing mode, quarantine (ARGV[acquireQuarantineArg]), fence retention and
// clock floor, then extra.
func (m *Mutex) voteTemplate(s *redis.Script, ks []string, extra ...any) []any {
	return m.scriptTemplate(s, true, ks, append([]any{m.cfg.ttl.Milliseconds(), m.fenceMode(), m.cfg.quarantine.Milliseconds(),
		m.cfg.fenceRetention.Milliseconds(), m.floorArg()}, extra...)...)
}

// fenceMode is the scripts' fencing mode: "plain", "fence1" (the one node
// issues the token) or "fenceN" (each node proposes from its counter).
func (m *Mutex) fenceMode() string {
	switch {
	case !m.cfg.fenced:
		return "plain"
	case len(m.e.nodes) == 1:
		return "fence1"
	}
	return "fenceN"
}

func (m *Mutex) floorArg() string {
	if m.cfg.noClockFloor {
		return "0"
	}
	return "1"
}

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

var (
	decodeAcquireFence1 = fence1(decodeAcquire)
	decodeRWFence1      = fence1(decodeRW)
)

// fence1 is dec for a fenced lock on one node, whose reply is the token.
func fence1(dec decoder) decoder {
	return func(cmd *redis.Cmd) (int64, error) {
		n, err := dec(cmd)
		if err == nil && n <= 0 {
			err = counterError(n)
		}
		return n, err
	}
}

func counterError(n int64) error {
	return fmt.Errorf("fence counter is %d: the key was changed outside redfence", n)
}

func decodeAcquire(cmd *redis.Cmd) (int64, error) {
	st, n, err := pair(cmd)
	if err == nil && st != 1 {
		err = statusError("acquire", st, n)
	}
	return n, err
}

// statusError is the error of a script's status st other than 1: ErrTaken,
// a quarantined node's refusal with n ms left, or an unexpected status.
func statusError(op string, st, n int64) error {
	switch st {
	case 0:
		return ErrTaken
	case -2:
		return quarantineError{left: time.Duration(n) * time.Millisecond}
	}
	return fmt.Errorf("unexpected %s status %d", op, st)
}

func pair(cmd *redis.Cmd) (status, counter int64, err error) {
	v, err := cmd.Result()
	if err != nil {
		return 0, 0, err
	}
	if a, ok := v.([]any); ok && len(a) == 2 {
		s, ok1 := a[0].(int64)
		c, ok2 := a[1].(int64)
		if ok1 && ok2 {
			return s, c, nil
		}
	}
	return 0, 0, fmt.Errorf("unexpected script reply %v", v)
}
