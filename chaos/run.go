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
	"github.com/redis/rueidis"

	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/internal/nilcheck"
	"github.com/redfence/redfence/redlock"
	"github.com/redfence/redfence/single"
)

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
	// CheckTimeout bounds each linearizability check. The default is 10s.
	CheckTimeout time.Duration
	// Client is the Redis client the locks run over: ClientGoRedis (the
	// default, "") or ClientRueidis (module rfrueidis). The scenarios over
	// Sentinel (15) run over go-redis only.
	Client string
}

// The Redis clients a run's locks can use (RunOptions.Client).
const (
	ClientGoRedis = "go-redis"
	ClientRueidis = "rueidis"
)

func (o RunOptions) withDefaults() (RunOptions, error) {
	if o.Duration < 0 || o.CheckTimeout < 0 {
		return o, invalidScenario("negative duration or check timeout")
	}
	switch o.Client {
	case "", ClientGoRedis:
		o.Client = ClientGoRedis
	case ClientRueidis:
	default:
		return o, invalidScenario("unknown client %q (want %q or %q)", o.Client, ClientGoRedis, ClientRueidis)
	}
	if o.Duration == 0 {
		o.Duration = DefaultScenarioDuration
	}
	if o.CheckTimeout == 0 {
		o.CheckTimeout = defaultCheckTimeout
	}
	return o, nil
}

