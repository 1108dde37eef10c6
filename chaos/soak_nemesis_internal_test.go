package chaos

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/chaos/internal/harness"
)

// soakConfigs are the soak's configurations, as the policy sees them.
var soakConfigs = []struct {
	lock     string
	sentinel bool
	nodes    int
	unsafe   bool
}{
	{LockRedlock, false, 5, false},
	{LockRedlock, false, 5, true},
	{LockSingle, false, 1, false},
	{LockSingle, false, 1, true},
	{LockSingle, true, 2, false},
	{LockSingle, true, 2, true},
}

func TestSoakPolicy(t *testing.T) {
	common := []soakFault{faultKill, faultPause, faultCut, faultBlackhole, faultLatency, faultReset}
	unsafeOnly := []soakFault{faultWipe, faultClock, faultRestartEmpty}
	for _, tc := range []struct {
		lock      string
		sentinel  bool
		nodes     int
		unsafe    bool
		max       int
		allowed   []soakFault
		exclusive []soakFault
	}{
		// Redlock: a minority; restarts without persistence and wipes only
		// under the restart quarantine.
		{LockRedlock, false, 5, false, 2, append(common, faultRestartEmpty, faultWipe), nil},
		{LockRedlock, false, 5, true, 3, append(common, unsafeOnly...), nil},
		// Single: one fault at a time; losing the key is unsafe.
		{LockSingle, false, 1, false, 1, common, nil},
		{LockSingle, false, 1, true, 1, append(common, unsafeOnly...), nil},
		// Over Sentinel: failovers in both runs (safe with replica acks),
		// each started with no other fault; a wipe or a clock jump hits
		// both nodes.
		{LockSingle, true, 2, false, 1, append(common, faultFailover), []soakFault{faultFailover}},
		{LockSingle, true, 2, true, 2, append(common, append(unsafeOnly, faultFailover)...), []soakFault{faultFailover, faultWipe, faultClock}},
	} {
		name := fmt.Sprintf("%s unsafe=%v", harness.SoakConfig(tc.lock, tc.sentinel), tc.unsafe)
		p := soakPolicy(tc.lock, tc.sentinel, tc.nodes, tc.unsafe)
		assert.Equal(t, tc.max, p.maxDisturbed, name)
		for k := range numSoakFaults {
			assert.Equal(t, contains(tc.allowed, k), p.allows(k), "%s: %s", name, k)
			assert.Equal(t, contains(tc.exclusive, k), p.exclusive[k] && p.allows(k), "%s: %s exclusive", name, k)
		}
	}
}

func contains(ks []soakFault, k soakFault) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}

// fakeInjector records the faults a nemesis starts and heals, on a clock
// the test moves, and checks at every start, from its own record, what the
// policy promises: the kind is allowed; an exclusive kind starts only with
// no node disturbed; no more nodes are disturbed than the policy allows. A
// node is disturbed while a fault on it is not healed, for quarantine+1s
// after a killed or emptied node is back or a wipe, for 2 TTLs after a
// clock jump (every node's, for an allNodes kind), and for
// soakFailoverRest after a failover, which hits the primary (the fake
// alternates it).
type fakeInjector struct {
	t       *testing.T
	pol     nemesisPolicy
	nodes   int
	q       time.Duration
	now     *time.Time
	open    map[int]int       // unhealed faults by node
	until   map[int]time.Time // end of a node's quarantine or early-expiry period
	started map[soakFault]int
	healed  int
	needed  int
	primary int
}

func (f *fakeInjector) busy(node int) bool { return f.open[node] > 0 || f.now.Before(f.until[node]) }

func (f *fakeInjector) disturbed() int {
	n := 0
	for node := range f.nodes {
		if f.busy(node) {
			n++
		}
	}
	return n
}

