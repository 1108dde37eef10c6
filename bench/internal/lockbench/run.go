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
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/redfence/redfence/bench/internal/rig"
)

// Config sets what to run and for how long.
type Config struct {
	Duration         time.Duration // per measurement
	Warmup           time.Duration // once per library and scenario part, unmeasured
	Rounds           int
	Workers          []int // worker counts for the uncontended scenarios
	ContendedWorkers int
	// ManyClients is scenario 8's workers, each with a Client of its own.
	ManyClients int
	Hold        time.Duration // how long a contended holder keeps the lock
	WaitBound   time.Duration // ctx bound of one contended acquisition
	AllocCycles int
	PoolSize    int // go-redis PoolSize, every client
	// NodeAge is how long the 5 nodes must have been up before the first
	// 5-node scenario: longer than the default restart quarantine (60s), so
	// that redlock's defaults take the fast path production nodes take (a node
	// up for less than the quarantine makes every acquire read INFO). 0: no
	// wait (a smoke run).
	NodeAge  time.Duration
	Only     []string // scenario IDs to run; empty: all
	Command  string   // shown in the report
	Progress io.Writer
	// LinkLatency, when positive, adds a run over a link that delays every
	// packet by this much each way (package link), after the loopback run:
	// the scenarios of LinkOnly that Only selects, with every node behind
	// the link. 0: loopback only.
	LinkLatency time.Duration
	// LinkOnly are the scenarios the link run may run; empty:
	// LinkScenarioIDs.
	LinkOnly []string
	// RTTPings is how many PINGs measure the link's round trip (and
	// loopback's) before the link run.
	RTTPings int
	// checkLink says whether a link can be set up; nil: link.Check (tests
	// replace it).
	checkLinkFunc func() error
}

// DefaultConfig is the full run (`make bench`).
func DefaultConfig() Config {
	return Config{
		Duration:         2 * time.Second,
		Warmup:           500 * time.Millisecond,
		Rounds:           3,
		Workers:          []int{1, 64},
		ContendedWorkers: 16,
		ManyClients:      64,
		Hold:             time.Millisecond,
		WaitBound:        time.Second,
		AllocCycles:      2000,
		PoolSize:         64,
		NodeAge:          62 * time.Second,
		RTTPings:         1000,
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
	c.RTTPings = 100
	return c
}

// ScenarioIDs lists the scenarios in order.
var ScenarioIDs = []string{"s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8"}

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
	case c.ContendedWorkers < 2 || c.ManyClients < 2:
		return errors.New("contended workers must be at least 2")
	case c.Hold < 0 || c.WaitBound <= 0:
		return errors.New("hold must not be negative and the wait bound must be positive")
	case c.AllocCycles < 1:
		return errors.New("alloc cycles must be at least 1")
	case c.PoolSize < 1:
		return errors.New("pool size must be at least 1")
	case c.NodeAge < 0:
		return errors.New("node age must not be negative")
	case c.LinkLatency < 0:
		return errors.New("link latency must not be negative")
	case c.LinkLatency > 0 && c.RTTPings < 1:
		return errors.New("the link's round trip needs at least 1 PING")
	}
	for _, w := range c.Workers {
		if w < 1 {
			return fmt.Errorf("invalid worker count %d", w)
		}
	}
	for _, id := range append(slices.Clone(c.Only), c.LinkOnly...) {
		if !slices.Contains(ScenarioIDs, id) {
			return fmt.Errorf("unknown scenario %q (have %s)", id, strings.Join(ScenarioIDs, ", "))
		}
	}
	return nil
}

func (c Config) runs(id string) bool { return len(c.Only) == 0 || slices.Contains(c.Only, id) }

// Run starts the nodes, runs the scenarios and stops the nodes, also when ctx
// is cancelled (it then returns ctx's error). With cfg.LinkLatency it then
// runs the link scenarios again with the nodes behind a link (linkrun.go);
// a link that cannot be set up is reported in the Report (LinkSkipped),
// not as an error.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	// Check the link's needs before the loopback run, so that a skip is
	// said at once rather than minutes later.
	var linkErr error
	if cfg.LinkLatency > 0 {
		if linkErr = cfg.checkLink(); linkErr != nil {
			fmt.Fprintf(cfg.Progress, "lockbench: the run over the link will be skipped: %v\n", linkErr)
		}
	}
	rep, err := cfg.runOn(ctx, rig.Loopback, "loopback")
	if err != nil {
		return nil, err
	}
	if cfg.LinkLatency > 0 {
		if linkErr == nil {
			rep.Link, linkErr = cfg.runLink(ctx)
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		if linkErr != nil {
			rep.LinkSkipped = linkErr
			fmt.Fprintf(cfg.Progress, "lockbench: the run over the link was skipped: %v\n", linkErr)
		}
	}
	return rep, nil
}

