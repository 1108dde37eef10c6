package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/chaos"
	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
)

// Both lock packages plug in as they are.
var (
	_ chaos.Lease = (*redlock.Lease)(nil)
	_ chaos.Lease = (*redlock.Lease)(nil)
	_             = func(m *redlock.Mutex) chaos.Locker { return chaos.Adapt(m) }
	_             = func(m *redlock.Mutex) chaos.Locker { return chaos.Adapt(m) }
)

// fakeLease is a Lease with a fixed token and validity; Release does nothing.
type fakeLease struct {
	token fencing.Token
	until time.Time
}

func (l *fakeLease) Token() fencing.Token            { return l.token }
func (l *fakeLease) ValidUntil() time.Time           { return l.until }
func (l *fakeLease) Release(_ context.Context) error { return nil }

// tryLocker is a lock with a TryLock method, for Adapt.
type tryLocker struct {
	lease *fakeLease
	err   error
}

func (m *tryLocker) TryLock(context.Context) (*fakeLease, error) { return m.lease, m.err }

func TestAdapt(t *testing.T) {
	ctx := t.Context()
	boom := errors.New("boom")
	lease := &fakeLease{token: 3, until: time.Now().Add(time.Second)}

	got, err := chaos.Adapt(&tryLocker{lease: lease}).Acquire(ctx)
	require.NoError(t, err)
	assert.Same(t, lease, got)

	got, err = chaos.Adapt(&tryLocker{err: boom}).Acquire(ctx)
	assert.ErrorIs(t, err, boom)
	assert.Nil(t, got, "no typed nil inside the interface")

	got, err = chaos.Adapt(&tryLocker{}).Acquire(ctx)
	assert.ErrorIs(t, err, chaos.ErrNoLease)
	assert.Nil(t, got)

	_, err = chaos.Adapt((*tryLocker)(nil)).Acquire(ctx)
	assert.ErrorIs(t, err, chaos.ErrInvalidWorkload)
	_, err = chaos.Adapt((*redlock.Mutex)(nil)).Acquire(ctx)
	assert.ErrorIs(t, err, chaos.ErrInvalidWorkload)
	_, err = chaos.LockerFunc(nil).Acquire(ctx)
	assert.ErrorIs(t, err, chaos.ErrInvalidWorkload)
}

func TestPercentile(t *testing.T) {
	seq := func(n int) []time.Duration {
		out := make([]time.Duration, n)
		for i := range out {
			out[i] = time.Duration(i+1) * ms
		}
		return out
	}
	for _, tc := range []struct {
		name string
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one value p50", seq(1), 50, 1 * ms},
		{"one value p99", seq(1), 99, 1 * ms},
		{"100 p50", seq(100), 50, 50 * ms},
		{"100 p99", seq(100), 99, 99 * ms},
		{"100 p100", seq(100), 100, 100 * ms},
		{"10 p50", seq(10), 50, 5 * ms},
		{"10 p99", seq(10), 99, 10 * ms},
		{"p0 clamps to the first", seq(10), 0, 1 * ms},
		{"p above 100 clamps to the last", seq(10), 150, 10 * ms},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, chaos.Percentile(tc.in, tc.p))
		})
	}
}

func TestAvailability(t *testing.T) {
	for _, tc := range []struct {
		name       string
		start, end time.Duration
		grants     []time.Duration
		window     time.Duration
		want       float64
	}{
		{"no grants", 0, time.Second, nil, 100 * ms, 0},
		{"two of ten windows", 0, time.Second, []time.Duration{50 * ms, 150 * ms, 160 * ms}, 100 * ms, 0.2},
		{"every window", 0, 300 * ms, []time.Duration{0, 100 * ms, 299 * ms}, 100 * ms, 1},
		{"offset start", time.Second, 1200 * ms, []time.Duration{500 * ms, 1150 * ms}, 100 * ms, 0.5},
		{"partial last window ignored", 0, 250 * ms, []time.Duration{10 * ms, 220 * ms}, 100 * ms, 0.5},
		{"run shorter than a window", 0, 50 * ms, []time.Duration{10 * ms}, 100 * ms, 1},
		{"bad window", 0, time.Second, []time.Duration{10 * ms}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &chaos.Stats{Start: tc.start, End: tc.end, GrantTimes: tc.grants}
			assert.InDelta(t, tc.want, st.Availability(tc.window), 1e-9)
		})
	}
	assert.Zero(t, (*chaos.Stats)(nil).Availability(time.Second))
}

func TestRecoveryAfter(t *testing.T) {
	st := &chaos.Stats{GrantTimes: []time.Duration{10 * ms, 20 * ms, 500 * ms}}
	for _, tc := range []struct {
		heal time.Duration
		want time.Duration
		ok   bool
	}{
		{0, 10 * ms, true},
		{20 * ms, 0, true},
		{21 * ms, 479 * ms, true},
		{501 * ms, 0, false},
	} {
		got, ok := st.RecoveryAfter(tc.heal)
		assert.Equal(t, tc.ok, ok, "heal %v", tc.heal)
		assert.Equal(t, tc.want, got, "heal %v", tc.heal)
	}
	_, ok := (*chaos.Stats)(nil).RecoveryAfter(0)
	assert.False(t, ok)
}