// Run plays one scenario against lock (LockRedlock or LockSingle) and
// checks its expectation (Scenario.Expect). Each run starts its own nodes
// on backend (5 for redlock, 1 for single, plus one for the fenced
// resource, which no fault touches), a Network with four client slots, and
// one fenced lock client per slot (a 1s TTL unless the scenario says
// otherwise, a 100ms node timeout); it stops them all before returning.
//
// A missed expectation is not an error: Result.Pass is false and
// Result.Note says what was expected, seen and failed; RunOptions.ArtifactsDir
// keeps the history and the checkers' output. The error is non-nil only
// when the run could not be carried out (a *RunError, or an error wrapping
// ErrInvalidScenario); Pass is then false.
func Run(ctx context.Context, backend Backend, sc Scenario, lock string, opts RunOptions) (res Result, err error) {
	res = Result{Scenario: sc.Name, Lock: lock}
	if nilcheck.IsNil(backend) {
		return res, invalidScenario("nil backend")
	}
	res.Backend = backend.Name()
	switch {
	case len(sc.Variants) > 0:
		return res, invalidScenario("scenario %s has variants: run each of Runs()", sc.Name)
	case sc.script == nil:
		return res, invalidScenario("scenario %q was not made by Scenarios", sc.Name)
	case !sc.Supports(lock):
		return res, invalidScenario("scenario %s does not apply to lock %q (it applies to %s)", sc.Name, lock, strings.Join(sc.Locks, ", "))
	}
	if opts, err = opts.withDefaults(); err != nil {
		return res, err
	}
	res.Client = opts.Client
	if opts.Client == ClientRueidis && sc.sentinel {
		return res, invalidScenario("scenario %s runs over Sentinel, whose clients the harness makes with go-redis only", sc.Name)
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
	s := sc.script()
	playErr := s.play(ctx, r)
	r.end = r.h.Now()
	finishErr := r.finish(ctx)
	res = r.result(ctx, s)
	res.Client = opts.Client
	if playErr != nil || finishErr != nil {
		res.Pass = false
		err = fail("play", errors.Join(playErr, finishErr))
		res.Note = strings.TrimSpace(res.Note + " HARNESS ERROR: " + errors.Join(playErr, finishErr).Error())
	}
	if !res.Pass && opts.ArtifactsDir != "" {
		dir := filepath.Join(opts.ArtifactsDir, fmt.Sprintf("%s-%s-%s", sc.Name, lock, backend.Name()))
		if opts.Client != ClientGoRedis {
			dir += "-" + opts.Client
		}
		if aErr := WriteArtifacts(dir, opts.Seed, r.h, opts.CheckTimeout, res); aErr != nil {
			err = errors.Join(err, fail("artifacts", aErr))
		}
	}
	return res, err
}

// heldLease is what scripted clients need of a lease: *redlock.Lease and
// *redlock.Lease have it all.
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
	conns    []*redis.Client  // every go-redis client to close
	rconns   []rueidis.Client // every rueidis client to close
	clients  []*lockClient    // [client slot]
	h        *History
	guard    fencing.Guard
	control  *memoryCounter
	rng      *rand.Rand
	key      string
	resource string
	ttl      time.Duration // the lock TTL
	quaran   time.Duration // redlock's restart quarantine; 0: off (and always for single)
	start    time.Duration // when the play began, on the history's clock
	end      time.Duration // when it ended

	// Scenario 15: the Sentinels, and the primary's and the replica's
	// Addr, in network order: where the Sentinels see them.
	sentinels []Node
	peers     []string

	mu        sync.Mutex
	down      map[Node]bool // guarded by mu: killed nodes
	paused    map[Node]bool // guarded by mu
	openFault []func()      // guarded by mu: fault windows to close at the end
	heal      time.Duration // guarded by mu: the last heal mid-run; 0 if none
	facts     []string      // guarded by mu

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
		control:  &memoryCounter{},
		rng:      rand.New(rand.NewPCG(uint64(opts.Seed), 0x5eed)),
		key:      "redfence:chaos:" + sc.Name,
		ttl:      cmp.Or(sc.ttl, scenarioTTL),
		resource: "chaos-" + sc.Name,
		down:     map[Node]bool{},
		paused:   map[Node]bool{},
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
	if r.nw, err = NewNetwork(netNodes, scenarioClients); err != nil {
		return r, err
	}
	q := time.Duration(0)
	if lock == LockRedlock && !sc.noQuaran {
		q = cmp.Or(sc.quarantine, scenarioQuarantine)
	}
	r.quaran = q
	for c := range scenarioClients {
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

// newRedisClient returns a go-redis client to addr with lockClientOptions.
func newRedisClient(addr string) *redis.Client {
	o := lockClientOptions()
	o.Addrs = []string{addr}
	return redis.NewClient(o.Simple())
}

// lockClientOptions are the settings of every lock client's connections,
// direct or through Sentinel (Simple, Failover): they honour context
// deadlines, never retry, and answer fast when a node is gone.
func lockClientOptions() *redis.UniversalOptions {
	return &redis.UniversalOptions{
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
	}
}

// newLockClient builds one client slot's lock over addrs.
func (r *run) newLockClient(addrs []string, quarantine time.Duration) (*lockClient, error) {
	if r.opts.Client == ClientRueidis {
		return r.newRueidisLockClient(addrs, quarantine)
	}
	rcs := make([]redis.UniversalClient, len(addrs))
	for i, a := range addrs {
		c := newRedisClient(a)
		r.conns = append(r.conns, c)
		rcs[i] = c
	}
	if r.lock == LockSingle {
		return r.singleLockClient(rcs[0], quarantine)
	}
	return r.mutexClient(redlock.New(rcs, r.redlockOptions(quarantine)...))
}

// redlockOptions are the options of every redlock client of the run.
func (r *run) redlockOptions(quarantine time.Duration) []redlock.Option {
	return []redlock.Option{redlock.WithTTL(r.ttl), redlock.WithNodeTimeout(scenarioNodeTimeout),
		redlock.WithFencing(), redlock.WithQuarantine(quarantine)}
}

// singleOptions are the options of every single client of the run.
func (r *run) singleOptions(quarantine time.Duration) []redlock.Option {
	opts := []redlock.Option{redlock.WithTTL(r.ttl), redlock.WithNodeTimeout(scenarioNodeTimeout), redlock.WithFencing()}
	if quarantine > 0 {
		opts = append(opts, redlock.WithQuarantine(quarantine))
	}
	return append(opts, r.sc.singleOpts...)
}

// singleLockClient builds one client slot's single lock over rc.
func (r *run) singleLockClient(rc redis.UniversalClient, quarantine time.Duration) (*lockClient, error) {
	return r.mutexClient(single.New(rc, r.singleOptions(quarantine)...))
}

// mutexClient is the lockClient of cl's mutex on the run's key; cl is a
// redlock or a single Client (one type), err the error of making it.
func (r *run) mutexClient(cl *redlock.Client, err error) (*lockClient, error) {
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
				return nil, err // not a typed nil lease
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
	for _, c := range r.rconns {
		c.Close()
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
		errs = append(errs, r.nw.HealAll()) // Network takes no context: it changes in-process proxies
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

// adminClient is a client for setup commands that may block for a while.
func adminClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, DisableIdentity: true, MaxRetries: -1,
		ContextTimeoutEnabled: true, DialTimeout: time.Second, ReadTimeout: 5 * time.Second, WriteTimeout: time.Second})
}
