package chaos_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/chaos"
)

// TestSoakShort runs a short safe soak of redlock on local redis-server
// processes: faults are injected and every check passes.
func TestSoakShort(t *testing.T) {
	b := chaos.NewProcessBackend()
	t.Cleanup(func() { assert.NoError(t, b.Close()) })
	var progress bytes.Buffer
	res, err := chaos.Soak(t.Context(), b, chaos.SoakOptions{
		Lock: chaos.LockRedlock, Duration: 4 * time.Second, Seed: 3,
		Progress: &progress, ProgressEvery: time.Second, SampleEvery: 250 * time.Millisecond, Window: time.Second,
	})
	require.NoError(t, err)
	var table bytes.Buffer
	require.NoError(t, chaos.WriteSoakTable(&table, []chaos.SoakResult{res}))
	t.Log("\n" + progress.String() + table.String())
	assert.True(t, res.Pass, res.Fails)
	assert.Positive(t, res.Grants)
	assert.NotEmpty(t, res.Faults)
	assert.Positive(t, res.Windows)
	assert.Contains(t, progress.String(), "violations so far")
	assert.Contains(t, table.String(), "PASS")
}

func TestSoakRejectsBadOptions(t *testing.T) {
	b := chaos.NewProcessBackend()
	t.Cleanup(func() { assert.NoError(t, b.Close()) })
	for name, o := range map[string]chaos.SoakOptions{
		"no lock":           {},
		"unknown lock":      {Lock: "etcd"},
		"negative duration": {Lock: chaos.LockSingle, Duration: -time.Second},
		"negative window":   {Lock: chaos.LockSingle, Window: -time.Second},
	} {
		_, err := chaos.Soak(t.Context(), b, o)
		assert.ErrorIs(t, err, chaos.ErrInvalidScenario, name)
	}
	_, err := chaos.Soak(t.Context(), nil, chaos.SoakOptions{Lock: chaos.LockSingle})
	assert.ErrorIs(t, err, chaos.ErrInvalidScenario)
}
