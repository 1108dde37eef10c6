package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/chaos"
)

func TestParseChaosFlags(t *testing.T) {
	art := filepath.Join(os.TempDir(), "redfence-chaos")
	def := chaosConfig{backend: "process", seed: 1, duration: chaos.DefaultScenarioDuration, artifacts: art, client: chaos.ClientGoRedis}
	with := func(f func(*chaosConfig)) chaosConfig { c := def; f(&c); return c }
	checkParse(t, parseChaosFlags, errUsage, []parseCase[chaosConfig]{
		{"defaults", nil, def, ""},
		{"all flags", []string{"-backend", "all", "-scenario", "1, 6b,8", "-lock", "redlock", "-seed", "7", "-duration", "2s", "-out", "x.md", "-artifacts", "a", "-redis-server", "/r", "-client", "all"},
			chaosConfig{backend: "all", scenarios: []string{"1", "6b", "8"}, lock: "redlock", seed: 7, duration: 2 * time.Second, out: "x.md", artifacts: "a", redisServer: "/r", client: "all"}, ""},
		{"rueidis", []string{"-client", "rueidis"}, with(func(c *chaosConfig) { c.client = chaos.ClientRueidis }), ""},
		{"bad client", []string{"-client", "redigo"}, chaosConfig{}, `-client must be go-redis, rueidis or all, got "redigo"`},
		{"docker", []string{"-backend", "docker"}, with(func(c *chaosConfig) { c.backend = "docker" }), ""},
		{"single", []string{"--lock=single"}, with(func(c *chaosConfig) { c.lock = "single" }), ""},
		{"bad backend", []string{"-backend", "vm"}, chaosConfig{}, `-backend must be process, docker or all, got "vm"`},
		{"bad lock", []string{"-lock", "etcd"}, chaosConfig{}, `-lock must be redlock or single`},
		{"bad scenario", []string{"-scenario", "1,16"}, chaosConfig{}, `-scenario: no scenario "16"`},
		{"zero duration", []string{"-duration", "0"}, chaosConfig{}, "-duration must be positive"},
		{"stray argument", []string{"now"}, chaosConfig{}, `unexpected arguments: ["now"]`},
		{"soak", []string{"-soak", "10m"}, with(func(c *chaosConfig) { c.soak = 10 * time.Minute }), ""},
		{"soak unsafe single", []string{"-soak", "1m", "-unsafe", "-lock", "single", "-seed", "9"},
			with(func(c *chaosConfig) { c.soak, c.unsafe, c.lock, c.seed = time.Minute, true, "single", 9 }), ""},
		{"unsafe alone", []string{"-unsafe"}, chaosConfig{}, "-unsafe goes with -soak"},
		{"negative soak", []string{"-soak", "-1s"}, chaosConfig{}, "-soak must be positive"},
		{"soak with scenario", []string{"-soak", "1m", "-scenario", "1"}, chaosConfig{}, "drop -scenario and -out"},
		{"soak with out", []string{"-soak", "1m", "-out", "x.md"}, chaosConfig{}, "drop -scenario and -out"},
	})
	checkParseHelp(t, parseChaosFlags, "Usage: redfence chaos")
}

func TestChaosPlan(t *testing.T) {
	plan := func(c chaosConfig) []string {
		var out []string
		for _, r := range c.plan() {
			out = append(out, r.sc.Name+"/"+r.lock)
		}
		return out
	}
	all := plan(chaosConfig{})
	assert.Len(t, all, 24, "21 runnable scenarios, 1, 3 and 4 on both locks, 7, 15a and 15b on single only")
	assert.Equal(t, []string{"1/redlock", "1/single", "2/redlock"}, all[:3])
	assert.Equal(t, []string{"6a/redlock", "6b/redlock", "6c/redlock"}, plan(chaosConfig{scenarios: []string{"6"}}))
	assert.Equal(t, []string{"1/single", "3/single", "4/single", "7/single", "15a/single", "15b/single"}, plan(chaosConfig{lock: "single"}))
	assert.Equal(t, []string{"15a/single", "15b/single"}, plan(chaosConfig{scenarios: []string{"15"}}))
	assert.Empty(t, plan(chaosConfig{scenarios: []string{"7"}, lock: "redlock"}))
	assert.Len(t, forClient(chaosConfig{}.plan(), chaos.ClientRueidis), 22, "over rueidis: all but 15a and 15b (Sentinel)")
	assert.Equal(t, []pass{{"process", "go-redis"}, {"docker", "go-redis"}, {"process", "rueidis"}},
		chaosConfig{client: clientAll}.passes([]string{"process", "docker"}))
	assert.Equal(t, []pass{{"docker", "rueidis"}}, chaosConfig{client: chaos.ClientRueidis}.passes([]string{"docker"}))
}

func TestChaosNothingToRun(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"chaos", "-scenario", "7", "-lock", "redlock"}, &stdout, &stderr)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr.String(), "no scenario")
}

func TestWriteChaosDoc(t *testing.T) {
	results := []chaos.Result{
		{Scenario: "1", Lock: "redlock", Backend: "process", Grants: 10, Linearizable: "ok", Pass: true, Note: "expected: fine"},
		{Scenario: "8", Lock: "redlock", Backend: "docker", Grants: 9, DoubleGrants: 1, Note: "expected: x | y"},
	}
	meta := chaosDocMeta{
		command:  "redfence chaos -backend all -out docs/chaos.md",
		seed:     42,
		duration: 3 * time.Second,
		date:     time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC),
		backends: []backendRun{{name: "process", results: results[:1], elapsed: 61 * time.Second}, {name: "docker", results: results[1:], elapsed: 2 * time.Minute}},
		notes:    []string{"WARNING: something"},
	}
	var b bytes.Buffer
	require.NoError(t, writeChaosDoc(&b, meta, results))
	doc := b.String()
	for _, want := range []string{
		"# Chaos testing",
		"Generated by `redfence chaos -backend all -out docs/chaos.md` on 2026-01-02 03:04 UTC (seed 42, 3s of workload per scenario",
		"The process backend ran 1 scenario runs in 1m1s.",
		"The docker backend ran 1 scenario runs in 2m0s.",
		"**WARNING: something**",
		"1 of 2 runs met their expectation.",
		"| scenario | lock | backend |",
		`expected: x \| y`,
		"### 6. crash-restart of a node without persistence",
		"#### 6b. crash-restart, no persistence, restart quarantine on",
		"### 13. random fault schedule (seeded)",
	} {
		assert.Contains(t, doc, want)
	}
	for _, sc := range chaos.Scenarios() {
		assert.Contains(t, doc, sc.Expect)
	}
}

func TestProgressLine(t *testing.T) {
	line := progressLine(chaos.Result{Scenario: "6a", Lock: "redlock", Backend: "docker", Grants: 3, DoubleGrants: 1}, 1500*time.Millisecond)
	assert.True(t, strings.HasPrefix(line, "docker  6a  redlock FAIL   1.5s  grants 3, double 1"), line)
}

// TestChaosCommand runs one short scenario end to end on local processes.
func TestChaosCommand(t *testing.T) {
	out := filepath.Join(t.TempDir(), "chaos.md")
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"chaos", "-backend", "process", "-scenario", "1", "-lock", "single", "-duration", "500ms", "-out", out, "-artifacts", t.TempDir()}, &stdout, &stderr)
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	assert.Contains(t, stdout.String(), "process 1   single  pass")
	assert.Contains(t, stdout.String(), "PASS: every run met its expectation")
	doc, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Contains(t, string(doc), "| 1 | single | process |")
}
