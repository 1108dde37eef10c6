package chaos

import "time"

// availabilityWindow is the window NewResult measures availability with.
const availabilityWindow = 100 * time.Millisecond

// Result is one scenario's row in a report.
type Result struct {
	Scenario, Lock, Backend string
	// Client is the Redis client the locks ran over (RunOptions.Client).
	Client string
	// Grants counts granted acquires; DoubleGrants overlapping
	// believed-held intervals (len(Overlaps)).
	Grants, DoubleGrants int
	// FencedAccepted and FencedRejected count fenced writes accepted and
	// rejected as stale; FencedViolations is len(FencedViolations).
	FencedAccepted, FencedRejected, FencedViolations int
	// LostUpdates is the unfenced control's lost increments.
	LostUpdates int
	// P50, P99 and Max are acquire latencies.
	P50, P99, Max time.Duration
	// Overran counts acquires that overran their deadline.
	Overran int
	// Availability is the fraction of windows with at least one grant.
	Availability float64
	// Recovery is the time from the heal to the next grant; 0 when the
	// scenario had no heal (see Unrecovered).
	Recovery time.Duration
	// Unrecovered reports a heal that no grant followed before the run
	// ended.
	Unrecovered bool
	// KeysLeft counts lock keys still present after their TTL.
	KeysLeft int
	// Linearizable is the combined verdict of the mutex and register models:
	// "ok", "violation" or "unknown (timeout)" (see Verdict).
	Linearizable string
	// Pass is the scenario's verdict against its expected outcome.
	Pass bool
	// Note is free text.
	Note string
}

// NewResult fills a Result's measured fields from a run: counts and
// latencies from st, double grants and fenced violations from ops, the
// availability over 100ms windows, and the combined verdict of
// both porcupine models (each check bounded by timeout; 0: no limit). Pass is
// set to the safety verdict: no double grant, no fenced violation, no lost
// update, and no linearizability violation; scenarios that expect a double
// grant set it themselves. Scenario, Lock, Backend, Recovery, KeysLeft and
// Note are left for the caller. A nil st leaves the Stats fields zero.
func NewResult(ops []Op, st *Stats, timeout time.Duration) Result {
	var r Result
	if st != nil {
		r.Grants = st.Grants
		r.FencedAccepted = st.FencedAccepted
		r.FencedRejected = st.FencedRejected
		r.LostUpdates = st.LostUpdates
		r.P50, r.P99, r.Max = st.P50, st.P99, st.Max
		r.Overran = st.Overran
		r.Availability = st.Availability(availabilityWindow)
	}
	r.DoubleGrants = len(Overlaps(ops))
	r.FencedViolations = len(FencedViolations(ops))
	var verdicts []Verdict
	for _, m := range []Model{MutexModel, RegisterModel} {
		v, err := CheckLinearizable(m, ops, timeout)
		if err != nil { // cannot happen for the package's own models
			v = CheckTimedOut
		}
		verdicts = append(verdicts, v)
	}
	v := combineVerdicts(verdicts...)
	r.Linearizable = string(v)
	r.Pass = r.DoubleGrants == 0 && r.FencedViolations == 0 && r.LostUpdates == 0 && v != Violation
	return r
}
