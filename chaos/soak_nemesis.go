package chaos

import (
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/redfence/redfence/chaos/internal/harness"
)

// soakFault is one kind of fault the soak's nemesis injects.
type soakFault int

const (
	faultKill         soakFault = iota // kill, restart later (with AOFAlways persistence)
	faultRestartEmpty                  // kill, restart later without the AOF: the node comes back empty
	faultPause                         // SIGSTOP / docker pause, resume later
	faultCut                           // one client's link to the node refused
	faultBlackhole                     // one client's link to the node swallows traffic
	faultLatency                       // every client's link to the node slowed
	faultReset                         // one client's link to the node resets replies
	faultWipe                          // FLUSHALL: the node loses its keys and fence counter
	faultClock                         // the node's clock jumps forward, for good
	faultFailover                      // SENTINEL FAILOVER: the replica is promoted, the primary made its replica
	numSoakFaults
)

// String is the kind's name in harness.SoakFaults, which lists them in
// this order.
func (k soakFault) String() string { return harness.SoakFaults[k] }

// nemesisPolicy is what the nemesis may do: which faults, how often each
// (weights), and how many nodes it may disturb at once.
type nemesisPolicy struct {
	maxDisturbed int
	weights      [numSoakFaults]int
	// exclusive kinds start only while no node is disturbed (a failover
	// needs a healthy replica); allNodes kinds disturb every node (on
	// Sentinel a wipe reaches the replica, a clock jump is the host's).
	exclusive, allNodes [numSoakFaults]bool
}

// soakPolicy returns the nemesis policy of a soak of lock over nodes
// (sentinel: single over a Sentinel-managed primary and its replica, nodes
// 2).
//
// Safe runs stay within what the lock is documented to tolerate
// (docs/design.md, assumptions; docs/topologies.md for Sentinel):
//   - redlock: at most a minority of its nodes disturbed at once, a node
//     restarted (with or without persistence) or wiped counting until its
//     restart quarantine ends; restarts without persistence and wipes only
//     because the quarantine covers them (scenarios 6b, 14c); no clock jumps.
//   - single: one fault at a time on its one node; restarts only with
//     persistence; no wipes, no clock jumps.
//   - single over Sentinel: one fault at a time on either node, plus
//     failovers (WithReplicaAcks(1): a failover keeps every acknowledged
//     key, scenario 15b); restarts only with persistence; no wipes, no
//     clock jumps.
//
// Unsafe runs add clock jumps, wipes and restarts without persistence for
// every lock, let redlock disturb a majority and single over Sentinel both
// its nodes, and run Sentinel's clients without WithReplicaAcks, so that a
// failover can lose a lock (scenario 15a).
func soakPolicy(lock string, sentinel bool, nodes int, unsafe bool) nemesisPolicy {
	var p nemesisPolicy
	p.weights[faultKill] = 15
	p.weights[faultPause] = 20
	p.weights[faultCut] = 15
	p.weights[faultBlackhole] = 10
	p.weights[faultLatency] = 20
	p.weights[faultReset] = 10
	switch {
	case lock == LockRedlock:
		p.maxDisturbed = (nodes - 1) / 2
		p.weights[faultWipe] = 10
		p.weights[faultRestartEmpty] = 10
	case sentinel:
		p.maxDisturbed = 1
		p.weights[faultFailover] = 15
		p.exclusive[faultFailover] = true
		p.allNodes[faultWipe], p.allNodes[faultClock] = true, true
	default:
		p.maxDisturbed = 1
	}
	if unsafe {
		p.weights[faultWipe] = 10
		p.weights[faultClock] = 10
		p.weights[faultRestartEmpty] = 10
		switch {
		case lock == LockRedlock:
			p.maxDisturbed = nodes/2 + 1
		case sentinel:
			p.maxDisturbed = nodes
		}
	}
	for k := range numSoakFaults {
		p.exclusive[k] = p.exclusive[k] || p.allNodes[k]
	}
	return p
}

// allows reports whether the policy may inject kind.
func (p nemesisPolicy) allows(kind soakFault) bool { return p.weights[kind] > 0 }

// pickKind draws a fault kind by weight, leaving out the exclusive kinds
// unless idle (no node disturbed). It returns false if none is left.
func (p nemesisPolicy) pickKind(rng *rand.Rand, idle bool) (soakFault, bool) {
	total := 0
	for k, w := range p.weights {
		if idle || !p.exclusive[k] {
			total += w
		}
	}
	if total == 0 {
		return 0, false
	}
	x := rng.IntN(total)
	for k, w := range p.weights {
		if !idle && p.exclusive[k] {
			continue
		}
		if x < w {
			return soakFault(k), true
		}
		x -= w
	}
	return 0, false // unreachable: x < total
}

// faultPlan is one fault the nemesis decided to inject.
type faultPlan struct {
	kind    soakFault
	node    int
	client  int           // for the one-client link faults
	latency time.Duration // for faultLatency
}

// injector carries faults out. start injects p and returns its heal (nil
// when the fault needs none, as for a wipe or a clock jump). It may set
// p.node to the node the fault actually hit (a failover hits whichever
// node is the primary).
type injector interface {
	start(p *faultPlan) (heal func() error, err error)
}

