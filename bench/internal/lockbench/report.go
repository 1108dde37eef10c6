package lockbench

import (
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redfence/redfence/bench/internal/link"
)

// Report is the outcome of Run.
type Report struct {
	Config   Config
	Env      []kv
	Started  time.Time
	Finished time.Time
	Sections []*Section
	// Link is the run over a link (Config.LinkLatency), with its own
	// sections and setup; nil when none ran.
	Link *Report
	// LinkSkipped is why the run over a link that Config asked for did
	// not happen or did not finish; nil when it ran or was not asked for.
	LinkSkipped error
	link        *linkInfo // set in a link run's own Report
}

// LinkFailed reports whether the run over the link was asked for and
// failed for another reason than missing privileges or no scenario to run:
// the command then exits non-zero, after writing the report.
func (r *Report) LinkFailed() bool {
	return r.LinkSkipped != nil && !errors.Is(r.LinkSkipped, link.ErrNotPermitted) && !errors.Is(r.LinkSkipped, errNoLinkScenario)
}

type kind int

const (
	kindThroughput kind = iota
	kindContended
	kindAllocs
)

// Section is one scenario's rows and the ratios between them.
type Section struct {
	ID    string
	Title string
	Kind  kind
	Rows  []Row
	Pairs []pair // numerator, denominator row names
}

// Row is one library in one configuration, with medians over rounds.
type Row struct {
	Name    string
	Peer    bool
	Workers int
	Nodes   int
	M       map[string]float64 // metric name -> value (durations in ns)
	// Rounds holds a few metrics' value in each round, in round order (M
	// has their medians): the targets' ratios round by round.
	Rounds   map[string][]float64
	FirstErr string
}

type pair struct{ num, den string }

func (p pair) label() string { return short(p.num) + " / " + short(p.den) }

// Metric names.
const (
	mRate      = "rate" // cycles/s or grants/s
	mP50       = "p50"
	mP99       = "p99"
	mMax       = "max"
	mErrors    = "errors"
	mSpread    = "spread"
	mMinGrants = "min grants"
	mMaxGrants = "max grants"
	mJain      = "jain"
	mFailures  = "failures"
	mRelErrors = "release errors"
	mAllocs    = "allocs"
	mBytes     = "bytes"
	mRetries   = "retries per grant" // absent: not counted
	mHold      = "hold"              // mean actual hold
	mCliCPU    = "client CPU"        // per cycle, this process
	mSrvCPU    = "server CPU"        // per cycle, the nodes' processes
	mScripts   = "script time"       // per cycle, the nodes' time in EVAL/EVALSHA
	mCmds      = "commands"          // per cycle, the nodes' (scripts' calls included)
	mInBytes   = "bytes read"        // per cycle, by the nodes
)

// Find returns the row of a section with the name and worker count.
func (s *Section) Find(name string, workers int) (Row, bool) {
	for _, r := range s.Rows {
		if r.Name == name && r.Workers == workers {
			return r, true
		}
	}
	return Row{}, false
}

type table struct {
	header []string
	rows   [][]string
}

