// Package lockbench measures redfence's locks against the peer libraries
// (go-redsync/redsync, bsm/redislock) on redis-server processes it starts
// itself. Each scenario runs every library in turn, round after round, so
// that machine noise falls on all of them alike; figures are medians over
// rounds.
package lockbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/go-redsync/redsync/v4"

	"github.com/redfence/redfence/bench/internal/rig"
	"github.com/redfence/redfence/redlock"
	"github.com/redfence/redfence/single"
)

// Config sets what to run and for how long.
type Config struct {
	Duration         time.Duration // per measurement
	Warmup           time.Duration // once per library and scenario part, unmeasured
	Rounds           int
	Workers          []int // worker counts for the uncontended scenarios
	ContendedWorkers int
	Hold             time.Duration // how long a contended holder keeps the lock
	WaitBound        time.Duration // ctx bound of one contended acquisition
	AllocCycles      int
	PoolSize         int // go-redis PoolSize, every client
	// NodeAge is how long the 5 nodes must have been up before the first
	// 5-node scenario: longer than the default restart quarantine (60s), so
	// that redlock's defaults take the fast path production nodes take (a node
	// up for less than the quarantine makes every acquire read INFO). 0: no
	// wait (a smoke run).
	NodeAge  time.Duration
	Only     []string // scenario IDs to run; empty: all
	Command  string   // shown in the report
	Progress io.Writer
}

// DefaultConfig is the full run (`make bench`).
func DefaultConfig() Config {
	return Config{
		Duration:         2 * time.Second,
		Warmup:           500 * time.Millisecond,
		Rounds:           3,
		Workers:          []int{1, 64},
		ContendedWorkers: 16,
		Hold:             time.Millisecond,
		WaitBound:        time.Second,
		AllocCycles:      2000,
		PoolSize:         64,
		NodeAge:          62 * time.Second,
	}
}

// QuickConfig is a smoke run: every scenario and row, tiny durations.
func QuickConfig() Config {
	c := DefaultConfig()
	c.Duration = 200 * time.Millisecond
	c.Warmup = 50 * time.Millisecond
	c.Rounds = 1
	c.AllocCycles = 200
	c.NodeAge = 0
	return c
}

// ScenarioIDs lists the scenarios in order.
var ScenarioIDs = []string{"s1", "s2", "s3", "s4", "s5", "s6", "s7"}

const (
	redlockNodes = 5
	singleNodes  = 1
)

func (c Config) validate() error {
	switch {
	case c.Duration <= 0:
		return errors.New("duration must be positive")
	case c.Warmup < 0:
		return errors.New("warmup must not be negative")
	case c.Rounds < 1:
		return errors.New("rounds must be at least 1")
	case len(c.Workers) == 0:
		return errors.New("no worker counts")
	case c.ContendedWorkers < 2:
		return errors.New("contended workers must be at least 2")
	case c.Hold < 0 || c.WaitBound <= 0:
		return errors.New("hold must not be negative and the wait bound must be positive")
	case c.AllocCycles < 1:
		return errors.New("alloc cycles must be at least 1")
	case c.PoolSize < 1:
		return errors.New("pool size must be at least 1")
	case c.NodeAge < 0:
		return errors.New("node age must not be negative")
	}
	for _, w := range c.Workers {
		if w < 1 {
			return fmt.Errorf("invalid worker count %d", w)
		}
	}
	for _, id := range c.Only {
		if !slices.Contains(ScenarioIDs, id) {
			return fmt.Errorf("unknown scenario %q (have %s)", id, strings.Join(ScenarioIDs, ", "))
		}
	}
	return nil
}

func (c Config) runs(id string) bool { return len(c.Only) == 0 || slices.Contains(c.Only, id) }

