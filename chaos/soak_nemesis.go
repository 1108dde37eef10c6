package chaos

import (
	"errors"
	"math/rand/v2"
	"sync"
	"time"
)

// soakFault is one kind of fault the soak's nemesis injects.
type soakFault int

const (
	faultKill      soakFault = iota // kill, restart later (with AOFAlways persistence)
	faultPause                      // SIGSTOP / docker pause, resume later
	faultCut                        // one client's link to the node refused
	faultBlackhole                  // one client's link to the node swallows traffic
	faultLatency                    // every client's link to the node slowed
	faultReset                      // one client's link to the node resets replies
	faultWipe                       // FLUSHALL: the node loses its keys and fence counter
	faultClock                      // the node's clock jumps forward, for good
	numSoakFaults
)

var soakFaultNames = []string{"kill", "pause", "cut", "blackhole", "latency", "reset", "wipe", "clock-jump"}

func (k soakFault) String() string { return soakFaultNames[k] }

// nemesisPolicy is what the nemesis may do: which faults, how often each
// (weights), and how many nodes it may disturb at once.
type nemesisPolicy struct {
	maxDisturbed int
	weights      [numSoakFaults]int
}

// soakPolicy returns the nemesis policy of a soak run of lock over nodes.
//
// Safe runs stay within what the lock is documented to tolerate
// (docs/design.md, assumptions): redlock at most a minority of its nodes
// disturbed at once (a restarted or wiped node counts until its restart
// quarantine ends), wipes only because the quarantine covers them (scenario
// 14c), no clock jumps; single any one fault at a time on its one node,
// restarts only with persistence, no wipes, no clock jumps. Unsafe runs add
// clock jumps and wipes for both, and let redlock disturb a majority.
func soakPolicy(lock string, nodes int, unsafe bool) nemesisPolicy {
	var p nemesisPolicy
	p.weights[faultKill] = 15
	p.weights[faultPause] = 20
	p.weights[faultCut] = 15
	p.weights[faultBlackhole] = 10
	p.weights[faultLatency] = 20
	p.weights[faultReset] = 10
	p.maxDisturbed = (nodes - 1) / 2
	if lock == LockSingle {
		p.maxDisturbed = 1
	} else {
		p.weights[faultWipe] = 10
	}
	if unsafe {
		p.weights[faultWipe] = 10
		p.weights[faultClock] = 10
		p.maxDisturbed = nodes/2 + 1
		if lock == LockSingle {
			p.maxDisturbed = 1
		}
	}
	return p
}

// allows reports whether the policy may inject kind.
func (p nemesisPolicy) allows(kind soakFault) bool { return p.weights[kind] > 0 }

// pickKind draws a fault kind by weight.
func (p nemesisPolicy) pickKind(rng *rand.Rand) soakFault {
	total := 0
	for _, w := range p.weights {
		total += w
	}
	x := rng.IntN(total)
	for k, w := range p.weights {
		if x < w {
			return soakFault(k)
		}
		x -= w
	}
	return faultPause // unreachable: x < total
}

// faultPlan is one fault the nemesis decided to inject.
type faultPlan struct {
	kind    soakFault
	node    int
	client  int           // for the one-client link faults
	latency time.Duration // for faultLatency
}

// injector carries faults out. start injects p and returns its heal (nil
// when the fault needs none, as for a wipe or a clock jump).
type injector interface {
	start(p faultPlan) (heal func() error, err error)
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
			var free []int
			for i := range n.nodes {
				if !busy[i] {
					free = append(free, i)
				}
			}
			p := faultPlan{kind: n.pol.pickKind(n.rng), node: free[n.rng.IntN(len(free))], client: n.rng.IntN(n.clients),
				latency: time.Duration(150+n.rng.IntN(250)) * time.Millisecond}
			heal, sErr := n.inj.start(p)
			if sErr != nil {
				return n.next, errors.Join(err, sErr)
			}
			f := activeSoakFault{node: p.node, until: now.Add(between(n.rng, n.duration)), heal: heal}
			switch p.kind {
			case faultKill:
				f.after = n.quaran + time.Second // back, but in its quarantine
			case faultWipe:
				f.until = now.Add(n.quaran + time.Second)
			case faultClock:
				f.until = now.Add(2 * ScenarioTTL) // its keys expired early
			}
			n.active = append(n.active, f)
			n.mu.Lock()
			n.counts[p.kind]++
			n.peak = max(n.peak, len(n.disturbed()))
			n.mu.Unlock()
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
