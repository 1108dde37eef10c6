package chaos_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/chaos"
)

var reportResults = []chaos.Result{
	{Scenario: "baseline", Lock: "redlock", Backend: "process", Grants: 93, P50: 2470 * time.Microsecond,
		P99: 13 * ms, Max: 22600 * time.Microsecond, Availability: 1, Linearizable: "ok", Pass: true},
	{Scenario: "kill majority", Lock: "redlock", Backend: "docker", Grants: 10, Availability: 0.4,
		Recovery: 250 * ms, Linearizable: "ok", Pass: true, Note: "a|b"},
	{Scenario: "restart empty", Lock: "redlock", Backend: "process", DoubleGrants: 1, LostUpdates: 2,
		FencedRejected: 3, Unrecovered: true, Linearizable: "violation", Note: "expected\ndouble grant"},
}

func TestWriteTable(t *testing.T) {
	var b strings.Builder
	require.NoError(t, chaos.WriteTable(&b, reportResults))
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	require.Len(t, lines, 4, "header and one line per result")
	assert.True(t, strings.HasPrefix(lines[0], "scenario"))
	col := strings.Index(lines[0], "grants")
	require.Positive(t, col)
	for _, l := range lines[1:] {
		assert.NotEqual(t, ' ', rune(l[col]), "columns are aligned: %q", l)
		assert.Equal(t, ' ', rune(l[col-1]), "columns are aligned: %q", l)
	}
	assert.Contains(t, lines[1], "2.5ms")
	assert.Contains(t, lines[1], "100%")
	assert.Contains(t, lines[1], "pass")
	assert.Contains(t, lines[2], "250.0ms")
	assert.Contains(t, lines[3], "never")
	assert.Contains(t, lines[3], "FAIL")
	assert.Contains(t, lines[3], "expected double grant", "newlines in cells are flattened")
}

func TestWriteMarkdown(t *testing.T) {
	var b strings.Builder
	require.NoError(t, chaos.WriteMarkdown(&b, reportResults, "## Results\n"))
	out := b.String()
	assert.True(t, strings.HasPrefix(out, "## Results\n\n| scenario |"))
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	require.Len(t, lines, 2+2+len(reportResults))
	cols := strings.Count(lines[2], " |")
	for _, l := range lines[2:] {
		assert.Equal(t, cols, strings.Count(l, " |"), "same column count: %q", l)
	}
	assert.Contains(t, out, `a\|b`, "pipes escaped")
	assert.Contains(t, lines[3], "| --- |")

	b.Reset()
	require.NoError(t, chaos.WriteMarkdown(&b, nil, ""))
	assert.True(t, strings.HasPrefix(b.String(), "| scenario |"))
}

func TestNewResult(t *testing.T) {
	safe := []chaos.Op{
		acq(0, 0, 0, 10, 100, 1), write(1, 0, 11, 12, chaos.OK, 1, "a"), rel(2, 0, 0, 20, 30),
		acq(3, 1, 15, 40, 200, 2), write(4, 1, 41, 42, chaos.OK, 2, "b"),
	}
	st := chaos.ComputeStats(safe, 0, 100*ms, time.Second, 50*ms)
	r := chaos.NewResult(safe, st, 5*time.Second)
	assert.Equal(t, 2, r.Grants)
	assert.Equal(t, 2, r.FencedAccepted)
	assert.Zero(t, r.DoubleGrants)
	assert.Equal(t, "ok", r.Linearizable)
	assert.True(t, r.Pass)
	assert.InDelta(t, 1.0, r.Availability, 1e-9, "the run is shorter than a window")

	double := append(safe[:2:2], acq(2, 1, 15, 40, 200, 2))
	r = chaos.NewResult(double, nil, 5*time.Second)
	assert.Equal(t, 1, r.DoubleGrants)
	assert.Equal(t, "violation", r.Linearizable)
	assert.False(t, r.Pass)
	assert.Zero(t, r.Grants, "no stats given")
}