func fmtDur(d time.Duration) string {
	switch {
	case d <= 0:
		return "0"
	case d < 10*time.Microsecond:
		return fmt.Sprintf("%.2fµs", float64(d)/1e3)
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/1e3)
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	case d < time.Second:
		return fmt.Sprintf("%.1fms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
}

func fmtNs(v float64) string { return fmtDur(time.Duration(v)) }

func fmtRate(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func fmtRatio(num, den float64) string {
	if den == 0 || math.IsNaN(num) || math.IsNaN(den) {
		return "-"
	}
	return fmt.Sprintf("%.2f", num/den)
}

func (s *Section) tables() (main, ratios table) {
	switch s.Kind {
	case kindThroughput:
		main.header = []string{"library", "nodes", "workers", "cycles/s", "p50", "p99", "client CPU/cycle", "server CPU/cycle", "errors", "spread"}
		for _, r := range s.Rows {
			main.rows = append(main.rows, []string{r.Name, fmt.Sprint(r.Nodes), fmt.Sprint(r.Workers),
				fmtRate(r.M[mRate]), fmtNs(r.M[mP50]), fmtNs(r.M[mP99]), fmtNs(r.M[mCliCPU]), fmtNs(r.M[mSrvCPU]),
				fmt.Sprint(r.M[mErrors]), fmt.Sprintf("%.0f%%", 100*r.M[mSpread])})
		}
		ratios.header = []string{"ratio", "workers", "cycles/s", "p50", "p99"}
		for _, p := range s.Pairs {
			for _, w := range s.workerCounts() {
				a, ok1 := s.Find(p.num, w)
				b, ok2 := s.Find(p.den, w)
				if !ok1 || !ok2 {
					continue
				}
				ratios.rows = append(ratios.rows, []string{p.label(), fmt.Sprint(w),
					fmtRatio(a.M[mRate], b.M[mRate]), fmtRatio(a.M[mP50], b.M[mP50]), fmtRatio(a.M[mP99], b.M[mP99])})
			}
		}
	case kindContended:
		main.header = []string{"library", "grants/s", "wait p50", "wait p99", "wait max", "grants/worker min-max", "Jain", "retries/grant", "failures", "spread"}
		for _, r := range s.Rows {
			fails := fmt.Sprint(r.M[mFailures])
			if r.M[mRelErrors] > 0 {
				fails += fmt.Sprintf(" (+%v release)", r.M[mRelErrors])
			}
			retries := "-"
			if v, ok := r.M[mRetries]; ok {
				retries = fmt.Sprintf("%.2f", v)
			}
			main.rows = append(main.rows, []string{r.Name, fmtRate(r.M[mRate]), fmtNs(r.M[mP50]), fmtNs(r.M[mP99]), fmtNs(r.M[mMax]),
				fmt.Sprintf("%.0f-%.0f", r.M[mMinGrants], r.M[mMaxGrants]), fmt.Sprintf("%.3f", r.M[mJain]), retries, fails, fmt.Sprintf("%.0f%%", 100*r.M[mSpread])})
		}
		ratios.header = []string{"ratio", "grants/s", "wait p50", "wait p99", "Jain"}
		for _, p := range s.Pairs {
			a, ok1 := s.Find(p.num, s.Rows[0].Workers)
			b, ok2 := s.Find(p.den, s.Rows[0].Workers)
			if !ok1 || !ok2 {
				continue
			}
			ratios.rows = append(ratios.rows, []string{p.label(),
				fmtRatio(a.M[mRate], b.M[mRate]), fmtRatio(a.M[mP50], b.M[mP50]), fmtRatio(a.M[mP99], b.M[mP99]), fmtRatio(a.M[mJain], b.M[mJain])})
		}
	case kindAllocs:
		main.header = []string{"library", "nodes", "allocs/cycle", "bytes/cycle", "errors"}
		for _, r := range s.Rows {
			main.rows = append(main.rows, []string{r.Name, fmt.Sprint(r.Nodes), fmt.Sprintf("%.1f", r.M[mAllocs]), fmt.Sprintf("%.0f", r.M[mBytes]), fmt.Sprint(r.M[mErrors])})
		}
		ratios.header = []string{"ratio", "allocs", "bytes"}
		for _, p := range s.Pairs {
			a, ok1 := s.Find(p.num, 1)
			b, ok2 := s.Find(p.den, 1)
			if !ok1 || !ok2 {
				continue
			}
			ratios.rows = append(ratios.rows, []string{p.label(), fmtRatio(a.M[mAllocs], b.M[mAllocs]), fmtRatio(a.M[mBytes], b.M[mBytes])})
		}
	}
	return main, ratios
}

func (s *Section) workerCounts() []int {
	var ws []int
	seen := map[int]bool{}
	for _, r := range s.Rows {
		if !seen[r.Workers] {
			seen[r.Workers] = true
			ws = append(ws, r.Workers)
		}
	}
	return ws
}

func (s *Section) errorNotes() []string {
	var out []string
	for _, r := range s.Rows {
		if r.FirstErr != "" {
			out = append(out, fmt.Sprintf("%s (%d workers): first error: %s", r.Name, r.Workers, r.FirstErr))
		}
	}
	return out
}

// WriteText prints the report as aligned plain-text tables.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	b.WriteString("lockbench: redfence vs redsync and bsm/redislock\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, e := range r.Env {
		fmt.Fprintf(tw, "  %s:\t%s\n", e.K, e.V)
	}
	tw.Flush()
	b.WriteString("  ratios are redfence / peer (s4: fenced / unfenced, s7: with / without replica acks): above 1 on cycles/s, grants/s and Jain is better, below 1 on latencies, waits and allocations is better\n")
	for _, s := range r.Sections {
		main, ratios := s.tables()
		fmt.Fprintf(&b, "\n[%s] %s\n", s.ID, s.Title)
		writeText(&b, main)
		if len(ratios.rows) > 0 {
			b.WriteString("\n")
			writeText(&b, ratios)
		}
		for _, n := range s.errorNotes() {
			fmt.Fprintf(&b, "  note: %s\n", n)
		}
	}
	if t := r.targetsTable(); len(t.rows) > 0 {
		b.WriteString("\n[targets] the project's goals, from this run's medians\n")
		writeText(&b, t)
	}
	b.WriteString(r.linkText())
	_, err := io.WriteString(w, b.String())
	return err
}