// Run starts the nodes, runs the scenarios and stops the nodes, also when ctx
// is cancelled (it then returns ctx's error).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	rep := &Report{Config: cfg, Started: time.Now()}
	rep.Env = environment(cfg)

	five, err := rig.StartN(ctx, redlockNodes)
	if err != nil {
		return nil, err
	}
	defer rig.CloseAll(five)
	one, err := rig.StartN(ctx, singleNodes)
	if err != nil {
		return nil, err
	}
	defer rig.CloseAll(one)
	b := &runner{cfg: cfg, five: addrs(five), one: addrs(one), fiveUp: time.Now()}
	if cfg.runs("s7") {
		pair, err := rig.StartN(ctx, 2)
		if err != nil {
			return nil, err
		}
		defer rig.CloseAll(pair)
		if err := pair[1].ReplicaOf(ctx, pair[0]); err != nil {
			return nil, err
		}
		b.replicated = []string{pair[0].Addr()}
	}

	// One-node scenarios first, so that the 5 nodes age meanwhile; the
	// report keeps the scenario order.
	steps := []struct {
		id   string
		run  func(context.Context) (*Section, error)
		five bool // uses the 5 nodes
	}{
		{"s2", b.s2, false}, {"s6", b.s6, false}, {"s7", b.s7, false}, {"s1", b.s1, true}, {"s3", b.s3, true}, {"s4", b.s4, true}, {"s5", b.s5, true},
	}
	for _, s := range steps {
		if !cfg.runs(s.id) {
			continue
		}
		if s.five {
			if err := b.ageNodes(ctx); err != nil {
				return nil, err
			}
		}
		sec, err := s.run(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.id, err)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		sec.ID = s.id
		rep.Sections = append(rep.Sections, sec)
	}
	slices.SortFunc(rep.Sections, func(a, b *Section) int { return strings.Compare(a.ID, b.ID) })
	if cfg.NodeAge > 0 {
		rep.Env = append(rep.Env, kv{"node age", fmt.Sprintf("the 5 nodes were up for at least %v before the first 5-node scenario (waited %v for it): longer than the default 60s restart quarantine, so redlock's defaults take the fast path (no INFO)", cfg.NodeAge, b.aged.Round(time.Second))})
	} else {
		rep.Env = append(rep.Env, kv{"node age", "no wait (smoke run): nodes younger than the 60s quarantine make redlock's default acquire read INFO"})
	}
	rep.Finished = time.Now()
	rep.Env = append(rep.Env, kv{"load average at end", loadAvg()})
	return rep, nil
}

func addrs(nodes []*rig.Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.Addr()
	}
	return out
}

type runner struct {
	cfg        Config
	five, one  []string
	replicated []string      // a primary with one replica (s7)
	fiveUp     time.Time     // when the 5 nodes were started
	aged       time.Duration // how long ageNodes waited
	hs         hists
}

// ageNodes waits until the 5 nodes have been up for cfg.NodeAge.
func (b *runner) ageNodes(ctx context.Context) error {
	d := time.Until(b.fiveUp.Add(b.cfg.NodeAge))
	if d <= 0 {
		return nil
	}
	b.progress("waiting %v until the 5 nodes are older than %v (the restart quarantine's fast path)", d.Round(time.Second), b.cfg.NodeAge)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		b.aged += d
		return nil
	}
}

func (b *runner) progress(format string, args ...any) {
	fmt.Fprintf(b.cfg.Progress, "lockbench: "+format+"\n", args...)
}

// built is a library built over a node set for one scenario.
type built struct {
	lib
	impl impl
}

func buildAll(ctx context.Context, libs []lib, addrs []string, pool int) ([]built, func(), error) {
	var out []built
	closeAll := func() {
		for _, b := range out {
			_ = b.impl.close()
		}
	}
	for _, l := range libs {
		im, err := l.build(ctx, addrs, pool)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("%s: %w", l.name, err)
		}
		out = append(out, built{l, im})
	}
	return out, closeAll, nil
}

func lockersFor(im impl, keys []string) ([]locker, error) {
	ls := make([]locker, len(keys))
	for i, k := range keys {
		l, err := im.newLocker(k)
		if err != nil {
			return nil, err
		}
		ls[i] = l
	}
	return ls, nil
}

// order returns the order of libraries in round r: rotated by r, so that each
// one goes first in turn.
func order(n, r int) []int {
	o := make([]int, n)
	for i := range o {
		o[i] = (i + r) % n
	}
	return o
}

