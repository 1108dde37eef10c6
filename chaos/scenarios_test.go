package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/chaos"
	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/redlock"
)

func TestScenarioList(t *testing.T) {
	scs := chaos.Scenarios()
	require.Len(t, scs, 15)
	runnable := 0
	for i, sc := range scs {
		assert.Equal(t, strconv.Itoa(i+1), sc.Name)
		for _, s := range append([]chaos.Scenario{sc}, sc.Variants...) {
			assert.NotEmpty(t, s.Title, s.Name)
			assert.NotEmpty(t, s.Steps, s.Name)
			assert.NotEmpty(t, s.Expect, s.Name)
			assert.NotEmpty(t, s.Why, s.Name)
			assert.NotEmpty(t, s.Locks, s.Name)
		}
		runnable += len(sc.Runs())
	}
	assert.Equal(t, 21, runnable, "6 has three variants, 14 four, 15 two")
	assert.Equal(t, []string{"6a", "6b", "6c"}, names(scs[5].Runs()))
	for _, v := range scs[5].Runs() {
		assert.Equal(t, []string{chaos.LockRedlock}, v.Locks, v.Name)
	}
	assert.Equal(t, []string{"14a", "14b", "14c", "14d"}, names(scs[13].Runs()))
	for _, v := range scs[13].Runs() {
		assert.Equal(t, []string{chaos.LockRedlock}, v.Locks, v.Name)
	}
	for _, name := range []string{"1", "3", "4"} {
		found, err := chaos.FindScenarios(name)
		require.NoError(t, err)
		assert.True(t, found[0].Supports(chaos.LockSingle), "scenario %s also runs on single", name)
	}
	seven, err := chaos.FindScenarios("7")
	require.NoError(t, err)
	assert.Equal(t, []string{chaos.LockSingle}, seven[0].Locks)
	assert.Equal(t, []string{"15a", "15b"}, names(scs[14].Runs()))
	for _, v := range scs[14].Runs() {
		assert.Equal(t, []string{chaos.LockSingle}, v.Locks, v.Name)
	}
}

func names(scs []chaos.Scenario) []string {
	var out []string
	for _, sc := range scs {
		out = append(out, sc.Name)
	}
	return out
}

func TestFindScenarios(t *testing.T) {
	got, err := chaos.FindScenarios("6")
	require.NoError(t, err)
	assert.Equal(t, []string{"6a", "6b", "6c"}, names(got))
	got, err = chaos.FindScenarios(" 6b ")
	require.NoError(t, err)
	assert.Equal(t, []string{"6b"}, names(got))
	got, err = chaos.FindScenarios("14")
	require.NoError(t, err)
	assert.Equal(t, []string{"14a", "14b", "14c", "14d"}, names(got))
	got, err = chaos.FindScenarios("15")
	require.NoError(t, err)
	assert.Equal(t, []string{"15a", "15b"}, names(got))
	got, err = chaos.FindScenarios("15b")
	require.NoError(t, err)
	assert.Equal(t, []string{"15b"}, names(got))
	for _, bad := range []string{"", "0", "16", "6d", "14e", "15c", "15z", "x"} {
		_, err := chaos.FindScenarios(bad)
		assert.ErrorIs(t, err, chaos.ErrInvalidScenario, bad)
	}
}

// TestEveryRunIsPlayable: Run accepts every runnable scenario (variants
// included, which take their parent's script when they have none) on each
// of its locks, and goes on to check the options, which here it refuses.
func TestEveryRunIsPlayable(t *testing.T) {
	b := chaos.NewProcessBackend()
	t.Cleanup(func() { assert.NoError(t, b.Close()) })
	for _, sc := range chaos.Scenarios() {
		for _, r := range sc.Runs() {
			for _, lock := range r.Locks {
				_, err := chaos.Run(t.Context(), b, r, lock, chaos.RunOptions{Duration: -time.Second})
				require.ErrorIs(t, err, chaos.ErrInvalidScenario, r.Name)
				assert.Contains(t, err.Error(), "duration", "%s on %s: refused for its options, not the scenario", r.Name, lock)
			}
		}
	}
}

