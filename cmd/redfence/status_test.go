package main

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
)

// statusRow returns the fields of the status table's row for addr.
func statusRow(t *testing.T, out, addr string) []string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == addr {
			return f
		}
	}
	t.Fatalf("no row for %s in:\n%s", addr, out)
	return nil
}

func TestStatusEndToEnd(t *testing.T) {
	t.Parallel()
	nodes, clients := newNodes(t, 3)
	key := redistest.Key(t)
	list := nodeList(nodes)
	status := func() cliResult { t.Helper(); return runCLI(t, cliEnv(), "status", "-nodes", list, "-key", key) }

	r := status()
	require.Equal(t, exitOK, r.code)
	assert.Equal(t, 3, strings.Count(r.stdout, "new or flushed: quarantined on first use"), "brand-new nodes have no marker")

	// A refused acquire writes the marker and starts the quarantine.
	r = runCLI(t, cliEnv(), "exec", "-nodes", list, "-key", key, "--", "true")
	require.Equal(t, exitUnavailable, r.code)
	r = status()
	require.Equal(t, exitOK, r.code)
	for _, n := range nodes {
		row := strings.Join(statusRow(t, r.stdout, n.Addr()), " ")
		assert.Regexp(t, `- - - quarantined, (59|60)s left$`, row)
	}

	r = runCLI(t, cliEnv(), "nodes", "vouch", "-nodes", list)
	require.Equal(t, exitOK, r.code)
	assert.Contains(t, r.stdout, "vouched for all 3 nodes")

	// Another client holds the key, fenced.
	rl, err := redlock.New(clients, redlock.WithFencing(), redlock.WithTTL(10*time.Second))
	require.NoError(t, err)
	m, err := rl.NewMutex(key)
	require.NoError(t, err)
	lease, err := m.TryLock(t.Context())
	require.NoError(t, err)

	r = runCLI(t, cliEnv("REDFENCE_NODES="+list), "status", "-key", key) // nodes from the environment
	require.Equal(t, exitOK, r.code)
	assert.Contains(t, r.stdout, "NODE")
	// Phase 2 of fenced Redlock writes the token on a majority; the other
	// node may have had its write cut short once the majority agreed.
	token, fenced := lease.Token().String(), 0
	for _, n := range nodes {
		row := statusRow(t, r.stdout, n.Addr())
		require.Len(t, row, 5, "row %q", row)
		assert.Equal(t, lease.Value(), row[1], "holder")
		ttl, err := time.ParseDuration(row[2])
		require.NoError(t, err, "TTL %q", row[2])
		assert.Greater(t, ttl, 5*time.Second)
		assert.LessOrEqual(t, ttl, 10*time.Second)
		assert.Contains(t, []string{token, "-"}, row[3], "fence counter")
		if row[3] == token {
			fenced++
		}
		assert.Equal(t, "vouched", row[4])
	}
	assert.GreaterOrEqual(t, fenced, 2, "a majority holds the fence counter")
	require.NoError(t, lease.Release(t.Context()))
	require.NoError(t, rl.Close())

	// Released: no holder, the counters stay; then one node goes away.
	require.NoError(t, nodes[2].Kill())
	r = status()
	assert.Equal(t, exitUnavailable, r.code)
	for _, n := range nodes[:2] {
		row := statusRow(t, r.stdout, n.Addr())
		require.Len(t, row, 5, "row %q", row)
		assert.Equal(t, []string{n.Addr(), "-", "-"}, row[:3])
		assert.Contains(t, []string{token, "-"}, row[3], "fence counter")
		assert.Equal(t, "vouched", row[4])
	}
	row := statusRow(t, r.stdout, nodes[2].Addr())
	assert.Equal(t, []string{nodes[2].Addr(), "-", "-", "-", "unreachable:"}, row[:5])
}

