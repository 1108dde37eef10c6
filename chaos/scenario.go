package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/redlock"
	"github.com/redfence/redfence/single"
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
	// DefaultCheckTimeout bounds each porcupine check of a run.
	DefaultCheckTimeout = 10 * time.Second
	// ScenarioClients is the number of clients in every run; each has its
	// own lock client and its own proxied links to the nodes.
	ScenarioClients = 4
	// ScenarioTTL is the lock TTL of every run, unless a scenario needs a
	// longer one (6a and 14b: 2s, see their Steps).
	ScenarioTTL = time.Second
	// ScenarioNodeTimeout is the per-node timeout of every run.
	ScenarioNodeTimeout = 100 * time.Millisecond
	// ScenarioOverrunSlack is how much later than its deadline an acquire may
	// return before it counts as overrunning: a failed attempt releases what
	// it took on a detached context bounded by the per-node timeout, plus a
	// margin for scheduling on a loaded machine.
	ScenarioOverrunSlack = ScenarioNodeTimeout + 250*time.Millisecond
	// ScenarioQuarantine is the restart quarantine of redlock runs (the
	// library's default of 60s scaled to the 1s TTL), unless a scenario
	// turns it off. single runs use single's default: off.
	ScenarioQuarantine = 2 * time.Second
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
// a lock the scenario does not apply to.
var ErrInvalidScenario = errors.New("chaos: invalid scenario")

// RunError reports a run that could not be carried out: the harness failed
// (a node did not start, a fault could not be injected), not the lock.
type RunError struct {
	// Scenario, Lock and Backend identify the run.
	Scenario, Lock, Backend string
	// Step is what failed: "setup", "play" or "teardown".
	Step string
	// Err is the cause.
	Err error
}

// Error implements error.
func (e *RunError) Error() string {
	return fmt.Sprintf("chaos: scenario %s (%s, %s): %s: %v", e.Scenario, e.Lock, e.Backend, e.Step, e.Err)
}

// Unwrap returns the cause.
func (e *RunError) Unwrap() error { return e.Err }

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
	Variants []Scenario

	spec       NodeSpec
	ttl        time.Duration // the lock TTL when not ScenarioTTL
	noQuaran   bool          // redlock without the restart quarantine
	quarantine time.Duration // redlock's quarantine when not ScenarioQuarantine
	replica    bool          // one extra node replicating from node 0 (scenarios 7 and 15)
	sentinel   bool          // with replica: three Sentinels, clients over failover clients (15)
	// singleOpts are extra options of every single client of the run: the
	// hook for variants such as a WithReplicaAcks one of scenario 15.
	singleOpts []single.Option
	play       func(ctx context.Context, r *run) error
	check      func(r *run, v *verdict)
	// What the checks may not assume. Every scenario asserts 0 fenced
	// violations and unique tokens that increase in real-time order.
	unsafe       bool // a double grant is expected (and asserted)
	lossExpected bool // the control is expected to lose updates
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
	return nil, fmt.Errorf("%w: no scenario %q (want 1 to %d, or a variant such as 6a)", ErrInvalidScenario, name, len(Scenarios()))
}

// RunOptions configures Run. The zero value is ready to use.
type RunOptions struct {
	// Seed seeds every random choice of the run: the workload's back-off
	// jitter and the random fault schedules (scenarios 12 and 13). The same
	// seed replays the same schedule.
	Seed int64
	// Duration is how long the workload runs. The default is
	// DefaultScenarioDuration.
	Duration time.Duration
	// ArtifactsDir, if set, is where a run that misses its expectation
	// saves history.json, the porcupine timelines and summary.txt (with the
	// seed): in a subdirectory named after the scenario, lock and backend.
	ArtifactsDir string
	// CheckTimeout bounds each linearizability check. The default is
	// DefaultCheckTimeout.
	CheckTimeout time.Duration
}

func (o RunOptions) withDefaults() (RunOptions, error) {
	if o.Duration < 0 || o.CheckTimeout < 0 {
		return o, fmt.Errorf("%w: negative duration or check timeout", ErrInvalidScenario)
	}
	if o.Duration == 0 {
		o.Duration = DefaultScenarioDuration
	}
	if o.CheckTimeout == 0 {
		o.CheckTimeout = DefaultCheckTimeout
	}
	return o, nil
}