func TestComputeStats(t *testing.T) {
	stale := write(5, 1, 0, 1, chaos.Fail, 1, "x")
	invalid := write(6, 1, 0, 1, chaos.Fail, 0, "x")
	invalid.Note = ""
	ops := []chaos.Op{
		acq(0, 0, 0, 10, 500, 1),               // 10ms
		acq(1, 1, 0, 30, 500, 2),               // 30ms
		acqStatus(2, 2, 0, 1200, chaos.Fail),   // 1.2s: overran (timeout 1s + slack 50ms)
		acqStatus(3, 3, 100, 0, chaos.Unknown), // never returned: overran
		write(4, 0, 0, 1, chaos.OK, 1, "a"), stale, invalid,
		{ID: 7, Kind: chaos.UnfencedWrite, Status: chaos.OK, Lease: 0},
		{ID: 8, Kind: chaos.UnfencedWrite, Status: chaos.Unknown, Lease: 1},
		{ID: 9, Kind: chaos.Release, Status: chaos.OK, Lease: 0},
	}
	st := chaos.ComputeStats(ops, 0, 2*time.Second, time.Second, 50*ms)
	assert.Equal(t, 2, st.Grants)
	assert.Equal(t, 1, st.AcquireFailed)
	assert.Equal(t, 1, st.AcquireUnknown)
	assert.Equal(t, []int{1, 1, 1}, []int{st.FencedAccepted, st.FencedRejected, st.FencedErrors})
	assert.Equal(t, []int{2, 1}, []int{st.ControlAttempts, st.ControlIncrements})
	// Latencies of the acquires that returned: 10ms, 30ms, 1.2s.
	assert.Equal(t, []time.Duration{30 * ms, 1200 * ms, 1200 * ms}, []time.Duration{st.P50, st.P99, st.Max})
	assert.Equal(t, 2, st.Overran)
	assert.Equal(t, []time.Duration{10 * ms, 30 * ms}, st.GrantTimes)
}

func TestWorkloadInvalid(t *testing.T) {
	ok := chaos.LockerFunc(func(context.Context) (chaos.Lease, error) { return nil, errors.New("no") })
	for _, tc := range []struct {
		name string
		w    *chaos.Workload
	}{
		{"no locker", &chaos.Workload{}},
		{"nil LockerFunc", &chaos.Workload{Locker: chaos.LockerFunc(nil)}},
		{"lockers and clients disagree", &chaos.Workload{Lockers: []chaos.Locker{ok, ok}, Clients: 3}},
		{"nil in lockers", &chaos.Workload{Lockers: []chaos.Locker{ok, nil}}},
		{"negative clients", &chaos.Workload{Locker: ok, Clients: -1}},
		{"negative hold", &chaos.Workload{Locker: ok, Hold: -time.Second}},
		{"negative window", &chaos.Workload{Locker: ok, Window: -time.Second}},
		{"nil workload", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := tc.w.Run(t.Context(), chaos.NewHistory())
			assert.ErrorIs(t, err, chaos.ErrInvalidWorkload)
			assert.Nil(t, st)
		})
	}
	_, err := (&chaos.Workload{Locker: ok}).Run(t.Context(), nil)
	assert.ErrorIs(t, err, chaos.ErrInvalidWorkload)
}

// saveOnFailure writes the run's artifacts where they survive the test, and
// logs where, if the test failed.
func saveOnFailure(t *testing.T, seed int64, h *chaos.History, res chaos.Result) {
	t.Helper()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		dir, err := os.MkdirTemp("", "chaos-"+filepath.Base(t.Name())+"-")
		if err != nil {
			t.Logf("artifacts: %v", err)
			return
		}
		if err := chaos.WriteArtifacts(dir, seed, h, 10*time.Second, res); err != nil {
			t.Logf("artifacts: %v", err)
			return
		}
		t.Logf("artifacts (history.json, mutex.html, register.html, summary.txt) in %s", dir)
	})
}