// throughputPart runs the uncontended loop for every library with w workers,
// alternating libraries within each round. It returns per-library rows.
func (b *runner) throughputPart(ctx context.Context, sid string, libs []built, nodes, w int) ([]Row, error) {
	lockers := make([][]locker, len(libs))
	for i, l := range libs {
		keys := make([]string, w)
		for k := range keys {
			keys[k] = fmt.Sprintf("lb:%s:%d:w%d:%d", sid, i, w, k)
		}
		ls, err := lockersFor(l.impl, keys)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", l.name, err)
		}
		lockers[i] = ls
	}
	if b.cfg.Warmup > 0 {
		for i := range libs {
			r := runCycles(ctx, lockers[i], b.cfg.Warmup, &b.hs)
			if r.cycles == 0 {
				return nil, fmt.Errorf("%s: warm-up completed no cycle: %v", libs[i].name, r.err)
			}
		}
	}
	res := make([][]cycleResult, len(libs))
	for r := 0; r < b.cfg.Rounds; r++ {
		for _, i := range order(len(libs), r) {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			cr := runCycles(ctx, lockers[i], b.cfg.Duration, &b.hs)
			b.progress("%s %d nodes %2d workers round %d/%d %-52s %9.0f cycles/s p50 %-9s p99 %-9s errors %d%s",
				sid, nodes, w, r+1, b.cfg.Rounds, libs[i].name, cr.rate(), fmtDur(cr.p50), fmtDur(cr.p99), cr.errors, errNote(cr.err))
			res[i] = append(res[i], cr)
		}
	}
	rows := make([]Row, len(libs))
	for i, l := range libs {
		rs := res[i]
		rates := collect(rs, cycleResult.rate)
		errs := 0
		var first error
		for _, c := range rs {
			errs += c.errors
			if first == nil {
				first = c.err
			}
		}
		rows[i] = Row{
			Name: l.name, Peer: l.peer, Workers: w, Nodes: nodes,
			M: map[string]float64{
				mRate:   median(rates),
				mP50:    median(collect(rs, func(c cycleResult) float64 { return float64(c.p50) })),
				mP99:    median(collect(rs, func(c cycleResult) float64 { return float64(c.p99) })),
				mErrors: float64(errs),
				mSpread: spread(rates),
			},
			FirstErr: errString(first),
		}
	}
	return rows, nil
}

func errNote(err error) string {
	if err == nil {
		return ""
	}
	return " (first: " + errString(err) + ")"
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	s := err.Error()
	if len(s) > 160 {
		s = s[:160] + "..."
	}
	return s
}