// runOn runs the scenarios of cfg.Only on nodes it starts on host; where
// says where that is, for the report.
func (cfg Config) runOn(ctx context.Context, host rig.Host, where string) (*Report, error) {
	rep := &Report{Config: cfg, Started: time.Now()}
	rep.Env = environment(cfg, where)

	five, err := host.StartN(ctx, redlockNodes)
	if err != nil {
		return nil, err
	}
	defer rig.CloseAll(five)
	one, err := host.StartN(ctx, singleNodes)
	if err != nil {
		return nil, err
	}
	defer rig.CloseAll(one)
	b := &runner{cfg: cfg, five: addrs(five), one: addrs(one), fiveUp: time.Now()}
	if cfg.runs("s7") {
		pair, err := host.StartN(ctx, 2)
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
		{"s2", b.s2, false}, {"s6", b.s6, false}, {"s7", b.s7, false}, {"s1", b.s1, true}, {"s3", b.s3, true}, {"s8", b.s8, true}, {"s4", b.s4, true}, {"s5", b.s5, true},
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
func (b *runner) throughputPart(ctx context.Context, sid string, libs []built, addrs []string, w int) ([]Row, error) {
	nodes := len(addrs)
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
	// At one worker, where the client's CPU goes (profile.go): totals over
	// the rounds, per library.
	kinds := make([]map[string]float64, len(libs))
	profCycles := make([]int, len(libs))
	for r := 0; r < b.cfg.Rounds; r++ {
		for _, i := range order(len(libs), r) {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			var prof *profiler
			if w == 1 {
				prof = startProfile()
			}
			cpu := startCPU(ctx, addrs)
			cr := runCycles(ctx, lockers[i], b.cfg.Duration, &b.hs)
			cr.cpu = cpu.perCycle(ctx, cr.cycles)
			if k := prof.stop(); k != nil {
				kinds[i] = addKinds(kinds[i], k)
				profCycles[i] += cr.cycles
			}
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
		p50s := collect(rs, func(c cycleResult) float64 { return float64(c.p50) })
		p99s := collect(rs, func(c cycleResult) float64 { return float64(c.p99) })
		rows[i] = Row{
			Name: l.name, Peer: l.peer, Workers: w, Nodes: nodes,
			Rounds: map[string][]float64{mRate: rates, mP50: p50s, mP99: p99s},
			M: map[string]float64{
				mRate:    median(rates),
				mP50:     median(p50s),
				mP99:     median(p99s),
				mErrors:  float64(errs),
				mSpread:  spread(rates),
				mCliCPU:  median(collect(rs, func(c cycleResult) float64 { return float64(c.cpu.client) })),
				mSrvCPU:  median(collect(rs, func(c cycleResult) float64 { return float64(c.cpu.srv.cpu) })),
				mScripts: median(collect(rs, func(c cycleResult) float64 { return float64(c.cpu.srv.scripts) })),
				mCmds:    median(collect(rs, func(c cycleResult) float64 { return c.cpu.srv.commands })),
				mInBytes: median(collect(rs, func(c cycleResult) float64 { return c.cpu.srv.inBytes })),
			},
			FirstErr: errString(first),
		}
		if profCycles[i] > 0 {
			for k, v := range kinds[i] {
				rows[i].M[k] = v / float64(profCycles[i])
			}
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

// uncontended runs a throughput scenario for every worker count; title is
// its section's title.
func (b *runner) uncontended(ctx context.Context, sid, title string, libs []lib, nodes []string, pairs []pair) (*Section, error) {
	bl, closeAll, err := buildAll(ctx, libs, nodes, b.cfg.PoolSize)
	if err != nil {
		return nil, err
	}
	defer closeAll()
	sec := &Section{Title: title, Kind: kindThroughput, Pairs: pairs}
	for _, w := range b.cfg.Workers {
		rows, err := b.throughputPart(ctx, sid, bl, nodes, w)
		if err != nil {
			return nil, err
		}
		sec.Rows = append(sec.Rows, rows...)
	}
	return sec, nil
}
