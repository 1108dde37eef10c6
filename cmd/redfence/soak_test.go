package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/redfence/redfence/chaos"
)

func TestParseSoakFlags(t *testing.T) {
	art := filepath.Join(os.TempDir(), "redfence-chaos")
	def := chaosConfig{backend: "process", seed: 1, duration: chaos.DefaultScenarioDuration, artifacts: art}
	with := func(f func(*chaosConfig)) chaosConfig { c := def; f(&c); return c }
	checkParse(t, parseChaosFlags, errUsage, []parseCase[chaosConfig]{
		{"soak", []string{"-soak", "10m"}, with(func(c *chaosConfig) { c.soak = 10 * time.Minute }), ""},
		{"soak unsafe single", []string{"-soak", "1m", "-unsafe", "-lock", "single", "-seed", "9"},
			with(func(c *chaosConfig) { c.soak, c.unsafe, c.lock, c.seed = time.Minute, true, "single", 9 }), ""},
		{"unsafe alone", []string{"-unsafe"}, chaosConfig{}, "-unsafe goes with -soak"},
		{"negative soak", []string{"-soak", "-1s"}, chaosConfig{}, "-soak must be positive"},
		{"soak with scenario", []string{"-soak", "1m", "-scenario", "1"}, chaosConfig{}, "drop -scenario and -out"},
		{"soak with out", []string{"-soak", "1m", "-out", "x.md"}, chaosConfig{}, "drop -scenario and -out"},
	})
}

func TestSoakPlan(t *testing.T) {
	assert.Equal(t, []string{"redlock", "single"}, chaosConfig{}.soakLocks())
	assert.Equal(t, []string{"single"}, chaosConfig{lock: "single"}.soakLocks())
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