// Run runs one scenario against lock (LockRedlock or LockSingle) on nodes
// the backend starts, and returns its Result: what was measured, and Pass,
// whether the scenario's expectation (Scenario.Expect) was met; Note says
// what was expected, what was seen and what failed. Each run starts its own
// nodes (5 for redlock, 1 for single, plus one for the fenced resource,
// which no fault touches), a Network with ScenarioClients client slots, and
// one lock client per slot over that slot's links, with fencing on, a TTL of
// ScenarioTTL (unless the scenario says otherwise) and a node timeout of
// ScenarioNodeTimeout; brand-new redlock nodes are vouched for. It stops
// everything it started before returning.
//
// A missed expectation is reported in the Result, not as an error; with
// RunOptions.ArtifactsDir set, the run's history and checker output are
// saved there. The error is non-nil when the run could not be carried out
// (a *RunError, or ErrInvalidScenario for a scenario that cannot be run);
// the Result then has Pass false.
func Run(ctx context.Context, backend Backend, sc Scenario, lock string, opts RunOptions) (res Result, err error) {
	res = Result{Scenario: sc.Name, Lock: lock}
	if isNil(backend) {
		return res, fmt.Errorf("%w: nil backend", ErrInvalidScenario)
	}
	res.Backend = backend.Name()
	switch {
	case len(sc.Variants) > 0:
		return res, fmt.Errorf("%w: scenario %s has variants: run each of Runs()", ErrInvalidScenario, sc.Name)
	case sc.play == nil || sc.check == nil:
		return res, fmt.Errorf("%w: scenario %q was not made by Scenarios", ErrInvalidScenario, sc.Name)
	case !sc.Supports(lock):
		return res, fmt.Errorf("%w: scenario %s does not apply to lock %q (it applies to %s)", ErrInvalidScenario, sc.Name, lock, strings.Join(sc.Locks, ", "))
	}
	if opts, err = opts.withDefaults(); err != nil {
		return res, err
	}
	fail := func(step string, e error) error {
		return &RunError{Scenario: sc.Name, Lock: lock, Backend: backend.Name(), Step: step, Err: e}
	}
	r, err := setup(ctx, backend, sc, lock, opts)
	if err != nil {
		return res, fail("setup", err)
	}
	defer func() {
		if cErr := r.close(); cErr != nil {
			err = errors.Join(err, fail("teardown", cErr))
		}
	}()
	playErr := sc.play(ctx, r)
	r.end = r.h.Now()
	finishErr := r.finish(ctx)
	res = r.result(ctx)
	if playErr != nil || finishErr != nil {
		res.Pass = false
		err = fail("play", errors.Join(playErr, finishErr))
		res.Note = strings.TrimSpace(res.Note + " HARNESS ERROR: " + errors.Join(playErr, finishErr).Error())
	}
	if !res.Pass && opts.ArtifactsDir != "" {
		dir := filepath.Join(opts.ArtifactsDir, fmt.Sprintf("%s-%s-%s", sc.Name, lock, backend.Name()))
		if aErr := WriteArtifacts(dir, opts.Seed, r.h, opts.CheckTimeout, res); aErr != nil {
			err = errors.Join(err, fail("artifacts", aErr))
		}
	}
	return res, err
}

// heldLease is what scripted clients need of a lease: *redlock.Lease and
// *single.Lease have it all.
type heldLease interface {
	Lease
	Done() <-chan struct{}
	KeepAlive(ctx context.Context) error
}

// lockClient is one client slot's lock: its own redlock or single client
// over its own proxied links.
type lockClient struct {
	try   func(ctx context.Context) (heldLease, error)
	vouch func(ctx context.Context) error
	close func() error
}

