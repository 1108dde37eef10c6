package chaos

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

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

var tableHeader = []string{
	"scenario", "lock", "backend", "grants", "double", "fenced ok", "stale", "fenced viol",
	"lost upd", "p50", "p99", "max", "overran", "avail", "recovery", "keys left", "linearizable", "pass", "note",
}

func (r Result) cells() []string {
	recovery := "-"
	switch {
	case r.Unrecovered:
		recovery = "never"
	case r.Recovery > 0:
		recovery = fmtDuration(r.Recovery)
	}
	pass := "FAIL"
	if r.Pass {
		pass = "pass"
	}
	lin := r.Linearizable
	if lin == "" {
		lin = "-"
	}
	return []string{
		r.Scenario, r.Lock, r.Where(),
		fmt.Sprint(r.Grants), fmt.Sprint(r.DoubleGrants),
		fmt.Sprint(r.FencedAccepted), fmt.Sprint(r.FencedRejected), fmt.Sprint(r.FencedViolations),
		fmt.Sprint(r.LostUpdates),
		fmtDuration(r.P50), fmtDuration(r.P99), fmtDuration(r.Max),
		fmt.Sprint(r.Overran), fmt.Sprintf("%.0f%%", r.Availability*100), recovery,
		fmt.Sprint(r.KeysLeft), lin, pass, r.Note,
	}
}

// Where is the backend, with the client when it is not go-redis: "process",
// "process (rueidis)".
func (r Result) Where() string {
	if r.Client == "" || r.Client == ClientGoRedis {
		return r.Backend
	}
	return r.Backend + " (" + r.Client + ")"
}

// fmtDuration prints d in milliseconds with one decimal ("12.3ms").
func fmtDuration(d time.Duration) string {
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}

// WriteTable writes results as an aligned text table with a header row.
func WriteTable(w io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	write := func(cells []string) {
		for i, c := range cells {
			cells[i] = strings.NewReplacer("\t", " ", "\n", " ").Replace(c)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	write(append([]string(nil), tableHeader...))
	for _, r := range results {
		write(r.cells())
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("chaos: writing table: %w", err)
	}
	return nil
}

// WriteMarkdown writes results as a Markdown table, preceded by header and a
// blank line when header is not empty. Pipes and newlines in cells are
// escaped.
func WriteMarkdown(w io.Writer, results []Result, header string) error {
	var b strings.Builder
	if header != "" {
		b.WriteString(strings.TrimRight(header, "\n"))
		b.WriteString("\n\n")
	}
	row := func(cells []string) {
		b.WriteString("|")
		for _, c := range cells {
			c = strings.NewReplacer("|", `\|`, "\n", " ").Replace(c)
			b.WriteString(" " + c + " |")
		}
		b.WriteString("\n")
	}
	row(tableHeader)
	sep := make([]string, len(tableHeader))
	for i := range sep {
		sep[i] = "---"
	}
	row(sep)
	for _, r := range results {
		row(r.cells())
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("chaos: writing markdown: %w", err)
	}
	return nil
}
