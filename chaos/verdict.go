package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// verdict collects a run's failed expectations and findings.
type verdict struct {
	res   *Result
	ops   []Op
	fails []string
	facts []string
}

// want records a failed expectation unless ok.
func (v *verdict) want(ok bool, format string, args ...any) {
	if !ok {
		v.fails = append(v.fails, fmt.Sprintf(format, args...))
	}
}

// fact records a finding.
func (v *verdict) fact(format string, args ...any) {
	v.facts = append(v.facts, fmt.Sprintf(format, args...))
}

// result computes the run's Result and checks its expectation with s's
// check.
func (r *run) result(ctx context.Context, s script) Result {
	ops := r.h.Ops()
	st := computeStats(ops, r.start, r.end, defaultAcquireTimeout, scenarioOverrunSlack)
	// A memoryCounter fails only on a finished context.
	final, _ := r.control.Get(context.WithoutCancel(ctx))
	st.ControlValue = final
	st.LostUpdates = max(0, st.ControlIncrements-int(final))
	res := NewResult(ops, st, r.opts.CheckTimeout)
	res.Scenario, res.Lock, res.Backend = r.sc.Name, r.lock, r.backend.Name()
	res.KeysLeft = r.keysLeft
	r.mu.Lock()
	heal := r.heal
	facts := slices.Clone(r.facts)
	r.mu.Unlock()
	if heal > 0 {
		if d, ok := st.RecoveryAfter(heal); ok {
			res.Recovery = max(d, time.Microsecond)
		} else {
			res.Unrecovered = true
		}
	}
	v := &verdict{res: &res, ops: ops, facts: facts}
	r.commonChecks(v, st)
	s.check(r, v)
	res.Pass = len(v.fails) == 0
	var note strings.Builder
	note.WriteString("expected: " + r.sc.Expect)
	if len(v.facts) > 0 {
		note.WriteString(" Seen: " + strings.Join(v.facts, "; ") + ".")
	}
	if len(v.fails) > 0 {
		note.WriteString(" FAILED: " + strings.Join(v.fails, "; ") + ".")
	}
	res.Note = note.String()
	return res
}

// commonChecks are the expectations of every scenario, less what the
// scenario's flags exempt.
func (r *run) commonChecks(v *verdict, st *Stats) {
	res := v.res
	v.want(res.Grants > 0, "no acquire was granted")
	if !r.sc.unsafe {
		v.want(res.DoubleGrants == 0, "%d double grants, want 0", res.DoubleGrants)
		v.want(res.Linearizable != string(Violation), "linearizability checker: %s", res.Linearizable)
	} else if res.Linearizable == string(Violation) {
		v.fact("mutex model violated, as expected")
	}
	v.want(res.FencedViolations == 0, "%d fenced-resource violations, want 0", res.FencedViolations)
	if !r.sc.lossExpected {
		v.want(res.LostUpdates == 0, "%d lost updates in the control, want 0", res.LostUpdates)
	}
	dups, regressions, example := tokenProblems(v.ops)
	v.want(dups+regressions == 0, "tokens: %d repeated, %d not above an earlier one (%s)", dups, regressions, example)
	nonPositive := 0
	for _, op := range v.ops {
		if op.Kind == Acquire && op.Status == OK && !op.Held() {
			nonPositive++
		}
	}
	v.want(nonPositive == 0, "%d leases granted with no validity left", nonPositive)
	v.want(res.KeysLeft == 0, "%d lock keys left after their TTL (nodes checked: %s)", res.KeysLeft, strings.Join(r.keysChecked, ","))
	// Every acquire attempt is bounded by its context and the per-node
	// timeout, whatever the fault.
	v.want(st.Overran == 0, "%d acquires overran their deadline", st.Overran)
}

// tokenProblems checks the tokens of granted acquires against the fencing
// guarantee: no two share a token (dups), and one that began after another
// returned has a larger token (regressions). example describes the first
// problem found.
func tokenProblems(ops []Op) (dups, regressions int, example string) {
	var granted []Op
	seen := map[uint64]int{}
	for _, op := range ops {
		if op.Kind == Acquire && op.Status == OK && op.Token > 0 {
			granted = append(granted, op)
			if prev, ok := seen[uint64(op.Token)]; ok {
				dups++
				if example == "" {
					example = fmt.Sprintf("acquires %d and %d both got token %d", prev, op.ID, op.Token)
				}
			} else {
				seen[uint64(op.Token)] = op.ID
			}
		}
	}
	highestBefore(granted, func(y, best Op) {
		if y.Token <= best.Token {
			regressions++
			if example == "" {
				example = fmt.Sprintf("acquire %d got token %d after acquire %d had returned token %d", y.ID, y.Token, best.ID, best.Token)
			}
		}
	})
	return dups, regressions, example
}

// grantsBetween counts granted acquires called at or after from that
// returned no later than to.
func grantsBetween(ops []Op, from, to time.Duration) int {
	n := 0
	for _, op := range ops {
		if op.Kind == Acquire && op.Status == OK && op.Call >= from && op.Return <= to {
			n++
		}
	}
	return n
}

// countAcquires counts the granted and the failed (or unknown) acquires
// among the ops for which in holds.
func countAcquires(ops []Op, in func(op Op) bool) (granted, failed int) {
	for _, op := range ops {
		switch {
		case op.Kind != Acquire || !in(op):
		case op.Status == OK:
			granted++
		default:
			failed++
		}
	}
	return granted, failed
}

// availabilityBetween is the fraction of whole windows of length w in
// [from, to) with at least one grant returned in it.
func availabilityBetween(ops []Op, from, to, w time.Duration) float64 {
	n := int((to - from) / w)
	if n < 1 {
		return 0
	}
	seen := make([]bool, n)
	count := 0
	for _, op := range ops {
		if op.Kind != Acquire || op.Status != OK || op.Return < from {
			continue
		}
		k := int((op.Return - from) / w)
		if k < n && !seen[k] {
			seen[k] = true
			count++
		}
	}
	return float64(count) / float64(n)
}

// staleRejected reports whether a fenced write was rejected for its stale
// token.
func staleRejected(w Op) bool { return w.Status == Fail && w.Note == NoteStale }

func verdictWord(ok bool, yes, no string) string {
	if ok {
		return yes
	}
	return no
}