// run is the state of one scenario run. Its methods take the run's
// context from the caller.
type run struct {
	sc       Scenario
	lock     string
	opts     RunOptions
	backend  Backend
	nodes    []Node // the lock's nodes (scenario 7: the primary)
	replica  Node   // scenario 7's and 15's replica, or nil
	all      []Node // every node started, the guard's included
	nw       *Network
	conns    []*redis.Client // every go-redis client to close
	clients  []*lockClient   // [client slot]
	h        *History
	guard    fencing.Guard
	control  *MemoryCounter
	rng      *rand.Rand
	key      string
	resource string
	ttl      time.Duration // the lock TTL
	quaran   time.Duration // redlock's restart quarantine; 0: off (and always for single)
	start    time.Duration // when the play began, on the history's clock
	end      time.Duration // when it ended

	// Scenario 15: the Sentinels, and the primary's and the replica's
	// PeerAddr, in network order.
	sentinels []Node
	peers     []string

	mu        sync.Mutex
	down      map[Node]bool            // guarded by mu: killed nodes
	paused    map[Node]bool            // guarded by mu
	openFault []func()                 // guarded by mu: fault windows to close at the end
	heal      time.Duration            // guarded by mu: the last heal mid-run; 0 if none
	facts     []string                 // guarded by mu
	named     map[string]Op            // guarded by mu: scripted operations by role
	marks     map[string]time.Duration // guarded by mu: named moments, on the history's clock
	flags     map[string]bool          // guarded by mu: scripted findings for the checks

	keysLeft     int
	keysChecked  []string
	closeClients sync.Once
}

// setup starts the nodes, the network, the clients and the guard.
func setup(ctx context.Context, backend Backend, sc Scenario, lock string, opts RunOptions) (r *run, err error) {
	n := 5
	if lock == LockSingle {
		n = 1
	}
	extra := 1 // the guard's node
	if sc.replica {
		extra++
	}
	r = &run{
		sc:       sc,
		lock:     lock,
		opts:     opts,
		backend:  backend,
		h:        NewHistory(),
		control:  &MemoryCounter{},
		rng:      rand.New(rand.NewPCG(uint64(opts.Seed), 0x5eed)),
		key:      "redfence:chaos:" + sc.Name,
		ttl:      cmp.Or(sc.ttl, ScenarioTTL),
		resource: "chaos-" + sc.Name,
		down:     map[Node]bool{},
		paused:   map[Node]bool{},
		named:    map[string]Op{},
		marks:    map[string]time.Duration{},
		flags:    map[string]bool{},
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, r.close())
		}
	}()
	sctx, cancel := context.WithTimeout(ctx, 2*nodeOpTimeout)
	defer cancel()
	all, err := backend.StartNodes(sctx, n+extra, sc.spec)
	if err != nil {
		return r, err
	}
	r.all = all
	r.nodes = all[:n]
	if sc.replica {
		r.replica = all[n]
	}
	guardNode := all[len(all)-1]
	gc := newRedisClient(guardNode.Addr())
	r.conns = append(r.conns, gc)
	r.guard = fencing.NewRedisGuard(gc, fencing.WithRedisKeyPrefix("redfence:chaos:fence:"))

	netNodes := r.nodes
	if sc.sentinel {
		if err := r.startSentinels(ctx); err != nil {
			return r, err
		}
		netNodes = []Node{r.nodes[0], r.replica}
	}
	if r.nw, err = NewNetwork(netNodes, ScenarioClients); err != nil {
		return r, err
	}
	q := time.Duration(0)
	if lock == LockRedlock && !sc.noQuaran {
		q = cmp.Or(sc.quarantine, ScenarioQuarantine)
	}
	r.quaran = q
	for c := range ScenarioClients {
		var lc *lockClient
		if sc.sentinel {
			lc, err = r.newSentinelLockClient(c, q)
		} else {
			lc, err = r.newLockClient(r.nw.Addrs(c), q)
		}
		if err != nil {
			return r, err
		}
		r.clients = append(r.clients, lc)
	}
	if q > 0 {
		vctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := r.clients[0].vouch(vctx); err != nil {
			return r, fmt.Errorf("vouching for the new nodes: %w", err)
		}
	}
	r.start = r.h.Now()
	return r, nil
}

// newRedisClient returns a go-redis client that honours context deadlines,
// never retries, and answers fast when a node is gone.
func newRedisClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:                  addr,
		Protocol:              2,
		DisableIdentity:       true,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
		DialerRetries:         1,
		DialTimeout:           250 * time.Millisecond,
		ReadTimeout:           500 * time.Millisecond,
		WriteTimeout:          500 * time.Millisecond,
		PoolSize:              4,
		PoolTimeout:           250 * time.Millisecond,
	})
}