func TestRunRejectsWhatItCannotRun(t *testing.T) {
	ctx := t.Context()
	b := chaos.NewProcessBackend()
	t.Cleanup(func() { assert.NoError(t, b.Close()) })
	six, seven, one := chaos.Scenarios()[5], chaos.Scenarios()[6], chaos.Scenarios()[0]
	fifteenA := chaos.Scenarios()[14].Runs()[0]
	for name, tc := range map[string]struct {
		b    chaos.Backend
		sc   chaos.Scenario
		lock string
		opts chaos.RunOptions
	}{
		"parent of variants":     {b, six, chaos.LockRedlock, chaos.RunOptions{}},
		"lock not supported":     {b, seven, chaos.LockRedlock, chaos.RunOptions{}},
		"unknown lock":           {b, one, "zookeeper", chaos.RunOptions{}},
		"made outside":           {b, chaos.Scenario{Name: "x", Locks: []string{chaos.LockRedlock}}, chaos.LockRedlock, chaos.RunOptions{}},
		"nil backend":            {nil, one, chaos.LockRedlock, chaos.RunOptions{}},
		"negative duration":      {b, one, chaos.LockRedlock, chaos.RunOptions{Duration: -time.Second}},
		"negative check timeout": {b, one, chaos.LockRedlock, chaos.RunOptions{CheckTimeout: -1}},
		"unknown client":         {b, one, chaos.LockRedlock, chaos.RunOptions{Client: "redigo"}},
		"sentinel over rueidis":  {b, fifteenA, chaos.LockSingle, chaos.RunOptions{Client: chaos.ClientRueidis}},
	} {
		res, err := chaos.Run(ctx, tc.b, tc.sc, tc.lock, tc.opts)
		assert.ErrorIs(t, err, chaos.ErrInvalidScenario, name)
		assert.False(t, res.Pass, name)
	}
}

// TestScenarios runs scenario 1 (both locks) and scenario 8 on local
// processes and asserts their expectations. The whole suite, on both
// backends, is `make chaos`.
func TestScenarios(t *testing.T) {
	b := chaos.NewProcessBackend()
	t.Cleanup(func() { assert.NoError(t, b.Close()) })
	dir := t.TempDir()
	opts := chaos.RunOptions{Seed: 3, Duration: time.Second, ArtifactsDir: dir}
	run := func(t *testing.T, name, lock string) chaos.Result {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		sc, err := chaos.FindScenarios(name)
		require.NoError(t, err)
		require.Len(t, sc, 1)
		res, err := chaos.Run(ctx, b, sc[0], lock, opts)
		require.NoError(t, err)
		t.Log(res.Note)
		assert.Equal(t, name, res.Scenario)
		assert.Equal(t, lock, res.Lock)
		assert.Equal(t, "process", res.Backend)
		assert.True(t, res.Pass, res.Note)
		assert.Contains(t, res.Note, "expected: "+sc[0].Expect)
		assert.Positive(t, res.Grants)
		assert.Zero(t, res.FencedViolations)
		assert.Zero(t, res.LostUpdates)
		assert.Zero(t, res.Overran)
		assert.Zero(t, res.KeysLeft)
		return res
	}
	for _, lock := range []string{chaos.LockRedlock, chaos.LockSingle} {
		t.Run("1-"+lock, func(t *testing.T) {
			res := run(t, "1", lock)
			assert.Zero(t, res.DoubleGrants)
			assert.Zero(t, res.FencedRejected)
			assert.Equal(t, res.Grants, res.FencedAccepted)
			assert.Equal(t, string(chaos.Linearizable), res.Linearizable)
		})
	}
	t.Run("8-redlock", func(t *testing.T) {
		res := run(t, "8", chaos.LockRedlock)
		assert.GreaterOrEqual(t, res.DoubleGrants, 1, "the clock jump must give two holders")
		assert.GreaterOrEqual(t, res.FencedRejected, 1, "the earlier holder's late write must be rejected")
		assert.Equal(t, string(chaos.Violation), res.Linearizable, "the mutex model sees the double grant")
		assert.Contains(t, res.Note, "A's late write REJECTED")
	})
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "runs that pass save no artifacts")
}