func (f *fakeInjector) start(p *faultPlan) (func() error, error) {
	require.True(f.t, f.pol.allows(p.kind), "fault %s not allowed", p.kind)
	if f.pol.exclusive[p.kind] {
		assert.Zero(f.t, f.disturbed(), "exclusive fault %s with nodes disturbed", p.kind)
	}
	assert.False(f.t, f.busy(p.node), "fault %s on disturbed node %d", p.kind, p.node)
	f.started[p.kind]++
	hit := []int{p.node}
	if f.pol.allNodes[p.kind] {
		hit = allNodes(f.nodes)
	}
	var heal func() error
	switch p.kind {
	case faultWipe:
		for _, n := range hit {
			f.until[n] = f.now.Add(f.q + time.Second)
		}
	case faultClock:
		for _, n := range hit {
			f.until[n] = f.now.Add(2 * scenarioTTL)
		}
	case faultFailover:
		p.node = f.primary
		f.until[p.node] = f.now.Add(soakFailoverRest)
		f.primary = 1 - f.primary
	default:
		f.open[p.node]++
		f.needed++
		heal = func() error {
			f.open[p.node]--
			f.healed++
			if p.kind == faultKill || p.kind == faultRestartEmpty {
				f.until[p.node] = f.now.Add(f.q + time.Second)
			}
			return nil
		}
	}
	assert.LessOrEqual(f.t, f.disturbed(), f.pol.maxDisturbed, "at %v after %s", *f.now, p.kind)
	return heal, nil
}

func TestSoakNemesisLimits(t *testing.T) {
	for _, tc := range soakConfigs {
		name := fmt.Sprintf("%s unsafe=%v", harness.SoakConfig(tc.lock, tc.sentinel), tc.unsafe)
		q := time.Duration(0)
		if tc.lock == LockRedlock {
			q = scenarioQuarantine
		}
		pol := soakPolicy(tc.lock, tc.sentinel, tc.nodes, tc.unsafe)
		now := time.Unix(0, 0)
		inj := &fakeInjector{t: t, pol: pol, nodes: tc.nodes, q: q, now: &now, open: map[int]int{}, until: map[int]time.Time{},
			started: map[soakFault]int{}}
		nem := newNemesis(pol, 7, tc.nodes, scenarioClients, q, inj)
		end := now.Add(30 * time.Minute)
		for now.Before(end) {
			wake, err := nem.step(now)
			require.NoError(t, err)
			require.True(t, wake.After(now), "the nemesis must move on")
			now = wake
		}
		require.NoError(t, nem.heal(now, true))
		assert.Equal(t, inj.needed, inj.healed, "%s: every fault is healed", name)
		counts, peak := nem.faultCounts()
		assert.Equal(t, pol.maxDisturbed, peak, "%s: the nemesis reaches its limit", name)
		for k := range numSoakFaults {
			assert.Equal(t, pol.allows(k), inj.started[k] > 0, "%s: %s injected", name, k)
			assert.Equal(t, inj.started[k], counts[k.String()], "%s: %s counted", name, k)
		}
	}
}

// TestPickKind checks the draw: by weight, never an exclusive kind unless
// idle, and nothing when only exclusive kinds have weight.
func TestPickKind(t *testing.T) {
	var p nemesisPolicy
	p.weights[faultKill], p.weights[faultPause], p.weights[faultLatency] = 30, 10, 0
	p.exclusive[faultKill] = true
	rng := rand.New(rand.NewPCG(1, 1))
	drawn := map[soakFault]int{}
	for range 4000 {
		k, ok := p.pickKind(rng, true)
		require.True(t, ok)
		drawn[k]++
	}
	assert.InDelta(t, 3000, drawn[faultKill], 150, "by weight")
	assert.InDelta(t, 1000, drawn[faultPause], 150, "by weight")
	assert.Len(t, drawn, 2, "only kinds with weight")
	for range 1000 {
		k, ok := p.pickKind(rng, false)
		require.True(t, ok)
		assert.Equal(t, faultPause, k, "no exclusive kind while a node is disturbed")
	}
	p.weights[faultPause] = 0
	_, ok := p.pickKind(rng, false)
	assert.False(t, ok, "nothing left to draw")
}
