package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/chaos"
	"github.com/redfence/redfence/chaos/internal/harness"
)

func TestSoakPlan(t *testing.T) {
	names := func(cs []soakConfig) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.String())
		}
		return out
	}
	assert.Equal(t, []string{"redlock", "single", "single+sentinel"}, names(chaosConfig{}.soakConfigs()))
	assert.Equal(t, []string{"single", "single+sentinel"}, names(chaosConfig{lock: "single"}.soakConfigs()))
	assert.Equal(t, []string{"redlock"}, names(chaosConfig{lock: "redlock"}.soakConfigs()))
	assert.Equal(t, 10*time.Second, soakProgressEvery(10*time.Minute))
	assert.Equal(t, 4*time.Second, soakProgressEvery(16*time.Second))
	assert.Equal(t, time.Second, soakProgressEvery(2*time.Second))
	assert.Equal(t, 2*time.Second, soakSampleEvery(10*time.Minute))
	assert.Equal(t, 750*time.Millisecond, soakSampleEvery(15*time.Second))
}

func TestChaosDocHasSoakSection(t *testing.T) {
	var b strings.Builder
	assert.NoError(t, writeChaosDoc(&b, chaosDocMeta{}, nil))
	doc := b.String()
	assert.Contains(t, doc, "\n## Soak\n")
	assert.Contains(t, doc, "TestMutexWindowsAtTheCut")
	assert.Less(t, strings.Index(doc, "## Soak"), strings.Index(doc, "## What the suite shows"))
}

func TestParseSoakFlags(t *testing.T) {
	art := filepath.Join(os.TempDir(), "redfence-chaos")
	def := chaosConfig{backend: "process", seed: 1, artifacts: art, soak: time.Minute}
	with := func(args []string, f func(*chaosConfig)) chaosConfig { c := def; c.args = args; f(&c); return c }
	minute := []string{"-duration", "1m"}
	all := []string{"-duration", "1m", "-parallel", "-unsafe", "-lock", "single", "-seed", "9", "-backend", "docker", "-json", "x.json", "-artifacts", "a", "-redis-server", "/r"}
	checkParse(t, parseSoakFlags, errUsage, []parseCase[chaosConfig]{
		{"duration only", minute, with(minute, func(*chaosConfig) {}), ""},
		{"all flags", all, chaosConfig{backend: "docker", lock: "single", seed: 9, artifacts: "a", redisServer: "/r", soak: time.Minute,
			unsafe: true, parallel: true, json: "x.json", args: all}, ""},
		{"no duration", nil, chaosConfig{}, "-duration is required and must be positive (e.g. -duration 10m), got 0s"},
		{"negative duration", []string{"-duration", "-1s"}, chaosConfig{}, "-duration is required and must be positive"},
		{"bad backend", []string{"-duration", "1m", "-backend", "vm"}, chaosConfig{}, `-backend must be process, docker or all, got "vm"`},
		{"bad lock", []string{"-duration", "1m", "-lock", "etcd"}, chaosConfig{}, `-lock must be redlock or single`},
		{"stray argument", []string{"-duration", "1m", "now"}, chaosConfig{}, `unexpected arguments: ["now"]`},
	})
	checkParseHelp(t, parseSoakFlags, "Usage: redfence-chaos soak -duration D")
}

// TestSoakCommandParallel runs both of single's soaks at once (-parallel)
// on local processes, end to end: each is reported, and both pass.
func TestSoakCommandParallel(t *testing.T) {
	var stdout, stderr bytes.Buffer
	record := filepath.Join(t.TempDir(), "soak", "process-safe.json")
	code := run(t.Context(), []string{"soak", "-duration", "3s", "-parallel", "-backend", "process", "-lock", "single", "-seed", "24",
		"-artifacts", t.TempDir(), "-json", record}, &stdout, &stderr)
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	for _, line := range []string{"soak: process single safe: pass", "soak: process single+sentinel safe: pass", "PASS: no violation (seed 24)"} {
		assert.Contains(t, stdout.String(), line)
	}
	assert.Regexp(t, `run\s+process single safe\s+process single\+sentinel safe`, stdout.String(), "one column per run, in order")
	out := stdout.String()
	assert.Less(t, strings.Index(out, "soak: process single+sentinel safe, 3s"), strings.Index(out, "soak: process single safe: pass"),
		"the second run starts before the first, which lasts 3s, ends")

	// The record (-json) holds both runs as they were reported.
	recs, err := readSoakRecords(filepath.Dir(record))
	require.NoError(t, err)
	require.Len(t, recs, 1)
	rec := recs[0]
	assert.Contains(t, rec.Command, "redfence-chaos soak -duration 3s -parallel")
	assert.NotContains(t, rec.Command, "-json", "the record's command reproduces the runs; where it was written is not part of it")
	require.Len(t, rec.Runs, 2)
	for i, sentinel := range []bool{false, true} {
		r := rec.Runs[i]
		assert.Equal(t, []any{"process", "single", sentinel, false, int64(24), 3 * time.Second, true, ""},
			[]any{r.Backend, r.Lock, r.Sentinel, r.Unsafe, r.Seed, r.Duration, r.Pass, r.Error})
		assert.Positive(t, r.Grants)
	}
	assert.True(t, rec.Started.Before(rec.Ended))
}