// TestQuarantineState checks the words for each restart-quarantine state;
// redlock's TestQuarantineLeft checks the times Inspect computes.
func TestQuarantineState(t *testing.T) {
	q := 60 * time.Second
	node := func(vouched, marked, cluster bool, left time.Duration) redlock.NodeState {
		var n redlock.NodeState
		n.Quarantine.Vouched, n.Quarantine.Marked, n.Quarantine.Cluster, n.Quarantine.Left = vouched, marked, cluster, left
		return n
	}
	tests := []struct {
		name string
		n    redlock.NodeState
		q    time.Duration
		want string
	}{
		{"vouched in this run", node(true, true, false, 0), q, "vouched"},
		{"vouched, quarantine off", node(true, false, false, 0), 0, "vouched"},
		{"off", node(false, false, false, 0), 0, "off"},
		{"no marker", node(false, false, false, q), q, "new or flushed: quarantined on first use"},
		{"time left", node(false, true, false, time.Minute), q, "quarantined, 60s left"},
		{"rounded up", node(false, true, false, time.Millisecond), q, "quarantined, 1s left"},
		{"both passed", node(false, true, false, 0), q, "ready"},
		{"cluster", node(false, false, true, 0), q, "none (Redis Cluster)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, quarantineState(tt.n, tt.q))
		})
	}
}

func TestParseStatusFlags(t *testing.T) {
	env := func(k string) string { return map[string]string{envNodes: "h:1"}[k] }
	var stderr strings.Builder
	c, err := parseStatusFlags([]string{"-key", "k", "-prefix", "p:"}, env, &stderr)
	require.NoError(t, err)
	assert.Equal(t, "p:k", c.key)
	assert.Equal(t, []string{"h:1"}, c.conn.addrs)
	assert.Equal(t, 60*time.Second, c.quarantine)

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{}, "-key is required"},
		{[]string{"-key", "k", "extra"}, `unexpected arguments: ["extra"]`},
		{[]string{"-key", "k", "-quarantine", "-1s"}, "-quarantine must not be negative"},
		{[]string{"-key", "k", "-nodes", "h:1,h:1"}, "given twice"},
	} {
		stderr.Reset()
		_, err := parseStatusFlags(tt.args, env, &stderr)
		assert.Error(t, err, "%q", tt.args)
		assert.Contains(t, stderr.String(), tt.want, "%q", tt.args)
	}
}

// TestStatusQuotesKeysAndValues checks that a key or a value with a newline,
// a tab or a space is printed quoted: raw, it would add rows to the table
// that look like other nodes' answers.
func TestStatusQuotesKeysAndValues(t *testing.T) {
	t.Parallel()
	nodes, clients := newNodes(t, 1)
	addr := nodes[0].Addr()
	key := redistest.Key(t) + "\n" + addr + "\tforged\t1s\t-\tvouched"
	require.NoError(t, clients[0].Set(t.Context(), key, "a b\nc", time.Minute).Err())

	r := runCLI(t, cliEnv(), "status", "-nodes", addr, "-key", key, "-quarantine", "0")
	require.Equal(t, exitOK, r.code)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.Len(t, lines, 3, "the header, the column names and one row:\n%s", r.stdout)
	assert.Equal(t, "key "+strconv.Quote(key)+" (fence key "+strconv.Quote("{"+key+"}:fence")+"; quarantine off)", lines[0])
	row := statusRow(t, r.stdout, addr)
	assert.Equal(t, `"a b\nc"`, row[1]+" "+row[2], "the holder, quoted")
	assert.True(t, strings.HasPrefix(lines[2], addr+" "), "the one row is the node's: %q", lines[2])

	assert.Equal(t, `"-"`, cell("-"), "a value of - is not absent")
	assert.Equal(t, `""`, cell(""))
	assert.Equal(t, "plain:key-1{x}", cell("plain:key-1{x}"))
	assert.Equal(t, `"\xff"`, cell("\xff"))
	assert.Equal(t, `dial tcp: \x1b[31m\n\xff ok`, escapeControls("dial tcp: \x1b[31m\n\xff ok"))
}