// activeSoakFault is a fault in progress, or a node's quarantine after one.
type activeSoakFault struct {
	node  int
	until time.Time
	heal  func() error // nil: nothing to undo, the node just counts as disturbed
	after time.Duration
}

// nemesis is the soak's fault schedule. It is driven by step with the
// current time, so that its limits can be tested without Redis or sleeps.
type nemesis struct {
	pol      nemesisPolicy
	rng      *rand.Rand
	nodes    int
	clients  int
	inj      injector
	quaran   time.Duration // how long a restarted or wiped node stays disturbed after it is back
	gap      [2]time.Duration
	duration [2]time.Duration

	active []activeSoakFault
	next   time.Time

	mu     sync.Mutex
	counts [numSoakFaults]int // guarded by mu
	peak   int                // guarded by mu: most nodes disturbed at once
}

func newNemesis(pol nemesisPolicy, seed int64, nodes, clients int, quarantine time.Duration, inj injector) *nemesis {
	return &nemesis{
		pol: pol, rng: rand.New(rand.NewPCG(uint64(seed), 19)), nodes: nodes, clients: clients, inj: inj,
		quaran:   quarantine,
		gap:      [2]time.Duration{200 * time.Millisecond, 500 * time.Millisecond},
		duration: [2]time.Duration{200 * time.Millisecond, 900 * time.Millisecond},
	}
}

// soakFailoverRest is how long the old primary counts as disturbed after
// a failover has returned (the deployment whole again, soakSentinel.settle).
const soakFailoverRest = time.Second

func between(rng *rand.Rand, r [2]time.Duration) time.Duration {
	return r[0] + time.Duration(rng.Int64N(int64(r[1]-r[0])+1))
}

// disturbed returns the nodes with a fault or a quarantine in progress.
func (n *nemesis) disturbed() map[int]bool {
	busy := map[int]bool{}
	for _, f := range n.active {
		busy[f.node] = true
	}
	return busy
}

// step heals the faults due at now, starts one new fault if one is due and
// the policy allows it, and returns when it wants to be called next.
func (n *nemesis) step(now time.Time) (time.Time, error) {
	err := n.heal(now, false)
	if n.next.IsZero() {
		n.next = now
	}
	if !now.Before(n.next) {
		n.next = now.Add(between(n.rng, n.gap))
		if busy := n.disturbed(); len(busy) < n.pol.maxDisturbed {
			if sErr := n.start(now, busy); sErr != nil {
				return n.next, errors.Join(err, sErr)
			}
		}
	}
	wake := n.next
	for _, f := range n.active {
		if f.until.Before(wake) {
			wake = f.until
		}
	}
	return wake, err
}

// start draws a fault the policy allows with busy disturbed, and starts it.
func (n *nemesis) start(now time.Time, busy map[int]bool) error {
	kind, ok := n.pol.pickKind(n.rng, len(busy) == 0)
	if !ok || (n.pol.allNodes[kind] && n.nodes > n.pol.maxDisturbed) {
		return nil
	}
	var free []int
	for i := range n.nodes {
		if !busy[i] {
			free = append(free, i)
		}
	}
	p := faultPlan{kind: kind, node: free[n.rng.IntN(len(free))], client: n.rng.IntN(n.clients),
		latency: time.Duration(150+n.rng.IntN(250)) * time.Millisecond}
	heal, err := n.inj.start(&p)
	if err != nil {
		return err
	}
	f := activeSoakFault{node: p.node, until: now.Add(between(n.rng, n.duration)), heal: heal}
	switch p.kind {
	case faultKill, faultRestartEmpty:
		f.after = n.quaran + time.Second // back, but in its quarantine
	case faultWipe:
		f.until = now.Add(n.quaran + time.Second)
	case faultClock:
		f.until = now.Add(2 * scenarioTTL) // its keys expired early
	case faultFailover:
		f.until = now.Add(soakFailoverRest) // the old primary, now a replica
	}
	n.active = append(n.active, f)
	if n.pol.allNodes[p.kind] {
		for i := range n.nodes {
			if i != p.node {
				n.active = append(n.active, activeSoakFault{node: i, until: f.until})
			}
		}
	}
	n.mu.Lock()
	n.counts[p.kind]++
	n.peak = max(n.peak, len(n.disturbed()))
	n.mu.Unlock()
	return nil
}

// heal heals the faults due at now (every one if all). A healed fault with
// an after period leaves the node disturbed for that long, unless all.
func (n *nemesis) heal(now time.Time, all bool) error {
	var errs []error
	var keep []activeSoakFault
	for _, f := range n.active {
		if !all && now.Before(f.until) {
			keep = append(keep, f)
			continue
		}
		if f.heal != nil {
			errs = append(errs, f.heal())
		}
		if f.after > 0 && !all {
			keep = append(keep, activeSoakFault{node: f.node, until: now.Add(f.after)})
		}
	}
	n.active = keep
	return errors.Join(errs...)
}

// faultCounts returns the faults started so far, by kind name, and the
// most nodes disturbed at once.
func (n *nemesis) faultCounts() (map[string]int, int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := map[string]int{}
	for k, c := range n.counts {
		if c > 0 {
			out[soakFault(k).String()] = c
		}
	}
	return out, n.peak
}