// TestSoakRecordsDoc: docs/chaos.md's recorded soak runs, one table per
// backend (process first, safe before unsafe), with each command, its
// commit and any run's error.
func TestSoakRecordsDoc(t *testing.T) {
	dir := t.TempDir()
	res := func(backend string, unsafe bool, ops int) soakRun {
		return soakRun{SoakResult: harness.SoakResult{Lock: "redlock", Backend: backend, Unsafe: unsafe, Seed: 19,
			Duration: 30 * time.Minute, Ops: ops, Pass: true}}
	}
	failed := res("docker", true, 4)
	failed.Pass, failed.Error = false, "on n0: i/o timeout"
	at := time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)
	for name, rec := range map[string]soakRecord{
		"docker-unsafe":  {Command: "cmd-du", Commit: "c4", Started: at, Ended: at, Runs: []soakRun{failed}},
		"process-unsafe": {Command: "cmd-pu", Commit: "c2", Started: at, Ended: at, Runs: []soakRun{res("process", true, 2)}},
		"docker-safe":    {Command: "cmd-ds", Commit: "c3", Started: at, Ended: at, Runs: []soakRun{res("docker", false, 3)}},
		"process-safe":   {Command: "cmd-ps", Commit: "c1", Started: at, Ended: at, Runs: []soakRun{res("process", false, 1)}},
	} {
		require.NoError(t, writeSoakRecord(filepath.Join(dir, name+".json"), rec))
	}
	recs, err := readSoakRecords(dir)
	require.NoError(t, err)
	doc, err := soakRecordsDoc(recs)
	require.NoError(t, err)
	var at0 []int
	for _, s := range []string{"**process backend.**", "`cmd-ps` at commit c1", "`cmd-pu` at commit c2",
		"| operations | 1 | 2 |", "**docker backend.**", "`cmd-ds` at commit c3", "`cmd-du` at commit c4", "| operations | 3 | 4 |",
		"FAIL: the run could not be carried out", "Error: docker redlock unsafe: on n0: i/o timeout"} {
		i := strings.Index(doc, s)
		require.GreaterOrEqual(t, i, 0, "%q missing from:\n%s", s, doc)
		at0 = append(at0, i)
	}
	assert.IsIncreasing(t, at0, "in order:\n%s", doc)

	assert.Equal(t, []string{"-duration", "1m", "-seed", "19"},
		withoutFlag([]string{"-duration", "1m", "-json", "a.json", "-seed", "19", "--json=b.json", "-json=c"}, "json"))
	assert.Equal(t, []string{"-jsonx", "1"}, withoutFlag([]string{"-jsonx", "1"}, "json"))

	none, err := soakRecordsDoc(nil)
	require.NoError(t, err)
	assert.Contains(t, none, "None recorded yet")
	_, err = readSoakRecords(filepath.Join(dir, "missing"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bad.json"), []byte("{"), 0o644))
	_, err = readSoakRecords(dir)
	require.ErrorContains(t, err, "bad.json")
}

// refusingBackend is a chaos.Backend that can start no node: it stands for a
// machine where redis-server or Docker is missing.
type refusingBackend struct{}

var errNoNodes = errors.New("no redis-server here")

func (refusingBackend) Name() string { return "refusing" }
func (refusingBackend) StartNodes(context.Context, int, chaos.NodeSpec) ([]chaos.Node, error) {
	return nil, errNoNodes
}
func (refusingBackend) Close() error { return nil }

// TestSoakJobReportsError: a soak that cannot start its nodes fails, prints
// the error under its verdict line, and carries it in the record.
func TestSoakJobReportsError(t *testing.T) {
	var stdout bytes.Buffer
	job := soakJob{backend: "refusing", b: refusingBackend{}, sc: soakConfig{lock: "single"}}
	run, failed := job.run(t.Context(), chaosConfig{soak: 3 * time.Second, seed: 7, artifacts: t.TempDir()}, &stdout)
	assert.True(t, failed, "a soak that could not run is a failure")
	assert.False(t, run.Pass)
	assert.Contains(t, run.Error, errNoNodes.Error())
	out := stdout.String()
	assert.Contains(t, out, "soak: refusing single safe: FAIL in ")
	assert.Regexp(t, `\n    error: .*no redis-server here\n`, out)
	assert.Less(t, strings.Index(out, "FAIL in"), strings.Index(out, "error:"), "the error follows its verdict line")
}
