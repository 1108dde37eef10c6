package core

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

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

// acquireCall returns phase 1 of an acquire on one node: the quarantine
// check, the lock key and, with fencing, the counter (one node: the token
// itself; several: the node's counter).
func (m *Mutex) acquireCall(value string) quorum.Call[int64] {
	nodes := m.e.nodes
	if !m.cfg.Fencing && m.cfg.Quarantine == 0 {
		return func(ctx context.Context, i int) (int64, error) {
			ok, err := nodes[i].cmd.SetNX(ctx, m.key, value, m.cfg.TTL).Result()
			if err == nil && !ok {
				err = ErrTaken
			}
			return 0, err
		}
	}
	mode := "plain"
	switch {
	case m.cfg.Fencing && len(nodes) == 1:
		mode = "fence1"
	case m.cfg.Fencing:
		mode = "fenceN"
	}
	keys := []string{m.key, m.fenceKey}
	if m.cfg.Quarantine > 0 {
		keys = append(keys, MarkerKey) // not with Cluster clients: refused at New/NewMutex
	}
	ttl, q := m.cfg.TTL.Milliseconds(), m.cfg.Quarantine.Milliseconds()
	return func(ctx context.Context, i int) (int64, error) {
		v, err := acquireScript.Run(ctx, nodes[i].cmd, keys, value, ttl, mode, q).Result()
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
		case mode == "fence1" && n <= 0:
			err = fmt.Errorf("fence counter is %d: the key was changed outside redfence", n)
		}
		return n, err
	}
}

// Vouch marks every node as trusted for its current run: the restart
// quarantine does not apply to it until it restarts. It is the operator step
// for a brand-new set of nodes, which hold no lock yet.
func (e *Engine) Vouch(ctx context.Context) error {
	r := quorum.Start(ctx, len(e.nodes), len(e.nodes), max(e.timeout(), time.Second), &e.tracker,
		func(ctx context.Context, i int) (int64, error) {
			return 0, vouchScript.Run(ctx, e.nodes[i].Client, []string{MarkerKey}).Err()
		})
	if r.Wait() {
		return nil
	}
	return quorumError("vouch", e.nodes, r.Need(), r.OK(), r.Replies())
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
	var hi int64
	for _, rep := range phase1 {
		if rep.Err == nil || errors.Is(rep.Err, ErrTaken) {
			hi = max(hi, rep.Value)
		}
	}
	keys := []string{m.key, m.fenceKey}
	nodes := m.e.nodes
	var last *QuorumError
	for round := 0; round < MaxFenceRounds; round++ {
		if m.cfg.Validity(m.e.now().Sub(start)) <= 0 {
			break
		}
		t := hi + 1
		arg := strconv.FormatInt(t, 10)
		r := quorum.Start(ctx, len(nodes), m.e.need, m.cfg.NodeTimeout, &m.e.tracker,
			func(ctx context.Context, i int) (int64, error) {
				v, err := fenceScript.Run(ctx, nodes[i].cmd, keys, value, arg).Result()
				if err != nil {
					return 0, err
				}
				st, counter, err := pair(v)
				switch {
				case err != nil:
				case st == 0:
					err = fenceAheadError{counter}
				case st < 0:
					err = ErrNotHeld
				}
				return counter, err
			})
		ok := r.Decide()
		r.Stop()
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
				hi = max(hi, fa.counter)
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
