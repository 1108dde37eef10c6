package chaos_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/chaos"
	"github.com/redfence/redfence/chaos/internal/harness"
)

// TestSoakShort runs a short safe soak of redlock on local redis-server
// processes: faults are injected and every check passes.
func TestSoakShort(t *testing.T) {
	b := chaos.NewProcessBackend()
	t.Cleanup(func() { assert.NoError(t, b.Close()) })
	var progress bytes.Buffer
	res, err := harness.Soak(t.Context(), b, harness.SoakOptions{
		Lock: chaos.LockRedlock, Duration: 4 * time.Second, Seed: 3,
		Progress: &progress, ProgressEvery: time.Second, SampleEvery: 250 * time.Millisecond, Window: time.Second,
	})
	require.NoError(t, err)
	var table bytes.Buffer
	require.NoError(t, harness.WriteSoakTable(&table, []harness.SoakResult{res}))
	t.Log("\n" + progress.String() + table.String())
	assert.True(t, res.Pass, res.Fails)
	assert.Positive(t, res.Grants)
	assert.NotEmpty(t, res.Faults)
	assert.Positive(t, res.Windows)
	assert.Contains(t, progress.String(), "violations so far")
	assert.Contains(t, table.String(), "PASS")
}

// TestSoakSentinelShort runs a short safe soak of single over Sentinel on
// local processes: the nemesis fails the primary over (seed 24 draws a
// failover first), Sentinel promotes the replica each time, and every
// check passes, no double grant included: the clients ask for replica
// acknowledgements (WithReplicaAcks), which make a failover safe.
func TestSoakSentinelShort(t *testing.T) {
	b := chaos.NewProcessBackend()
	t.Cleanup(func() { assert.NoError(t, b.Close()) })
	res, err := harness.Soak(t.Context(), b, harness.SoakOptions{
		Lock: chaos.LockSingle, Sentinel: true, Duration: 8 * time.Second, Seed: 24,
		SampleEvery: 250 * time.Millisecond, Window: time.Second,
	})
	require.NoError(t, err)
	var table bytes.Buffer
	require.NoError(t, harness.WriteSoakTable(&table, []harness.SoakResult{res}))
	t.Log("\n" + table.String())
	assert.True(t, res.Pass, res.Fails)
	assert.Positive(t, res.Grants)
	assert.Positive(t, res.Faults["failover"])
	assert.GreaterOrEqual(t, res.Promotions, res.Faults["failover"], "each failover promotes the other node")
	assert.Contains(t, table.String(), "single+sentinel safe")
}

func TestSoakRejectsBadOptions(t *testing.T) {
	b := chaos.NewProcessBackend()
	t.Cleanup(func() { assert.NoError(t, b.Close()) })
	for name, o := range map[string]harness.SoakOptions{
		"no lock":           {},
		"unknown lock":      {Lock: "etcd"},
		"negative duration": {Lock: chaos.LockSingle, Duration: -time.Second},
		"negative window":   {Lock: chaos.LockSingle, Window: -time.Second},
		"redlock sentinel":  {Lock: chaos.LockRedlock, Sentinel: true},
	} {
		_, err := harness.Soak(t.Context(), b, o)
		assert.ErrorIs(t, err, chaos.ErrInvalidScenario, name)
	}
	_, err := harness.Soak(t.Context(), nil, harness.SoakOptions{Lock: chaos.LockSingle})
	assert.ErrorIs(t, err, chaos.ErrInvalidScenario)
	_, err = harness.Soak(t.Context(), notABackend{}, harness.SoakOptions{Lock: chaos.LockSingle})
	assert.ErrorIs(t, err, chaos.ErrInvalidScenario, "a harness.Backend that is not a chaos.Backend")
}

// notABackend has harness.Backend's methods but not chaos.Backend's.
type notABackend struct{}

func (notABackend) Name() string { return "none" }
func (notABackend) Close() error { return nil }

// TestSoakEndsWhenTheNemesisFails: when a fault cannot be injected (here
// every kill, pause and clock jump fails), the soak ends at once with that
// error instead of running out its duration without faults (the 10-minute
// duration would time the test out).
func TestSoakEndsWhenTheNemesisFails(t *testing.T) {
	b := &brokenNodes{Backend: chaos.NewProcessBackend()}
	t.Cleanup(func() { assert.NoError(t, b.Close()) })
	res, err := harness.Soak(t.Context(), b, harness.SoakOptions{
		Lock: chaos.LockRedlock, Duration: 10 * time.Minute, Seed: 3,
		SampleEvery: 250 * time.Millisecond, Window: time.Second,
	})
	require.ErrorIs(t, err, errBroken)
	assert.False(t, res.Pass)
}

var errBroken = errors.New("this node cannot be disturbed")

// brokenNodes is a backend whose nodes refuse every fault.
type brokenNodes struct{ chaos.Backend }

func (b *brokenNodes) StartNodes(ctx context.Context, n int, spec chaos.NodeSpec) ([]chaos.Node, error) {
	nodes, err := b.Backend.StartNodes(ctx, n, spec)
	for i, nd := range nodes {
		nodes[i] = brokenNode{nd}
	}
	return nodes, err
}

type brokenNode struct{ chaos.Node }

func (brokenNode) Kill(context.Context) error                          { return errBroken }
func (brokenNode) Pause(context.Context) error                         { return errBroken }
func (brokenNode) SetClockOffset(context.Context, time.Duration) error { return errBroken }
