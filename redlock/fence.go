package redlock

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/internal/quorum"
)

// maxFenceRounds bounds phase 2's retries with a higher token.
const maxFenceRounds = 4

// fenceArgs is phase 2's command for proposal t.
func (m *Mutex) fenceArgs(value, t string) []any {
	s, ks := fenceScript, []string{m.key, m.fenceKey}
	if m.multi() {
		s, ks = multiFenceScript, m.multiKeys(true)
	}
	return withValue(m.scriptTemplate(s, false, ks, t, m.cfg.ttl.Milliseconds(), m.cfg.fenceRetention.Milliseconds(), m.floorArg()), value)
}

func decodeFence(cmd *redis.Cmd) (int64, error) {
	st, counter, err := pair(cmd)
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

// maxClockLead is how far above the median of the phase-1 values a node's
// may be and still raise the proposal: a node whose clock runs far ahead
// must not drag every token toward it (docs/fencing.md).
const maxClockLead = 5 * time.Second

// proposal returns fenced Redlock's first token: one above the highest
// phase-1 value, leaving out those over maxClockLead + timeout above the
// median (their nodes may refuse it; the others still form the quorum).
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
	limit := vals[(len(vals)-1)/2] + (maxClockLead + timeout).Microseconds()
	hi := vals[0]
	for _, v := range vals {
		if v <= limit {
			hi = v
		}
	}
	return hi + 1
}

// fence runs fenced Redlock's phase 2, retrying with a higher token while
// nodes report counters ahead, and returns the token a quorum acknowledged.
func (m *Mutex) fence(ctx context.Context, value string, start time.Time, phase1 []quorum.Reply[int64]) (token int64, err error) {
	ctx, span := m.e.tel.start(ctx, "redfence.fence", m.keyAttrs...)
	defer func() {
		if span.IsRecording() {
			span.SetAttributes(attribute.Int64("redfence.token", token))
		}
		endSpan(span, err)
	}()
	t := proposal(phase1, m.cfg.nodeTimeout)
	var last *QuorumError
	for round := 0; round < maxFenceRounds; round++ {
		if m.cfg.validity(m.e.now().Sub(start)) <= 0 {
			break
		}
		r := m.e.run(ctx, anyOrder, m.need, m.cfg.nodeTimeout, m.fenceArgs(value, strconv.FormatInt(t, 10)), decodeFence, proof{})
		ok := r.Decide()
		if span.IsRecording() {
			span.AddEvent("fence round", trace.WithAttributes(attribute.Int64("redfence.proposal", t), attribute.Int("redfence.acks", r.OK())))
		}
		if ok {
			return t, nil
		}
		m.e.tel.log.DebugContext(ctx, "redfence: fence proposal not acknowledged by a majority", "key", m.key, "proposal", t, "acks", r.OK())
		last = m.quorumError("fence", r)
		proposed := t
		for _, rep := range r.Replies() {
			var fa fenceAheadError
			if errors.As(rep.Err, &fa) {
				t = max(t, fa.counter+1) // above proposed: its node refused it as at or below its counter
			}
		}
		if t == proposed {
			break // missing holders or failures: a higher token would not help
		}
	}
	if last == nil {
		return 0, errors.New("fence: no validity left for phase 2")
	}
	return 0, last
}
