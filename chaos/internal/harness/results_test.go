package harness_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/chaos"
	"github.com/redfence/redfence/chaos/internal/harness"
)

var reportResults = []chaos.Result{
	{Scenario: "baseline", Lock: "redlock", Backend: "process", Grants: 93, P50: 2470 * time.Microsecond,
		P99: 13 * time.Millisecond, Max: 22600 * time.Microsecond, Availability: 1, Linearizable: "ok", Pass: true},
	{Scenario: "kill majority", Lock: "redlock", Backend: "docker", Grants: 10, Availability: 0.4,
		Recovery: 250 * time.Millisecond, Linearizable: "ok", Pass: true, Note: "a|b"},
	{Scenario: "restart empty", Lock: "redlock", Backend: "process", DoubleGrants: 1, LostUpdates: 2,
		FencedRejected: 3, Unrecovered: true, Linearizable: "violation", Note: "expected\ndouble grant"},
}

func TestWriteTable(t *testing.T) {
	var b strings.Builder
	require.NoError(t, harness.WriteTable(&b, reportResults))
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
	require.NoError(t, harness.WriteMarkdown(&b, reportResults, "## Results\n"))
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
	require.NoError(t, harness.WriteMarkdown[chaos.Result](&b, nil, ""))
	assert.True(t, strings.HasPrefix(b.String(), "| scenario |"))
}

func TestWhere(t *testing.T) {
	for client, want := range map[string]string{"": "process", chaos.ClientGoRedis: "process", chaos.ClientRueidis: "process (rueidis)"} {
		r := chaos.Result{Backend: "process", Client: client}
		assert.Equal(t, want, harness.Where(r), "client %q", client)
	}
	var b strings.Builder
	require.NoError(t, harness.WriteTable(&b, []chaos.Result{{Backend: "process", Client: chaos.ClientRueidis}}))
	assert.Contains(t, b.String(), "process (rueidis)")
}
