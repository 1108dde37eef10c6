package harness

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// ResultFields is chaos.Result's underlying type, field for field: the
// tables take any type whose underlying type it is, chaos.Result among
// them, so that a change to one that the other lacks fails to compile.
type ResultFields = struct {
	Scenario, Lock, Backend string
	Client                  string
	Grants, DoubleGrants    int

	FencedAccepted, FencedRejected, FencedViolations int

	LostUpdates   int
	P50, P99, Max time.Duration
	Overran       int
	Availability  float64
	Recovery      time.Duration
	Unrecovered   bool
	KeysLeft      int
	Linearizable  string
	Pass          bool
	Note          string
}

// row is one result of a table.
type row ResultFields

// Where is the backend, with the client when it is not go-redis
// (chaos.ClientGoRedis): "process", "process (rueidis)".
func Where[R ~ResultFields](r R) string { return row(r).where() }

func (r row) where() string {
	if r.Client == "" || r.Client == "go-redis" {
		return r.Backend
	}
	return r.Backend + " (" + r.Client + ")"
}

var tableHeader = []string{
	"scenario", "lock", "backend", "grants", "double", "fenced ok", "stale", "fenced viol",
	"lost upd", "p50", "p99", "max", "overran", "avail", "recovery", "keys left", "linearizable", "pass", "note",
}

func (r row) cells() []string {
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
		r.Scenario, r.Lock, r.where(),
		fmt.Sprint(r.Grants), fmt.Sprint(r.DoubleGrants),
		fmt.Sprint(r.FencedAccepted), fmt.Sprint(r.FencedRejected), fmt.Sprint(r.FencedViolations),
		fmt.Sprint(r.LostUpdates),
		fmtDuration(r.P50), fmtDuration(r.P99), fmtDuration(r.Max),
		fmt.Sprint(r.Overran), fmt.Sprintf("%.0f%%", r.Availability*100), recovery,
		fmt.Sprint(r.KeysLeft), lin, pass, r.Note,
	}
}

// fmtDuration prints d in milliseconds with one decimal ("12.3ms").
func fmtDuration(d time.Duration) string {
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}

// WriteTable writes results (chaos.Result values) as an aligned text table
// with a header row.
func WriteTable[R ~ResultFields](w io.Writer, results []R) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	write := func(cells []string) {
		for i, c := range cells {
			cells[i] = strings.NewReplacer("\t", " ", "\n", " ").Replace(c)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	write(append([]string(nil), tableHeader...))
	for _, r := range results {
		write(row(r).cells())
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("chaos: writing table: %w", err)
	}
	return nil
}

// WriteMarkdown writes results (chaos.Result values) as a Markdown table,
// preceded by header and a blank line when header is not empty. Pipes and
// newlines in cells are escaped.
func WriteMarkdown[R ~ResultFields](w io.Writer, results []R, header string) error {
	var b strings.Builder
	if header != "" {
		b.WriteString(strings.TrimRight(header, "\n"))
		b.WriteString("\n\n")
	}
	line := func(cells []string) {
		b.WriteString("|")
		for _, c := range cells {
			c = strings.NewReplacer("|", `\|`, "\n", " ").Replace(c)
			b.WriteString(" " + c + " |")
		}
		b.WriteString("\n")
	}
	line(tableHeader)
	sep := make([]string, len(tableHeader))
	for i := range sep {
		sep[i] = "---"
	}
	line(sep)
	for _, r := range results {
		line(row(r).cells())
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("chaos: writing markdown: %w", err)
	}
	return nil
}
