package chaos

import (
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/redfence/redfence/redlock"
)

// Lock names, for Scenario.Locks and Run.
const (
	LockRedlock = "redlock"
	LockSingle  = "single"
)

// The settings every scenario run uses.
const (
	// DefaultScenarioDuration is how long a scenario drives its workload
	// unless RunOptions.Duration says otherwise. Scripted scenarios split it
	// between a warm-up and a cool-down around their script, and some
	// stretch it to fit their fault schedule.
	DefaultScenarioDuration = 3 * time.Second
	// defaultCheckTimeout bounds each porcupine check of a run.
	defaultCheckTimeout = 10 * time.Second
	// scenarioClients is the number of clients in every run; each has its
	// own lock client and its own proxied links to the nodes.
	scenarioClients = 4
	// scenarioTTL is the lock TTL of every run, unless a scenario needs a
	// longer one (6a and 14b: 2s, see their Steps).
	scenarioTTL = time.Second
	// scenarioNodeTimeout is the per-node timeout of every run.
	scenarioNodeTimeout = 100 * time.Millisecond
	// scenarioOverrunSlack is how much later than its deadline an acquire may
	// return before it counts as overrunning: a failed attempt releases what
	// it took on a detached context bounded by the per-node timeout, plus a
	// margin for scheduling on a loaded machine.
	scenarioOverrunSlack = scenarioNodeTimeout + 250*time.Millisecond
	// scenarioQuarantine is the restart quarantine of redlock runs (the
	// library's default of 60s scaled to the 1s TTL), unless a scenario
	// turns it off. single runs use single's default: off.
	scenarioQuarantine = 2 * time.Second
	// keysMargin is how long after TTL the run waits before counting lock
	// keys left on the nodes.
	keysMargin = 300 * time.Millisecond
	// nodeOpTimeout bounds one node operation (kill, start, pause, resume,
	// clock), generously for Docker.
	nodeOpTimeout = 30 * time.Second
	// workloadBackoff is the workload's pause after a failed acquire: a
	// little longer than the Workload default, to keep histories small on
	// outages.
	workloadBackoff = 20 * time.Millisecond
)

// ErrInvalidScenario reports a Run of a scenario that cannot be run: one
// with variants (run each of Runs instead), one not built by Scenarios, or
// a lock the scenario does not apply to. Like every invalid-argument error
// of chaos, the errors that wrap it are the module's one shape: they wrap
// redlock.ErrInvalid too, through a *redlock.ConfigError with Pkg "chaos".
var ErrInvalidScenario = errors.New("chaos: invalid scenario")

// Scenario is one fault scenario of the suite (see Scenarios): what it
// does, what outcome it expects and why, and, unexported, how to play it
// and check its expectation. The zero value, and Scenarios made outside
// this package, cannot be run.
type Scenario struct {
	// Name is the scenario's number, "1" to "15"; a variant adds a letter
	// ("6a").
	Name string
	// Title is a short description.
	Title string
	// Steps says what the scenario does.
	Steps string
	// Expect is the expected outcome, checked by Run: Result.Pass reports
	// whether it was met.
	Expect string
	// Why says which guarantee or documented assumption the outcome shows.
	Why string
	// Locks lists the locks the scenario applies to: LockRedlock,
	// LockSingle.
	Locks []string
	// Variants are the runnable versions of a scenario that has several
	// (scenarios 6, 14 and 15); Run takes each of them, not the parent.
	// Each runs on its parent's Locks.
	Variants []Scenario

	spec       NodeSpec
	ttl        time.Duration // the lock TTL when not scenarioTTL
	noQuaran   bool          // redlock without the restart quarantine
	quarantine time.Duration // redlock's quarantine when not scenarioQuarantine
	replica    bool          // one extra node replicating from node 0 (scenarios 7 and 15)
	sentinel   bool          // with replica: three Sentinels, clients over failover clients (15)
	// singleOpts are extra options of every single client of the run: the
	// hook for variants such as a WithReplicaAcks one of scenario 15.
	singleOpts []redlock.Option
	// script makes each run's play and check (see newScript).
	script func() script
	// What the checks may not assume. Every scenario asserts 0 fenced
	// violations and unique tokens that increase in real-time order.
	unsafe       bool // a double grant is expected (and asserted)
	lossExpected bool // the control is expected to lose updates
}

// family completes sc's Variants from sc, so that a scenario with variants
// declares once what they share: each runs on sc's Locks and, unless it has
// a script of its own, plays and checks sc's.
func (sc Scenario) family() Scenario {
	for i := range sc.Variants {
		v := &sc.Variants[i]
		v.Locks = slices.Clone(sc.Locks)
		if v.script == nil {
			v.script = sc.script
		}
	}
	return sc
}

// Runs returns the scenarios to run for sc: its Variants, or sc itself.
func (sc Scenario) Runs() []Scenario {
	if len(sc.Variants) > 0 {
		return slices.Clone(sc.Variants)
	}
	return []Scenario{sc}
}

// Supports reports whether the scenario applies to lock.
func (sc Scenario) Supports(lock string) bool { return slices.Contains(sc.Locks, lock) }

// SupportsClient reports whether the scenario runs over client
// (RunOptions.Client): the Sentinel scenarios run over go-redis only.
func (sc Scenario) SupportsClient(client string) bool { return client != ClientRueidis || !sc.sentinel }

// FindScenarios returns the runnable scenarios named by name: a scenario's
// number ("6", all its variants) or a variant's full name ("6b"). It
// returns an error wrapping ErrInvalidScenario for an unknown name.
func FindScenarios(name string) ([]Scenario, error) {
	name = strings.TrimSpace(name)
	for _, sc := range Scenarios() {
		if sc.Name == name {
			return sc.Runs(), nil
		}
		for _, v := range sc.Variants {
			if v.Name == name {
				return []Scenario{v}, nil
			}
		}
	}
	return nil, invalidScenario("no scenario %q (want 1 to %d, or a variant such as 6a)", name, len(Scenarios()))
}