func collect[T any](xs []T, f func(T) float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// spread is (max-min)/median: how much the rounds disagreed.
func spread(xs []float64) float64 {
	m := median(xs)
	if len(xs) < 2 || m == 0 {
		return 0
	}
	return (slices.Max(xs) - slices.Min(xs)) / m
}

// uncontended runs a throughput scenario for every worker count.
func (b *runner) uncontended(ctx context.Context, sid string, libs []lib, nodes []string, pairs []pair) (*Section, error) {
	bl, closeAll, err := buildAll(ctx, libs, nodes, b.cfg.PoolSize)
	if err != nil {
		return nil, err
	}
	defer closeAll()
	sec := &Section{Kind: kindThroughput, Pairs: pairs}
	for _, w := range b.cfg.Workers {
		rows, err := b.throughputPart(ctx, sid, bl, len(nodes), w)
		if err != nil {
			return nil, err
		}
		sec.Rows = append(sec.Rows, rows...)
	}
	return sec, nil
}

// Row labels, shared by scenarios, ratios and the smoke test.
const (
	NameRFRedlockQ0      = "redfence redlock, quarantine off"
	NameRFRedlockDefault = "redfence redlock, defaults (quarantine 60s)"
	NameRedsync5         = "redsync, 5 pools, defaults"
	NameRFSingle         = "redfence single, defaults"
	NameRFRedlockTel     = "redfence redlock, quarantine off, telemetry on (OTel SDK)"
	NameBSM              = "bsm/redislock, defaults"
	NameRedsync1         = "redsync, 1 pool, defaults"
	NameRFDefaultRetry   = "redfence redlock, defaults (retry 20ms x1.6 to 500ms)"
	NameRFTunedRetry     = "redfence redlock, retry 1-5ms"
	NameRSDefaultRetry   = "redsync, defaults (32 tries, 50-250ms)"
	NameRSTunedRetry     = "redsync, retry 1-5ms, 1M tries"
	NameRFWakeOff        = "redfence redlock, defaults, wake-up off"
	NameRFPerWorker      = "redfence redlock, defaults, one Client per worker"
	NameRFPerWorkerOff   = "redfence redlock, wake-up off, one Client per worker"
	NameRSPerWorker      = "redsync, defaults, one instance per worker"
	NameUnfenced         = "redfence redlock, unfenced (defaults)"
	NameFenced           = "redfence redlock, fenced (defaults + WithFencing)"
	NameRFSingleNoAcks   = "redfence single, defaults, on a primary with a replica"
	NameRFSingleAcks     = "redfence single, WithReplicaAcks(1, 100ms)"
)

// shortNames label the ratio rows.
var shortNames = map[string]string{
	NameRFRedlockQ0:      "redfence q=off",
	NameRFRedlockDefault: "redfence defaults",
	NameRedsync5:         "redsync",
	NameRFSingle:         "redfence single",
	NameRFRedlockTel:     "redfence q=off+telemetry",
	NameBSM:              "bsm/redislock",
	NameRedsync1:         "redsync 1 pool",
	NameRFDefaultRetry:   "redfence default retry",
	NameRFTunedRetry:     "redfence 1-5ms",
	NameRSDefaultRetry:   "redsync default retry",
	NameRSTunedRetry:     "redsync 1-5ms",
	NameRFWakeOff:        "redfence wake-up off",
	NameRFPerWorker:      "redfence per-worker clients",
	NameRFPerWorkerOff:   "redfence per-worker, wake-up off",
	NameRSPerWorker:      "redsync per-worker clients",
	NameUnfenced:         "unfenced",
	NameFenced:           "fenced",
	NameRFSingleNoAcks:   "without acks",
	NameRFSingleAcks:     "with acks",
}

func short(name string) string {
	if s, ok := shortNames[name]; ok {
		return s
	}
	return name
}

func (b *runner) s1(ctx context.Context) (*Section, error) {
	libs := []lib{
		redfenceRedlock(NameRFRedlockQ0, false, redlock.WithQuarantine(0)),
		redfenceRedlock(NameRFRedlockDefault, true),
		redfenceRedlock(NameRFRedlockTel, false, append([]redlock.Option{redlock.WithQuarantine(0)}, telemetryOptions()...)...),
		redsyncLib(NameRedsync5),
	}
	pairs := []pair{{NameRFRedlockQ0, NameRedsync5}, {NameRFRedlockDefault, NameRedsync5}, {NameRFRedlockTel, NameRFRedlockQ0}}
	sec, err := b.uncontended(ctx, "s1", libs, b.five, pairs)
	if err != nil {
		return nil, err
	}
	sec.Title = "1. Uncontended lock+release, 5 nodes (Redlock)"
	return sec, nil
}

func (b *runner) s2(ctx context.Context) (*Section, error) {
	libs := []lib{
		redfenceSingle(NameRFSingle),
		bsmLib(NameBSM),
		redsyncLib(NameRedsync1),
	}
	pairs := []pair{{NameRFSingle, NameBSM}, {NameRFSingle, NameRedsync1}}
	sec, err := b.uncontended(ctx, "s2", libs, b.one, pairs)
	if err != nil {
		return nil, err
	}
	sec.Title = "2. Uncontended lock+release, 1 node"
	return sec, nil
}

func (b *runner) s4(ctx context.Context) (*Section, error) {
	libs := []lib{
		redfenceRedlock(NameUnfenced, true),
		redfenceRedlock(NameFenced, true, redlock.WithFencing()),
	}
	sec, err := b.uncontended(ctx, "s4", libs, b.five, []pair{{NameFenced, NameUnfenced}})
	if err != nil {
		return nil, err
	}
	sec.Title = "4. Fenced vs unfenced redfence redlock, 5 nodes"
	return sec, nil
}

func (b *runner) s7(ctx context.Context) (*Section, error) {
	libs := []lib{
		redfenceSingle(NameRFSingleNoAcks),
		redfenceSingle(NameRFSingleAcks, single.WithReplicaAcks(1, 100*time.Millisecond)),
	}
	sec, err := b.uncontended(ctx, "s7", libs, b.replicated, []pair{{NameRFSingleAcks, NameRFSingleNoAcks}})
	if err != nil {
		return nil, err
	}
	sec.Title = "7. redfence single with and without replica acknowledgement, 1 primary + 1 replica"
	return sec, nil
}

func (b *runner) s3(ctx context.Context) (*Section, error) {
	const lo, hi = time.Millisecond, 5 * time.Millisecond
	w := b.cfg.ContendedWorkers
	libs := []lib{
		redfenceRedlock(NameRFDefaultRetry, true),
		redfenceRedlock(NameRFTunedRetry, true, redlock.WithRetry(redfenceJitter(lo, hi))),
		redsyncLib(NameRSDefaultRetry),
		redsyncLib(NameRSTunedRetry, redsyncJitter(lo, hi), redsync.WithTries(1_000_000)),
		redfenceRedlock(NameRFWakeOff, true, redlock.WithWakeup(false)),
		redfenceRedlock(NameRFRedlockQ0, false, redlock.WithQuarantine(0)),
		perWorker(NameRFPerWorker, redfenceRedlock("", true), w, perWorkerPool),
		perWorker(NameRFPerWorkerOff, redfenceRedlock("", true, redlock.WithWakeup(false)), w, perWorkerPool),
		perWorker(NameRSPerWorker, redsyncLib(""), w, perWorkerPool),
	}
	bl, closeAll, err := buildAll(ctx, libs, b.five, b.cfg.PoolSize)
	if err != nil {
		return nil, err
	}
	defer closeAll()
	lockersAt := func(i int, key string) ([]locker, error) {
		keys := make([]string, w)
		for k := range keys {
			keys[k] = key
		}
		return lockersFor(bl[i].impl, keys)
	}
	if b.cfg.Warmup > 0 {
		for i := range bl {
			ls, err := lockersAt(i, fmt.Sprintf("lb:s3:%d:warmup", i))
			if err != nil {
				return nil, err
			}
			runContended(ctx, ls, b.cfg.Warmup, b.cfg.Hold, b.cfg.WaitBound, &b.hs)
		}
	}
	res := make([][]contendedResult, len(bl))
	for r := 0; r < b.cfg.Rounds; r++ {
		for _, i := range order(len(bl), r) {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			// A fresh key per round: a lock left behind by one round
			// (redsync does not release on a cancelled context) cannot
			// block the next.
			ls, err := lockersAt(i, fmt.Sprintf("lb:s3:%d:r%d", i, r))
			if err != nil {
				return nil, err
			}
			cr := runContended(ctx, ls, b.cfg.Duration, b.cfg.Hold, b.cfg.WaitBound, &b.hs)
			b.progress("s3 5 nodes %d workers round %d/%d %-52s %7.1f grants/s wait p50 %-9s p99 %-9s max %-9s jain %.3f failures %d%s",
				w, r+1, b.cfg.Rounds, bl[i].name, cr.rate(), fmtDur(cr.p50), fmtDur(cr.p99), fmtDur(cr.max), jain(cr.perWorker), cr.failures, errNote(cr.err))
			res[i] = append(res[i], cr)
		}
	}
	sec := &Section{Title: fmt.Sprintf("3. Contended: %d workers, one key, 5 nodes", w), Kind: kindContended,
		Pairs: []pair{{NameRFDefaultRetry, NameRSDefaultRetry}, {NameRFTunedRetry, NameRSTunedRetry}, {NameRFDefaultRetry, NameRSTunedRetry},
			{NameRFWakeOff, NameRSDefaultRetry}, {NameRFRedlockQ0, NameRSDefaultRetry}, {NameRFPerWorker, NameRSPerWorker}, {NameRFPerWorker, NameRFPerWorkerOff}}}
	for i, l := range bl {
		rs := res[i]
		var fails, rel, aband int
		var first error
		for _, c := range rs {
			fails += c.failures
			rel += c.releaseErrs
			aband += c.abandoned
			if first == nil {
				first = c.err
			}
		}
		sec.Rows = append(sec.Rows, Row{
			Name: l.name, Peer: l.peer, Workers: w, Nodes: len(b.five),
			M: map[string]float64{
				mRate:      median(collect(rs, contendedResult.rate)),
				mP50:       median(collect(rs, func(c contendedResult) float64 { return float64(c.p50) })),
				mP99:       median(collect(rs, func(c contendedResult) float64 { return float64(c.p99) })),
				mMax:       median(collect(rs, func(c contendedResult) float64 { return float64(c.max) })),
				mMinGrants: median(collect(rs, func(c contendedResult) float64 { return float64(slices.Min(c.perWorker)) })),
				mMaxGrants: median(collect(rs, func(c contendedResult) float64 { return float64(slices.Max(c.perWorker)) })),
				mJain:      median(collect(rs, func(c contendedResult) float64 { return jain(c.perWorker) })),
				mFailures:  float64(fails),
				mRelErrors: float64(rel),
				mSpread:    spread(collect(rs, contendedResult.rate)),
			},
			FirstErr: errString(first),
		})
	}
	return sec, nil
}

func (b *runner) s5(ctx context.Context) (*Section, error) {
	groups := []struct {
		addrs []string
		libs  []lib
	}{
		{b.five, []lib{redfenceRedlock(NameRFRedlockQ0, false, redlock.WithQuarantine(0)), redfenceRedlock(NameRFRedlockDefault, true), redsyncLib(NameRedsync5)}},
		{b.one, []lib{redfenceSingle(NameRFSingle), bsmLib(NameBSM), redsyncLib(NameRedsync1)}},
	}
	sec := &Section{Title: "5. Heap allocations per lock+release cycle (1 goroutine)", Kind: kindAllocs,
		Pairs: []pair{{NameRFRedlockQ0, NameRedsync5}, {NameRFRedlockDefault, NameRedsync5}, {NameRFSingle, NameBSM}, {NameRFSingle, NameRedsync1}}}
	for gi, g := range groups {
		bl, closeAll, err := buildAll(ctx, g.libs, g.addrs, b.cfg.PoolSize)
		if err != nil {
			return nil, err
		}
		err = func() error {
			defer closeAll()
			ls := make([]locker, len(bl))
			for i := range bl {
				l, err := bl[i].impl.newLocker(fmt.Sprintf("lb:s5:%d:%d", gi, i))
				if err != nil {
					return err
				}
				ls[i] = l
			}
			res := make([][]allocResult, len(bl))
			for r := 0; r < b.cfg.Rounds; r++ {
				for _, i := range order(len(bl), r) {
					if err := ctx.Err(); err != nil {
						return err
					}
					ar := runAllocs(ctx, ls[i], b.cfg.AllocCycles)
					b.progress("s5 %d nodes round %d/%d %-52s %7.1f allocs/cycle %8.0f B/cycle errors %d%s",
						len(g.addrs), r+1, b.cfg.Rounds, bl[i].name, ar.allocs, ar.bytes, ar.errors, errNote(ar.err))
					res[i] = append(res[i], ar)
				}
			}
			for i, l := range bl {
				errs := 0
				var first error
				for _, a := range res[i] {
					errs += a.errors
					if first == nil {
						first = a.err
					}
				}
				sec.Rows = append(sec.Rows, Row{
					Name: l.name, Peer: l.peer, Workers: 1, Nodes: len(g.addrs),
					M: map[string]float64{
						mAllocs: median(collect(res[i], func(a allocResult) float64 { return a.allocs })),
						mBytes:  median(collect(res[i], func(a allocResult) float64 { return a.bytes })),
						mErrors: float64(errs),
					},
					FirstErr: errString(first),
				})
			}
			return nil
		}()
		if err != nil {
			return nil, err
		}
	}
	return sec, nil
}

type kv struct{ K, V string }

func environment(cfg Config) []kv {
	env := []kv{
		{"command", cfg.Command},
		{"date", time.Now().UTC().Format("2006-01-02 15:04 UTC")},
		{"go", runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH},
		{"GOMAXPROCS / NumCPU", fmt.Sprintf("%d / %d", runtime.GOMAXPROCS(0), runtime.NumCPU())},
		{"cpu", cpuModel()},
		{"nodes", fmt.Sprintf("%d redis-server for Redlock scenarios, %d for single-node (%s, loopback, --save '' --appendonly no)", redlockNodes, singleNodes, rig.Version())},
		{"libraries", libVersions()},
		{"go-redis clients", fmt.Sprintf("one *redis.Client per node per library, PoolSize %d, ContextTimeoutEnabled, other options default", cfg.PoolSize)},
		{"measurements", fmt.Sprintf("%v each, rounds: %d (figures are medians), warm-up %v per library and part", cfg.Duration, cfg.Rounds, cfg.Warmup)},
		{"load average at start", loadAvg()},
	}
	return env
}

func libVersions() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	want := map[string]string{
		"github.com/redfence/redfence":     "redfence",
		"github.com/go-redsync/redsync/v4": "redsync",
		"github.com/bsm/redislock":         "bsm/redislock",
		"github.com/redis/go-redis/v9":     "go-redis",
		"github.com/cenkalti/backoff/v4":   "backoff",
	}
	var parts []string
	for _, d := range bi.Deps {
		name, ok := want[d.Path]
		if !ok {
			continue
		}
		v := d.Version
		if d.Replace != nil {
			v = "working tree (" + d.Replace.Path + ")"
		}
		parts = append(parts, name+" "+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