func TestTokenProblems(t *testing.T) {
	acq := func(id int, call, ret time.Duration, tok fencing.Token) chaos.Op {
		return chaos.Op{ID: id, Kind: chaos.Acquire, Status: chaos.OK, Call: call, Return: ret, Token: tok, ValidUntil: ret + time.Second}
	}
	tests := []struct {
		name              string
		ops               []chaos.Op
		dups, regressions int
	}{
		{"increasing", []chaos.Op{acq(0, 0, 1, 1), acq(1, 2, 3, 2), acq(2, 4, 5, 3)}, 0, 0},
		{"concurrent acquires may return out of order", []chaos.Op{acq(0, 0, 5, 2), acq(1, 1, 3, 1)}, 0, 0},
		{"repeat", []chaos.Op{acq(0, 0, 1, 4), acq(1, 2, 3, 4)}, 1, 1},
		{"concurrent repeat", []chaos.Op{acq(0, 0, 5, 4), acq(1, 1, 3, 4)}, 1, 0},
		{"regression", []chaos.Op{acq(0, 0, 1, 5), acq(1, 2, 3, 3)}, 0, 1},
		{"failed acquires and zero tokens ignored", []chaos.Op{acq(0, 0, 1, 5), {ID: 1, Kind: chaos.Acquire, Status: chaos.Fail, Call: 2, Return: 3, Token: 1}, acq(2, 4, 5, 0)}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dups, regressions, example := chaos.TokenProblems(tt.ops)
			assert.Equal(t, tt.dups, dups)
			assert.Equal(t, tt.regressions, regressions)
			assert.Equal(t, dups+regressions > 0, example != "", example)
		})
	}
}

func TestClassifyRelease(t *testing.T) {
	assert.NoError(t, chaos.ClassifyRelease(nil))
	for _, definite := range []error{redlock.ErrLost, fmt.Errorf("x: %w", redlock.ErrReleased)} {
		err := chaos.ClassifyRelease(definite)
		assert.Same(t, definite, err, "a definite failure is kept as it is")
	}
	cause := &redlock.QuorumError{Op: "release", Need: 3, Got: 2}
	err := chaos.ClassifyRelease(cause)
	require.ErrorIs(t, err, chaos.ErrAmbiguous, "an ambiguous failure is marked, so the workload records it Unknown")
	var qe *redlock.QuorumError
	assert.ErrorAs(t, err, &qe, "the cause is kept")
	assert.False(t, errors.Is(err, redlock.ErrLost))
}

// TestScenarioOverRueidis runs scenario 1 with the locks over rueidis
// clients (RunOptions.Client): the expectation holds, and the result says
// which client ran. make chaos runs every scenario over rueidis too. The
// run lasts 3s: once in CI, beside the other packages' tests, 1s ended
// before any of the four clients was granted.
func TestScenarioOverRueidis(t *testing.T) {
	b := chaos.NewProcessBackend()
	t.Cleanup(func() { assert.NoError(t, b.Close()) })
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	sc, err := chaos.FindScenarios("1")
	require.NoError(t, err)
	res, err := chaos.Run(ctx, b, sc[0], chaos.LockRedlock, chaos.RunOptions{Seed: 3, Duration: 3 * time.Second, Client: chaos.ClientRueidis})
	require.NoError(t, err)
	assert.True(t, res.Pass, res.Note)
	assert.Positive(t, res.Grants)
	assert.Equal(t, chaos.ClientRueidis, res.Client)
}