// newLockClient builds one client slot's lock over addrs.
func (r *run) newLockClient(addrs []string, quarantine time.Duration) (*lockClient, error) {
	rcs := make([]redis.UniversalClient, len(addrs))
	for i, a := range addrs {
		c := newRedisClient(a)
		r.conns = append(r.conns, c)
		rcs[i] = c
	}
	if r.lock == LockSingle {
		return r.singleLockClient(rcs[0], quarantine)
	}
	cl, err := redlock.New(rcs, redlock.WithTTL(r.ttl), redlock.WithNodeTimeout(ScenarioNodeTimeout),
		redlock.WithFencing(), redlock.WithQuarantine(quarantine))
	if err != nil {
		return nil, err
	}
	m, err := cl.NewMutex(r.key)
	if err != nil {
		return nil, err
	}
	return &lockClient{
		try: func(ctx context.Context) (heldLease, error) {
			l, err := m.TryLock(ctx)
			if err != nil {
				return nil, err
			}
			return l, nil
		},
		vouch: cl.Vouch,
		close: cl.Close,
	}, nil
}

// singleLockClient builds one client slot's single lock over rc.
func (r *run) singleLockClient(rc redis.UniversalClient, quarantine time.Duration) (*lockClient, error) {
	opts := []single.Option{single.WithTTL(r.ttl), single.WithNodeTimeout(ScenarioNodeTimeout), single.WithFencing()}
	if quarantine > 0 {
		opts = append(opts, single.WithQuarantine(quarantine))
	}
	cl, err := single.New(rc, append(opts, r.sc.singleOpts...)...)
	if err != nil {
		return nil, err
	}
	m, err := cl.NewMutex(r.key)
	if err != nil {
		return nil, err
	}
	return &lockClient{
		try: func(ctx context.Context) (heldLease, error) {
			l, err := m.TryLock(ctx)
			if err != nil {
				return nil, err
			}
			return l, nil
		},
		vouch: cl.Vouch,
		close: cl.Close,
	}, nil
}

// closeLockClients waits for every lock client's straggling requests.
func (r *run) closeLockClients() error {
	var errs []error
	r.closeClients.Do(func() {
		for _, c := range r.clients {
			errs = append(errs, c.close())
		}
	})
	return errors.Join(errs...)
}

// close stops everything setup started.
func (r *run) close() error {
	errs := []error{r.closeLockClients()}
	for _, c := range r.conns {
		errs = append(errs, c.Close())
	}
	if r.nw != nil {
		errs = append(errs, r.nw.Close())
	}
	// Docker takes a while per container: close the nodes in parallel.
	nodeErrs := make([]error, len(r.all))
	var wg sync.WaitGroup
	for i, n := range r.all {
		wg.Go(func() { nodeErrs[i] = n.Close() })
	}
	wg.Wait()
	return errors.Join(append(errs, nodeErrs...)...)
}

// finish ends the run: it waits for the lock clients' stragglers, heals
// every fault, waits out the TTL and counts lock keys left behind.
func (r *run) finish(ctx context.Context) error {
	errs := []error{r.closeLockClients()}
	if r.nw != nil {
		errs = append(errs, r.nw.HealAll()) //nolint:contextcheck // Network takes no context: it changes in-process proxies
	}
	r.mu.Lock()
	var paused []Node
	for n, p := range r.paused {
		if p {
			paused = append(paused, n)
		}
	}
	r.mu.Unlock()
	for _, n := range paused {
		errs = append(errs, r.resume(ctx, n))
	}
	r.mu.Lock()
	ends := r.openFault
	r.openFault = nil
	r.mu.Unlock()
	for _, end := range ends {
		end()
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// Requests queued on a thawed node run now: wait a whole TTL after it.
	t := time.NewTimer(r.ttl + keysMargin)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return r.countKeys(ctx)
}

// countKeys counts the lock key on every node that is running.
func (r *run) countKeys(ctx context.Context) error {
	nodes := slices.Clone(r.nodes)
	if r.replica != nil {
		nodes = append(nodes, r.replica)
	}
	var errs []error
	for _, n := range nodes {
		r.mu.Lock()
		down := r.down[n]
		r.mu.Unlock()
		if down {
			continue
		}
		c := newRedisClient(n.Addr())
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		k, err := c.Exists(cctx, r.key).Result()
		cancel()
		errs = append(errs, c.Close())
		if err != nil {
			errs = append(errs, fmt.Errorf("counting keys on %s: %w", n.Name(), err))
			continue
		}
		r.keysLeft += int(k)
		r.keysChecked = append(r.keysChecked, n.Name())
	}
	return errors.Join(errs...)
}

// fact records a finding for the result's note.
func (r *run) fact(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.facts = append(r.facts, fmt.Sprintf(format, args...))
}

// name records a scripted operation under a role ("A.acquire"), for the
// scenario's checks.
func (r *run) name(role string, op Op) Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.named[role] = op
	return op
}