func writeText(w io.Writer, t table) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	line := func(cells []string) {
		for i, c := range cells {
			if i == 0 {
				fmt.Fprintf(tw, "  %s\t", c) // left column kept left by padding below
			} else {
				fmt.Fprintf(tw, "%s\t", c)
			}
		}
		fmt.Fprintln(tw)
	}
	// The first column is text: pad it by hand so that AlignRight only
	// affects the figures.
	width := 0
	for _, c := range append([][]string{t.header}, t.rows...) {
		width = max(width, len([]rune(c[0])))
	}
	pad := func(cells []string) []string {
		out := append([]string(nil), cells...)
		out[0] = out[0] + strings.Repeat(" ", width-len([]rune(out[0])))
		return out
	}
	line(pad(t.header))
	for _, r := range t.rows {
		line(pad(r))
	}
	tw.Flush()
}

func writeMarkdownTable(b *strings.Builder, t table) {
	b.WriteString("| " + strings.Join(t.header, " | ") + " |\n")
	b.WriteString("|---")
	for range t.header[1:] {
		b.WriteString("|---:")
	}
	b.WriteString("|\n")
	for _, r := range t.rows {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
}

// explanations of the scenarios, for the Markdown report.
var explanations = map[string]string{
	"s1": "Each worker locks and releases its own key in a loop, so nothing contends, on 5 nodes. " +
		"A cycle is `Lock` then `Release` (redsync: `LockContext` then `UnlockContext`), timed from before the lock to after the release. " +
		"redfence appears in two configurations (and once more with telemetry on): with `WithQuarantine(0)` its acquire is one `SET NX PX` per node, as redsync's is; with its defaults the restart quarantine (60s) " +
		"turns the acquire into a Lua script that also checks the node's quarantine marker, `TIME` and `LASTSAVE` (the nodes have been up for longer than the quarantine, as production nodes usually are; see node age above). " +
		"redfence sends each node's commands through its batcher: commands for one node that queue while two batches are in flight go out together as one pipeline (one write, one read). " +
		"redsync has one goredis/v9 pool per node and its defaults " +
		"(8s expiry, 400ms acquire timeout, waits for all nodes). " +
		"The last two rows are redfence over rueidis clients (module rfrueidis; `DisableCache`, `DisableRetry`, `BlockingPoolSize` as the go-redis pool size), quarantine off: " +
		"with rueidis's automatic pipelining (its default: concurrent commands share one connection per node) and with `DisableAutoPipelining` (pooled connections, as go-redis); redfence's batcher runs above either.",
	"s2": "The same loop on one node: redfence `single` with its defaults (quarantine off: `SET NX PX`), bsm/redislock (`Obtain` with an 8s TTL and its default of no retry; its acquire is a Lua script) " +
		"and redsync over a single pool (quorum 1); last, redfence `single` over a rueidis client (module rfrueidis, automatic pipelining on).",
	"s3": "Workers all want one key on 5 nodes. Each one takes the lock, holds it about 1ms (`time.Sleep`), releases it and wants it again at once, until the measurement ends. " +
		"Wait is from calling Lock to its successful return. Every acquisition runs under a context bounded by the wait bound (and by the end of the window); a Lock that fails before the window ends is a failure " +
		"(for redsync's defaults that includes its 32 tries running out). A wait still open when the window closes counts only towards max wait. " +
		"Fairness: fewest and most grants any worker got (medians over rounds) and Jain's index (1: every worker served equally; 1/workers: one worker got everything). " +
		"redfence waits with wake-up on (its default): a Lock that finds the key taken joins the key's queue of waiters on every node, in the order of its ticket, " +
		"and a release hands the key to the first waiter in the same script and tells that waiter's Client (pub/sub), across Clients alike; the waiter holds once a majority of nodes granted it, " +
		"and its back-off is only the poll that refreshes its entries. " +
		"redsync polls, and so does redfence with `WithWakeup(false)`: for them the retry delay decides this scenario. redsync and redfence (wake-up on) are shown with their defaults and tuned to the same uniform 1-5ms delay; redfence with wake-up off with its default delay. " +
		"The row with `WithQuarantine(0)` shows the restart quarantine's cost (see s1). " +
		"All these rows share one Client (one redsync instance) among the workers, as one process would. " +
		"The last rows give every worker its own Client (redsync instance) and its own go-redis clients (PoolSize 4): separate processes, as far as Redis can tell; " +
		"redfence with wake-up off is shown there too, and both libraries with the uniform 1-5ms retry (the comparison of the cross-client target). " +
		"retries/grant is the retry delays a row drew per grant, counted through the row's own retry policy (so, per worker, its failed attempts and queue refreshes per grant); " +
		"redsync's default rows are not counted (\"-\"). " +
		"The last row uses no server: the same workers and hold with the lock a channel in the benchmark process (blocked workers served in turn), so a grant costs only the hold and waking the next goroutine. " +
		"No lock over Redis can make more grants/s than it: it is this machine's bound for the scenario.",
	"s8": "Scenario 3's rows of one Client per worker, with more Clients: every worker has its own Client and go-redis clients (PoolSize 4), as separate processes would, and all want one key on 5 nodes, holding it about 1ms.",
	"s4": "The s1 loop for redfence redlock with its defaults, with and without `WithFencing`. Fencing reads each node's counter inside the acquire script and then writes the token to a majority: " +
		"one more round trip per acquire, and the fence hash per key. The ratio is fenced / unfenced.",
	"s7": "The s2 loop for redfence single on a primary with one replica (same machine, loopback), with and without `WithReplicaAcks(1, 100ms)`: " +
		"every acquire then waits, in the same pipeline, for the replica to acknowledge it (`WAIT 1 100`). The ratio is with / without: the cost of the replication lag on each acquire.",
	"s5": "One goroutine runs N lock+release cycles (after N/10 unmeasured ones) on its own key; `runtime.MemStats` deltas of `Mallocs` and `TotalAlloc` divided by N. " +
		"That counts everything the process allocated meanwhile: go-redis commands, the goroutines and contexts the library starts. " +
		"Comparable figures come from `cd bench && go test -run '^$' -bench . -benchmem ./internal/lockbench`.",
}

// WriteMarkdown writes the report as docs/performance.md.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	cfg := r.Config
	date := r.Started.UTC().Format("2006-01-02")
	b.WriteString("# Performance\n\n")
	b.WriteString("<!-- Generated by bench/cmd/lockbench (`make bench`); edit the generator, not this file. -->\n\n")
	fmt.Fprintf(&b, "redfence against the peer libraries [go-redsync/redsync](https://github.com/go-redsync/redsync) and "+
		"[bsm/redislock](https://github.com/bsm/redislock), on local redis-server processes. "+
		"**These figures are from one run on a %d-core machine on %s**, with `%s`, possibly while other work ran on it; "+
		"treat the absolute figures as indicative and the ratios as the result. Run `make bench` to measure on your own machine.\n\n",
		runtime.NumCPU(), date, cfg.Command)
	b.WriteString("## Setup\n\n| | |\n|---|---|\n")
	for _, e := range r.Env {
		fmt.Fprintf(&b, "| %s | %s |\n", e.K, strings.ReplaceAll(e.V, "|", "\\|"))
	}
	fmt.Fprintf(&b, "| total time | %s |\n", r.Finished.Sub(r.Started).Round(time.Second))
	if e, ok := r.linkSetupRow(); ok {
		fmt.Fprintf(&b, "| %s | %s |\n", e.K, strings.ReplaceAll(e.V, "|", "\\|"))
	}
	b.WriteString("\n## Method\n\n")
	b.WriteString("- The benchmark is its own Go module (`bench/`), so the library never depends on its peers. It starts its own redis-server processes " +
		"(5 for Redlock scenarios, 1 for single-node) on free loopback ports, with temporary directories and no persistence, and stops them at the end, also on SIGINT or SIGTERM.\n")
	b.WriteString("- Every library gets its own go-redis clients, configured identically (same pool size, `ContextTimeoutEnabled`), and keys of its own.\n")
	fmt.Fprintf(&b, "- Within a scenario the libraries run one after another, round after round (rounds: %d, each measurement %v, after one unmeasured warm-up of %v per library and worker count); "+
		"the order rotates every round, so each library goes first in turn and machine noise falls on all of them alike. Every figure is the median over rounds; "+
		"`spread` is (max - min) / median of the throughput over rounds, a hint of how noisy the run was.\n", cfg.Rounds, cfg.Duration, cfg.Warmup)
	b.WriteString("- Ratios are redfence / peer (scenario 4: fenced / unfenced, scenario 7: with / without replica acks), computed from the medians. On cycles/s, grants/s and Jain's index above 1 favours redfence; " +
		"on latencies, waits and allocations below 1 does.\n")
	b.WriteString("- Latency percentiles come from a log-linear histogram (under 1% error) of every cycle of every worker in a round.\n")
	b.WriteString("- CPU/cycle in the throughput tables is CPU time divided by cycles over a measurement: client from getrusage of the benchmark process (the harness included, alike for every library), " +
		"server from `INFO cpu` (used_cpu_user + used_cpu_sys) of the nodes the library talks to. With both sides sharing the machine's cores, their sum is what bounds cycles/s once enough workers keep the cores busy.\n")
	b.WriteString(r.targetsMarkdown())
	if len(r.targetsTable().rows) > 0 {
		b.WriteString(r.findingsMarkdown())
	}
	for _, s := range r.Sections {
		main, ratios := s.tables()
		fmt.Fprintf(&b, "\n## %s\n\n%s\n\n", s.Title, explanations[s.ID])
		writeMarkdownTable(&b, main)
		if len(ratios.rows) > 0 {
			b.WriteString("\n")
			writeMarkdownTable(&b, ratios)
		}
		if notes := s.errorNotes(); len(notes) > 0 {
			b.WriteString("\n")
			for _, n := range notes {
				fmt.Fprintf(&b, "- %s\n", strings.ReplaceAll(n, "|", "\\|"))
			}
		}
	}
	b.WriteString(r.linkMarkdown())
	b.WriteString("\n## Peer configuration\n\n")
	b.WriteString("- redsync: `redsync.New` with one `goredis.NewPool` per node, `NewMutex(key)` once per worker and key, defaults otherwise: expiry 8s, 32 tries with a uniform 50-250ms delay, " +
		"drift factor 0.01, acquire timeout expiry x 0.05 = 400ms, no fail-fast (waits for every node). The tuned contended row adds `WithRetryDelayFunc` (uniform 1-5ms) and `WithTries(1000000)`, so that the context bound, not the tries, ends a wait.\n")
	b.WriteString("- bsm/redislock: `redislock.New(client)`, `Obtain(ctx, key, 8s, nil)`: no retry (its default); a context without deadline gets one of the TTL.\n")
	b.WriteString("- redfence: defaults (TTL 8s, per-node timeout 100ms, retry 20ms growing 1.6x to 500ms, +-50% jitter, no attempt limit; redlock quarantine 60s, single quarantine off) unless the row says otherwise. " +
		"The tuned contended row uses `WithRetry` with a uniform 1-5ms delay.\n")
	b.WriteString("\n## Running it\n\n```sh\nmake bench                                   # the full run, on loopback and over a 1ms link (as root); rewrites this file\n" +
		"cd bench && go run ./cmd/lockbench -quick    # a smoke run, a few seconds\n" +
		"cd bench && go run ./cmd/lockbench -help     # durations, rounds, worker counts, scenarios (-only s1,s3)\n" +
		"cd bench && go run ./cmd/lockbench -only s1 -link-latency 1ms   # s1 on loopback, then over a link with 1ms each way (root)\n" +
		"cd bench && go test -run '^$' -bench . -benchmem ./internal/lockbench\n```\n")
	_, err := io.WriteString(w, b.String())
	return err
}
