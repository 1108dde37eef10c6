package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/internal/quorum"
)

// MaxFenceRounds bounds how many times phase 2 is retried with a higher
// token after nodes report counters ahead of the proposal.
const MaxFenceRounds = 4

// FenceKey returns the key of the fence hash for lock key k. It shares k's
// Redis Cluster hash slot: k's own hash tag when it has one, otherwise k
// wrapped in braces (which hashes exactly as k does).
func FenceKey(k string) string {
	if i := strings.IndexByte(k, '{'); i >= 0 {
		if j := strings.IndexByte(k[i+1:], '}'); j > 0 {
			return k + ":fence" // k has a hash tag; keep it
		}
	}
	if !strings.Contains(k, "}") {
		return "{" + k + "}:fence"
	}
	return k + ":fence" // no usable tag: fine outside Cluster
}

// pair parses a {status, counter} script reply.
func pair(v any) (status, counter int64, err error) {
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

// MarkerKey is the key of each node's restart-quarantine marker, a hash with
// fields ready_at (node clock, ms) and vouched (the run id vouched for).
const MarkerKey = "redfence:node"

// acquireArgs returns the command of phase 1 of an acquire on each node: the
// quarantine check, the lock key and, with fencing, the counter (one node: the
// token itself; several: the node's counter). Without quarantine or fencing it
// is a plain SET NX PX.
func (m *Mutex) acquireArgs(value string) []any {
	return withValue(m.acquireTmpl, value)
}

// withValue copies a command template and puts value in its one nil slot.
func withValue(tmpl []any, value string) []any {
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
	ttl := m.cfg.TTL.Milliseconds()
	if !m.cfg.Fencing && m.cfg.Quarantine == 0 {
		return []any{"set", m.key, nil, "px", ttl, "nx"}
	}
	mode := "plain"
	switch {
	case m.cfg.Fencing && len(m.e.nodes) == 1:
		mode = "fence1"
	case m.cfg.Fencing:
		mode = "fenceN"
	}
	retention, floor := m.cfg.FenceRetention.Milliseconds(), m.floorArg()
	if m.cfg.Quarantine > 0 { // with the marker key; not with Cluster clients: refused at New/NewMutex
		return []any{"evalsha", acquireScript.Hash(), 3, m.key, m.fenceKey, MarkerKey, nil, ttl, mode, m.cfg.Quarantine.Milliseconds(), retention, floor}
	}
	return []any{"evalsha", acquireScript.Hash(), 2, m.key, m.fenceKey, nil, ttl, mode, 0, retention, floor}
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
	case !m.cfg.Fencing && m.cfg.Quarantine == 0:
		return decodeSetNX
	case m.cfg.Fencing && len(m.e.nodes) == 1:
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
	v, err := cmd.Result()
	if err != nil {
		return 0, err
	}
	st, n, err := pair(v)
	switch {
	case err != nil:
	case st == 0:
		err = ErrTaken
	case st == -2:
		err = QuarantineError{Left: time.Duration(n) * time.Millisecond}
	case st != 1:
		err = fmt.Errorf("unexpected acquire status %d", st)
	}
	return n, err
}

// ErrNotNew is a node's error (inside a NodeError of Vouch's *QuorumError)
// when the node shows it was in use: it holds keys besides its marker, or it
// was vouched for in an earlier run. Vouch then vouches for no node.
var ErrNotNew = errors.New("redfence: node is not brand-new")

// notNewError is ErrNotNew with what the node shows.
type notNewError struct{ why string }

func (e notNewError) Error() string { return ErrNotNew.Error() + ": " + e.why }

func (e notNewError) Unwrap() error { return ErrNotNew }

// errVouchedForNone is the error of the nodes that passed Vouch's check
// when another did not.
var errVouchedForNone = errors.New("no node is vouched for unless every node answers and none shows it was in use")

// Vouch marks every node as trusted for its current run: the restart
// quarantine does not apply to it until it restarts. It is the operator step
// for a brand-new set of nodes, which hold no lock yet, and it refuses
// anything else. It first checks every node: a node that holds any key
// besides its marker (a lock key, a fence hash, other data) or was vouched
// for in an earlier run shows that the set is not brand-new. The nodes
// without a marker may then be ones that lost their data while a lock was
// held, and the node that shows use may hold that lock's key; vouching would
// let a second client take it. So unless every node answers and none shows
// use, Vouch vouches for none and returns a *QuorumError (ErrNotNew for the
// nodes that show use). When every node is already vouched for in its current
// run it changes nothing and returns nil.
func (e *Engine) Vouch(ctx context.Context) error {
	timeout := max(e.timeout(), time.Second)
	check := e.vouchRound(ctx, "check", timeout)
	check.Wait()
	replies := check.Replies()
	already, inUse := true, false
	for _, rep := range replies {
		if rep.Err == nil {
			already = already && rep.Value.vouched
			inUse = inUse || rep.Value.why != ""
		}
	}
	switch {
	case check.Reached() && already:
		return nil // nothing to change
	case !check.Reached() || inUse:
		// Vouch for none: every node is listed with why.
		qe := &QuorumError{Op: "vouch", Need: len(e.nodes)}
		for _, rep := range replies {
			err := rep.Err
			switch {
			case err != nil:
			case rep.Value.why != "":
				err = notNewError{rep.Value.why}
			default:
				err = errVouchedForNone
			}
			qe.Nodes = append(qe.Nodes, NodeError{Index: rep.Index, Addr: e.nodes[rep.Index].Addr, Err: err})
		}
		slices.SortFunc(qe.Nodes, func(a, b NodeError) int { return a.Index - b.Index })
		return qe
	}
	// The script checks again, atomically with the vouching.
	r := e.vouchRound(ctx, "vouch", timeout)
	r.Wait()
	got := r.Replies()
	res := make([]quorum.Reply[vouchState], len(got))
	ok := 0
	for i, rep := range got {
		if rep.Err == nil && rep.Value.why != "" {
			rep.Err = notNewError{rep.Value.why}
		}
		if rep.Err == nil {
			ok++
		}
		res[i] = rep
	}
	if ok == len(e.nodes) {
		return nil
	}
	return quorumError("vouch", e.nodes, len(e.nodes), ok, res)
}

// vouchState is one node's answer to the vouch script: whether it was
// vouched for in its current run already, and what shows that it was in use
// ("" for nothing).
type vouchState struct {
	vouched bool
	why     string
}

// vouchRound runs the vouch script in mode ("check" or "vouch") on every
// node.
func (e *Engine) vouchRound(ctx context.Context, mode string, timeout time.Duration) *quorum.Round[vouchState] {
	return quorum.Start(ctx, len(e.nodes), len(e.nodes), timeout, &e.tracker,
		func(ctx context.Context, i int) (vouchState, error) {
			v, err := vouchScript.Run(ctx, e.nodes[i].Client, []string{MarkerKey}, mode).Result()
			if err != nil {
				return vouchState{}, err
			}
			a, ok := v.([]any)
			if !ok || len(a) != 2 {
				return vouchState{}, fmt.Errorf("unexpected vouch reply %v", v)
			}
			vouched, ok1 := a[0].(int64)
			why, ok2 := a[1].(string)
			if !ok1 || !ok2 {
				return vouchState{}, fmt.Errorf("unexpected vouch reply %v", v)
			}
			return vouchState{vouched: vouched == 1, why: why}, nil
		})
}

func decodeFence(cmd *redis.Cmd) (int64, error) {
	v, err := cmd.Result()
	if err != nil {
		return 0, err
	}
	st, counter, err := pair(v)
	switch {
	case err != nil:
	case st == 0:
		err = fenceAheadError{counter}
	case st == -3:
		err = fenceBelowClockError{counter}
	case st < 0:
		err = ErrNotHeld
	}
	return counter, err
}

// MaxClockLead is how far above the median of a round's phase-1 values a
// node's value may be and still raise the proposal: a node whose clock runs
// far ahead must not drag every token toward it (docs/fencing.md).
const MaxClockLead = 5 * time.Second

// proposal returns the first token fenced Redlock proposes: one above the
// highest phase-1 value (each node's max(counter, clock in microseconds)),
// leaving out values more than MaxClockLead + timeout above the median. A node
// left out refuses the proposal in phase 2 if it is below its own clock; the
// others still form the quorum.
func proposal(phase1 []quorum.Reply[int64], timeout time.Duration) int64 {
	var vals []int64
	for _, rep := range phase1 {
		if rep.Err == nil || errors.Is(rep.Err, ErrTaken) {
			vals = append(vals, rep.Value)
		}
	}
	if len(vals) == 0 {
		return 1
	}
	slices.Sort(vals)
	limit := vals[(len(vals)-1)/2] + (MaxClockLead + timeout).Microseconds()
	hi := vals[0]
	for _, v := range vals {
		if v <= limit {
			hi = v
		}
	}
	return hi + 1
}

// fence runs phase 2 of fenced Redlock: propose 1 + the highest counter seen
// in phase 1, and retry with a higher token while nodes report counters ahead
// of it, for as long as validity remains. It returns the token a quorum
// acknowledged.
func (m *Mutex) fence(ctx context.Context, value string, start time.Time, phase1 []quorum.Reply[int64]) (token int64, err error) {
	ctx, span := m.e.tel.tracer.Start(ctx, "redfence.fence", m.keyAttrs)
	defer func() {
		if span.IsRecording() {
			span.SetAttributes(attribute.Int64("redfence.token", token))
		}
		endSpan(span, err)
	}()
	t := proposal(phase1, m.cfg.NodeTimeout)
	nodes := m.e.nodes
	var last *QuorumError
	for round := 0; round < MaxFenceRounds; round++ {
		if m.cfg.Validity(m.e.now().Sub(start)) <= 0 {
			break
		}
		arg := strconv.FormatInt(t, 10)
		r := m.e.run(ctx, m.e.need, m.cfg.NodeTimeout, []any{"evalsha", fenceScript.Hash(), 2, m.key, m.fenceKey, value, arg,
			m.cfg.TTL.Milliseconds(), m.cfg.FenceRetention.Milliseconds(), m.floorArg()}, decodeFence)
		ok := r.Decide()
		if span.IsRecording() {
			span.AddEvent("fence round", trace.WithAttributes(attribute.Int64("redfence.proposal", t), attribute.Int("redfence.acks", r.OK())))
		}
		if ok {
			return t, nil
		}
		m.e.tel.log.DebugContext(ctx, "redfence: fence proposal not acknowledged by a majority", "key", m.key, "proposal", t, "acks", r.OK())
		last = quorumError("fence", nodes, r.Need(), r.OK(), r.Replies())
		ahead := false
		for _, rep := range r.Replies() {
			var fa fenceAheadError
			if errors.As(rep.Err, &fa) {
				ahead = true
				t = max(t, fa.counter+1)
			}
		}
		if !ahead {
			break // missing holders or failures: a higher token would not help
		}
	}
	if last == nil {
		return 0, errors.New("fence: no validity left for phase 2")
	}
	return 0, last
}