// op returns the scripted operation recorded under role.
func (r *run) op(role string) (Op, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	op, ok := r.named[role]
	return op, ok
}

// fault records the start of a fault window and returns its end, which
// may be called any number of times; windows still open when the run
// finishes are closed then.
func (r *run) fault(format string, args ...any) (end func()) {
	stop := r.h.Fault(fmt.Sprintf(format, args...))
	var once sync.Once
	end = func() { once.Do(func() { stop() }) }
	r.mu.Lock()
	r.openFault = append(r.openFault, end)
	r.mu.Unlock()
	return end
}

// mark records now on the history's clock under name.
func (r *run) mark(name string) time.Duration {
	now := r.h.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.marks[name] = now
	return now
}

// markAt returns the moment recorded under name, and whether there is one.
func (r *run) markAt(name string) (time.Duration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.marks[name]
	return d, ok
}

// flag records a scripted finding under name.
func (r *run) flag(name string, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flags[name] = ok
}

// flagged returns the finding recorded under name (false if none).
func (r *run) flagged(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.flags[name]
}

// each runs f on every node in parallel and joins the errors.
func each(nodes []Node, f func(Node) error) error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { errs[i] = f(n) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// healed records now as the run's heal, for the recovery time.
func (r *run) healed() {
	now := r.h.Now()
	r.mu.Lock()
	r.heal = now
	r.mu.Unlock()
}

func nodeCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, nodeOpTimeout)
}

// kill kills n and remembers it is down.
func (r *run) kill(ctx context.Context, n Node) error {
	ctx, cancel := nodeCtx(ctx)
	defer cancel()
	if err := n.Kill(ctx); err != nil {
		return err
	}
	r.mu.Lock()
	r.down[n], r.paused[n] = true, false
	r.mu.Unlock()
	return nil
}

// restart starts a killed n again.
func (r *run) restart(ctx context.Context, n Node) error {
	ctx, cancel := nodeCtx(ctx)
	defer cancel()
	if err := n.Start(ctx); err != nil {
		return err
	}
	r.mu.Lock()
	r.down[n] = false
	r.mu.Unlock()
	return nil
}

// pause freezes n.
func (r *run) pause(ctx context.Context, n Node) error {
	ctx, cancel := nodeCtx(ctx)
	defer cancel()
	if err := n.Pause(ctx); err != nil {
		return err
	}
	r.mu.Lock()
	r.paused[n] = true
	r.mu.Unlock()
	return nil
}

// resume thaws n. It uses a context detached from ctx's cancellation, so
// that a cancelled run does not leave a node frozen.
func (r *run) resume(ctx context.Context, n Node) error {
	ctx, cancel := nodeCtx(context.WithoutCancel(ctx))
	defer cancel()
	if err := n.Resume(ctx); err != nil {
		return err
	}
	r.mu.Lock()
	r.paused[n] = false
	r.mu.Unlock()
	return nil
}

// newWorkload returns the workload of client slots 0..clients-1, over the
// run's guard, control counter and key.
func (r *run) newWorkload(clients int) *Workload {
	lockers := make([]Locker, clients)
	for i := range lockers {
		lockers[i] = ambiguityLocker(r.clients[i].try)
	}
	return &Workload{
		Lockers:  lockers,
		Guard:    r.guard,
		Resource: r.resource,
		Control:  r.control,
		Backoff:  workloadBackoff,
		Seed:     r.opts.Seed,
	}
}

// workload runs the workload of client slots 0..clients-1 for d while
// faults (if not nil) runs with a context that ends with the workload
// (wctx: for its timing; node operations should use ctx), and joins both.
func (r *run) workload(ctx context.Context, clients int, d time.Duration, faults func(wctx context.Context, start time.Time) error) error {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start := time.Now()
	var (
		wg   sync.WaitGroup
		fErr error
	)
	if faults != nil {
		wg.Go(func() { fErr = faults(wctx, start) })
	}
	_, wErr := r.newWorkload(clients).Run(wctx, r.h)
	wg.Wait()
	return errors.Join(wErr, fErr, ctx.Err())
}