// TestWorkloadRedlock drives Redlock on five real Redis nodes: a correct lock
// must show no overlap, no fenced violation, no lost update, and a
// linearizable history.
func TestWorkloadRedlock(t *testing.T) {
	clients := redistest.Clients(t, redistest.Nodes(t, 5))
	c, err := redlock.New(clients, redlock.WithFencing(), redlock.WithTTL(time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.Vouch(t.Context()), "the nodes are brand new")
	m, err := c.NewMutex(redistest.Key(t))
	require.NoError(t, err)

	const seed = 1
	h := chaos.NewHistory()
	w := &chaos.Workload{
		Locker:   chaos.Adapt(m),
		Clients:  4,
		Guard:    fencing.NewRedisGuard(clients[0]),
		Resource: redistest.Key(t),
		Seed:     seed,
	}
	ctx, cancel := context.WithTimeout(t.Context(), 1500*ms)
	defer cancel()
	st, err := w.Run(ctx, h)
	require.NoError(t, err)
	ops := h.Ops()
	res := chaos.NewResult(ops, st, 10*time.Second)
	res.Scenario, res.Lock, res.Backend = "baseline", "redlock", "process"
	saveOnFailure(t, seed, h, res)

	assert.Positive(t, st.Grants)
	assert.Empty(t, chaos.Overlaps(ops), "no double grant")
	assert.Empty(t, chaos.FencedViolations(ops), "no fenced violation")
	assert.Zero(t, st.LostUpdates, "no lost update")
	assert.Equal(t, st.Grants, st.FencedAccepted, "every holder's write is accepted")
	assert.Equal(t, st.ControlIncrements, int(st.ControlValue), "every increment landed")
	assert.Zero(t, st.Overran, "no acquire overran its deadline")
	for _, model := range []chaos.Model{chaos.MutexModel, chaos.RegisterModel} {
		v, err := chaos.CheckLinearizable(model, ops, 10*time.Second)
		require.NoError(t, err)
		assert.Equal(t, chaos.Linearizable, v, "%s model", model)
	}
	assert.True(t, res.Pass)
	assert.Positive(t, res.Availability)
	t.Logf("grants %d, failed %d, unknown %d, p50 %v, p99 %v, max %v, availability %.0f%%, ops %d",
		st.Grants, st.AcquireFailed, st.AcquireUnknown, st.P50, st.P99, st.Max, res.Availability*100, len(ops))
}

// TestWorkloadBrokenLock proves the checkers can fail: a lock that grants
// every request must show overlaps, lost updates and a mutex-model
// violation, while the fenced resource, whose guard rejects stale tokens,
// stays correct.
func TestWorkloadBrokenLock(t *testing.T) {
	var next atomic.Uint64
	broken := chaos.LockerFunc(func(context.Context) (chaos.Lease, error) {
		return &fakeLease{token: fencing.Token(next.Add(1)), until: time.Now().Add(time.Second)}, nil
	})
	const seed = 7
	h := chaos.NewHistory()
	ctx, cancel := context.WithTimeout(t.Context(), 300*ms)
	defer cancel()
	st, err := (&chaos.Workload{Locker: broken, Clients: 4, Hold: 5 * ms, Seed: seed}).Run(ctx, h)
	require.NoError(t, err)
	ops := h.Ops()
	res := chaos.NewResult(ops, st, 10*time.Second)
	saveOnFailure(t, seed, h, res)

	assert.Positive(t, st.Grants)
	assert.NotEmpty(t, chaos.Overlaps(ops), "double grants detected")
	assert.Positive(t, st.LostUpdates, "lost updates detected")
	v, err := chaos.CheckLinearizable(chaos.MutexModel, ops, 10*time.Second)
	require.NoError(t, err)
	assert.Equal(t, chaos.Violation, v, "mutex model violated")

	assert.Empty(t, chaos.FencedViolations(ops), "the guard keeps the fenced resource correct")
	v, err = chaos.CheckLinearizable(chaos.RegisterModel, ops, 10*time.Second)
	require.NoError(t, err)
	assert.Equal(t, chaos.Linearizable, v, "register model holds")
	assert.Equal(t, st.Grants, st.FencedAccepted+st.FencedRejected, "every write judged by the guard")

	assert.False(t, res.Pass)
	assert.Positive(t, res.DoubleGrants)
	assert.Equal(t, string(chaos.Violation), res.Linearizable)
	t.Logf("grants %d, overlaps %d, lost updates %d of %d, stale writes rejected %d",
		st.Grants, res.DoubleGrants, st.LostUpdates, st.ControlIncrements, st.FencedRejected)
}

// TestWorkloadFailingLock: a lock that never grants is recorded as failures
// (or unknown on timeouts), and the run still ends with its context.
func TestWorkloadFailingLock(t *testing.T) {
	never := chaos.LockerFunc(func(context.Context) (chaos.Lease, error) {
		return nil, fmt.Errorf("taken")
	})
	slow := chaos.LockerFunc(func(ctx context.Context) (chaos.Lease, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	h := chaos.NewHistory()
	ctx, cancel := context.WithTimeout(t.Context(), 100*ms)
	defer cancel()
	st, err := (&chaos.Workload{Lockers: []chaos.Locker{never, slow}, AcquireTimeout: 20 * ms}).Run(ctx, h)
	require.NoError(t, err)
	assert.Zero(t, st.Grants)
	assert.Positive(t, st.AcquireFailed)
	assert.Positive(t, st.AcquireUnknown, "timeouts are unknown")
	assert.Zero(t, st.Overran)
	assert.Zero(t, st.Availability(10*ms))
	_, ok := st.RecoveryAfter(0)
	assert.False(t, ok)
	for _, op := range h.Ops() {
		assert.Equal(t, chaos.Acquire, op.Kind)
		assert.NotEqual(t, chaos.OK, op.Status)
		if op.Client == 1 {
			assert.Equal(t, chaos.Unknown, op.Status)
		} else {
			assert.Equal(t, chaos.Fail, op.Status)
		}
	}
}