// alongside runs the workload of client slots 0..clients-1 while script
// runs, for at least minDur and until tail after script returns, and joins
// both. script gets ctx.
func (r *run) alongside(ctx context.Context, clients int, minDur, tail time.Duration, script func(ctx context.Context) error) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	var (
		wg   sync.WaitGroup
		wErr error
	)
	wg.Go(func() { _, wErr = r.newWorkload(clients).Run(wctx, r.h) })
	sErr := script(ctx)
	until := time.Now().Add(tail)
	if m := start.Add(minDur); m.After(until) {
		until = m
	}
	sleepUntil(ctx, until)
	cancel()
	wg.Wait()
	return errors.Join(sErr, wErr, ctx.Err())
}

// sleepUntil waits until t or until ctx ends; it reports whether t came.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// waitFor polls the history until cond holds or timeout passes; it
// reports whether cond held.
func (r *run) waitFor(ctx context.Context, timeout time.Duration, cond func(ops []Op) bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond(r.h.Ops()) {
			return true
		}
		if !time.Now().Before(deadline) || !sleepUntil(ctx, time.Now().Add(20*time.Millisecond)) {
			return false
		}
	}
}

// classifyRelease marks a failed release as ambiguous unless the lease was
// definitely gone (lost or already released): a release whose replies were
// lost may still have deleted the keys.
func classifyRelease(err error) error {
	if err == nil || errors.Is(err, redlock.ErrLost) || errors.Is(err, redlock.ErrReleased) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrAmbiguous, err)
}

// releaseClassifier wraps a lease so that Release reports ambiguous
// failures as such; Done is passed through for the workload.
type releaseClassifier struct{ heldLease }

func (l releaseClassifier) Release(ctx context.Context) error {
	return classifyRelease(l.heldLease.Release(ctx))
}

// ambiguityLocker is a Locker over try whose leases classify their release
// errors (see classifyRelease).
func ambiguityLocker(try func(ctx context.Context) (heldLease, error)) Locker {
	return LockerFunc(func(ctx context.Context) (Lease, error) {
		l, err := try(ctx)
		if err != nil {
			return nil, err
		}
		return releaseClassifier{l}, nil
	})
}

// scriptedAcquire is a granted acquire by a scripted client, whose
// operation may be completed later (see acquire).
type scriptedAcquire struct {
	lease heldLease
	p     *Pending
	ret   time.Time // when TryLock returned
	op    Op        // the completed operation, once completed
}

// complete records the acquire's operation: returned when TryLock did,
// valid until validUntil (the lease's validity at the end of its life for
// a kept-alive lease).
func (a *scriptedAcquire) complete(h *History, validUntil time.Time) Op {
	ret := h.At(a.ret)
	a.op = a.p.Complete(OK, WithToken(a.lease.Token()), fieldFunc(func(op *Op, _ time.Time) {
		op.Return = max(ret, op.Call)
		op.ValidUntil = h.At(validUntil)
	}))
	return a.op
}

// acquire makes TryLock attempts as client c, each recorded as an Acquire,
// every 50ms until one succeeds or until the deadline; it returns the
// granted one, or nil. The granted operation is completed at once unless
// deferComplete is set (for a lease kept alive: complete it when it ends).
func (r *run) acquire(ctx context.Context, c int, deadline time.Time, deferComplete bool) *scriptedAcquire {
	for {
		if a, _, err := r.attempt(ctx, c, deferComplete); err == nil {
			return a
		}
		if !time.Now().Before(deadline) || !sleepUntil(ctx, time.Now().Add(50*time.Millisecond)) {
			return nil
		}
	}
}

// attempt makes one TryLock attempt as client c, recorded as an Acquire
// (see acquire): the granted acquire, or the failed operation and why.
func (r *run) attempt(ctx context.Context, c int, deferComplete bool) (*scriptedAcquire, Op, error) {
	actx, cancel := context.WithTimeout(ctx, DefaultAcquireTimeout)
	p := r.h.Invoke(c, Acquire)
	l, err := r.clients[c].try(actx)
	ret := time.Now()
	cancel()
	if err != nil {
		return nil, p.Complete(outcome(err), WithErr(err)), err
	}
	a := &scriptedAcquire{lease: l, p: p, ret: ret}
	if !deferComplete {
		a.complete(r.h, l.ValidUntil())
	}
	return a, a.op, nil
}

// scriptWarmup is how long the workload runs before a scripted client
// that contends with it takes the lock.
const scriptWarmup = 300 * time.Millisecond

// warmThenAcquire runs the workload of client slots 0..a-1 for
// scriptWarmup, then, with the lock free of them, acquires as client a
// (see acquire): a scripted client retrying against a running workload can
// be starved, since a workload client tries again the moment it releases.
// It returns nil, and records the fact, if client a never acquired.
func (r *run) warmThenAcquire(ctx context.Context, a int, deferComplete bool) (*scriptedAcquire, error) {
	if err := r.workload(ctx, a, scriptWarmup, nil); err != nil {
		return nil, err
	}
	acq := r.acquire(ctx, a, time.Now().Add(2*r.ttl), deferComplete)
	if acq == nil {
		r.fact("the scripted client never acquired")
	}
	return acq, nil
}

// fencedWrite writes value to the fenced resource as client c with the
// token of the lease acquired by acq, recording it as a FencedWrite.
func (r *run) fencedWrite(ctx context.Context, c int, acq Op, value string) Op {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultOpTimeout)
	defer cancel()
	p := r.h.Invoke(c, FencedWrite)
	err := r.guard.Check(wctx, r.resource, acq.Token)
	fields := []Field{WithToken(acq.Token), WithLease(acq.ID), WithValue(value), WithErr(err)}
	switch {
	case err == nil:
		return p.Complete(OK, fields...)
	case errors.Is(err, fencing.ErrStaleToken):
		return p.Complete(Fail, append(fields, WithNote(NoteStale))...)
	case errors.Is(err, fencing.ErrInvalidToken), errors.Is(err, fencing.ErrInvalidArgument):
		return p.Complete(Fail, fields...)
	}
	return p.Complete(Unknown, fields...)
}

// release releases a scripted lease as client c, recording it.
func (r *run) release(ctx context.Context, c int, a *scriptedAcquire) Op {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultOpTimeout)
	defer cancel()
	p := r.h.Invoke(c, Release)
	err := classifyRelease(a.lease.Release(rctx))
	return p.Complete(outcome(err), WithLease(a.op.ID), WithToken(a.op.Token), WithErr(err))
}

// verdict collects a run's failed expectations and findings.
type verdict struct {
	res   *Result
	ops   []Op
	fails []string
	facts []string
}

// want records a failed expectation unless ok.
func (v *verdict) want(ok bool, format string, args ...any) {
	if !ok {
		v.fails = append(v.fails, fmt.Sprintf(format, args...))
	}
}

// fact records a finding.
func (v *verdict) fact(format string, args ...any) {
	v.facts = append(v.facts, fmt.Sprintf(format, args...))
}

// result computes the run's Result and checks its expectation.
func (r *run) result(ctx context.Context) Result {
	ops := r.h.Ops()
	st := ComputeStats(ops, r.start, r.end, DefaultAcquireTimeout, ScenarioOverrunSlack)
	// A MemoryCounter fails only on a finished context.
	final, _ := r.control.Get(context.WithoutCancel(ctx))
	st.ControlValue = final
	st.LostUpdates = max(0, st.ControlIncrements-int(final))
	res := NewResult(ops, st, r.opts.CheckTimeout)
	res.Scenario, res.Lock, res.Backend = r.sc.Name, r.lock, r.backend.Name()
	res.KeysLeft = r.keysLeft
	r.mu.Lock()
	heal := r.heal
	facts := slices.Clone(r.facts)
	r.mu.Unlock()
	if heal > 0 {
		if d, ok := st.RecoveryAfter(heal); ok {
			res.Recovery = max(d, time.Microsecond)
		} else {
			res.Unrecovered = true
		}
	}
	v := &verdict{res: &res, ops: ops, facts: facts}
	r.commonChecks(v, st)
	r.sc.check(r, v)
	res.Pass = len(v.fails) == 0
	var note strings.Builder
	note.WriteString("expected: " + r.sc.Expect)
	if len(v.facts) > 0 {
		note.WriteString(" Seen: " + strings.Join(v.facts, "; ") + ".")
	}
	if len(v.fails) > 0 {
		note.WriteString(" FAILED: " + strings.Join(v.fails, "; ") + ".")
	}
	res.Note = note.String()
	return res
}

// commonChecks are the expectations of every scenario, less what the
// scenario's flags exempt.
func (r *run) commonChecks(v *verdict, st *Stats) {
	res := v.res
	v.want(res.Grants > 0, "no acquire was granted")
	if !r.sc.unsafe {
		v.want(res.DoubleGrants == 0, "%d double grants, want 0", res.DoubleGrants)
		v.want(res.Linearizable != string(Violation), "linearizability checker: %s", res.Linearizable)
	} else if res.Linearizable == string(Violation) {
		v.fact("mutex model violated, as expected")
	}
	v.want(res.FencedViolations == 0, "%d fenced-resource violations, want 0", res.FencedViolations)
	if !r.sc.lossExpected {
		v.want(res.LostUpdates == 0, "%d lost updates in the control, want 0", res.LostUpdates)
	}
	dups, regressions, example := tokenProblems(v.ops)
	v.want(dups+regressions == 0, "tokens: %d repeated, %d not above an earlier one (%s)", dups, regressions, example)
	nonPositive := 0
	for _, op := range v.ops {
		if op.Kind == Acquire && op.Status == OK && !op.Held() {
			nonPositive++
		}
	}
	v.want(nonPositive == 0, "%d leases granted with no validity left", nonPositive)
	v.want(res.KeysLeft == 0, "%d lock keys left after their TTL (nodes checked: %s)", res.KeysLeft, strings.Join(r.keysChecked, ","))
	// Every acquire attempt is bounded by its context and the per-node
	// timeout, whatever the fault.
	v.want(st.Overran == 0, "%d acquires overran their deadline", st.Overran)
}

// tokenProblems checks the tokens of granted acquires against the fencing
// guarantee: no two share a token (dups), and one that began after another
// returned has a larger token (regressions). example describes the first
// problem found.
func tokenProblems(ops []Op) (dups, regressions int, example string) {
	var granted []Op
	seen := map[uint64]int{}
	for _, op := range ops {
		if op.Kind == Acquire && op.Status == OK && op.Token > 0 {
			granted = append(granted, op)
			if prev, ok := seen[uint64(op.Token)]; ok {
				dups++
				if example == "" {
					example = fmt.Sprintf("acquires %d and %d both got token %d", prev, op.ID, op.Token)
				}
			} else {
				seen[uint64(op.Token)] = op.ID
			}
		}
	}
	byReturn := slices.Clone(granted)
	slices.SortStableFunc(byReturn, func(a, b Op) int { return cmp.Compare(a.Return, b.Return) })
	SortByCall(granted)
	best, j := -1, 0
	for _, y := range granted {
		for j < len(byReturn) && byReturn[j].Return < y.Call {
			if best < 0 || byReturn[j].Token > byReturn[best].Token {
				best = j
			}
			j++
		}
		if best >= 0 && y.Token <= byReturn[best].Token {
			regressions++
			if example == "" {
				example = fmt.Sprintf("acquire %d got token %d after acquire %d had returned token %d", y.ID, y.Token, byReturn[best].ID, byReturn[best].Token)
			}
		}
	}
	return dups, regressions, example
}

// grantsBetween counts granted acquires called at or after from that
// returned no later than to.
func grantsBetween(ops []Op, from, to time.Duration) int {
	n := 0
	for _, op := range ops {
		if op.Kind == Acquire && op.Status == OK && op.Call >= from && op.Return <= to {
			n++
		}
	}
	return n
}

// availabilityBetween is the fraction of whole windows of length w in
// [from, to) with at least one grant returned in it.
func availabilityBetween(ops []Op, from, to, w time.Duration) float64 {
	n := int((to - from) / w)
	if n < 1 {
		return 0
	}
	seen := make([]bool, n)
	count := 0
	for _, op := range ops {
		if op.Kind != Acquire || op.Status != OK || op.Return < from {
			continue
		}
		k := int((op.Return - from) / w)
		if k < n && !seen[k] {
			seen[k] = true
			count++
		}
	}
	return float64(count) / float64(n)
}
