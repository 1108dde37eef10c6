package lockbench

import (
	"fmt"
	"strings"
	"time"
)

// The report's "Where the targets stand" section: for each target that a
// ratio alone does not explain, what the profiles and this run's CPU and
// retry counts say. The profile figures are from the runs named in the
// text (allocation counts do not depend on load; CPU shares do, a little);
// the figures quoted from "this run" are computed from the report's rows.

// allocProfile is the allocation work of issues 17 and 28: allocations
// per lock+release cycle (per Allow call for GCRA), from `go test -bench
// -benchmem` (deterministic: they do not depend on load).
var allocProfile = table{header: []string{"allocations per cycle", "before issue 17", "after issue 17", "now", "peer"}, rows: [][]string{
	{"redfence redlock, quarantine off (5 nodes)", "121", "111", "50", "redsync 142"},
	{"redfence redlock, defaults (5 nodes)", "121", "112", "81", "redsync 142"},
	{"redfence redlock, defaults + fencing", "193", "182", "179", ""},
	{"redfence single, defaults (1 node)", "71", "59", "23", "bsm/redislock 34, redsync 38"},
	{"redfence ratelimit GCRA, one Allow", "21", "19", "19", "redis_rate 22"},
}}

// sectionOf returns the section with id, or nil.
func (r *Report) sectionOf(id string) *Section {
	for _, s := range r.Sections {
		if s.ID == id {
			return s
		}
	}
	return nil
}

// rowOf returns the row named name with workers (0: any) of section id.
func (r *Report) rowOf(id, name string, workers int) (Row, bool) {
	if s := r.sectionOf(id); s != nil {
		return s.find(name, workers)
	}
	return Row{}, false
}

// rowPair returns the rows named name and base with workers of section id,
// the two a finding compares, when both are there and base's metric m (the
// divisor of the comparison) is positive.
func (r *Report) rowPair(id string, workers int, name, base, m string) (row, baseRow Row, ok bool) {
	row, ok1 := r.rowOf(id, name, workers)
	baseRow, ok2 := r.rowOf(id, base, workers)
	return row, baseRow, ok1 && ok2 && baseRow.M[m] > 0
}

// findingsMarkdown is the "Where the targets stand" section.
func (r *Report) findingsMarkdown() string {
	var b strings.Builder
	b.WriteString("\n## Where the targets stand\n\n")
	b.WriteString("What the measurements say about the targets above that are not met, or only just: " +
		"profiles (`go test -bench` with `-memprofile`/`-cpuprofile` on the benchmarks of `bench/internal/lockbench`, read with `go tool pprof`), " +
		"the CPU time per cycle of the client and of the nodes (the throughput tables' CPU columns: getrusage of the benchmark process, harness included, and `INFO cpu` of the redis-server processes), " +
		"a CPU profile of the process during every one-worker round of this run, " +
		"and the retries per grant of scenario 3.\n")
	r.noiseFindings(&b)
	r.allocFindings(&b)
	r.oneWorkerFindings(&b)
	r.quarantineFindings(&b)
	r.fencedFindings(&b)
	r.redsyncFindings(&b)
	r.gcraFindings(&b)
	r.contentionFindings(&b)
	r.clientFindings(&b)
	return b.String()
}

func (r *Report) allocFindings(b *strings.Builder) {
	b.WriteString("\n### Allocations per cycle\n\n")
	b.WriteString("Measured with `cd bench && go test -run '^$' -bench 'BenchmarkCycle$|BenchmarkRateLimit' -benchmem -benchtime 3000x ./internal/lockbench`; " +
		"where they go with `-memprofile mem.prof -memprofilerate 1` and `go tool pprof -sample_index=alloc_objects -top -cum -focus=rfLocker lockbench.test mem.prof`:\n\n")
	writeMarkdownTable(b, allocProfile)
	b.WriteString("\nIssue 28 took out what a cycle allocated without needing it: the public wrapper of every lease (package redlock is the implementation now), " +
		"the context Close cancels for a Lock whose first attempt succeeds (only a Lock that waits is made interruptible), the retry policy of such a Lock, " +
		"a round's reply channel and a separate request slice when the round has one node, the owner value boxed twice, Done's channel until someone asks for it, " +
		"and Release's detached context when the caller's can never end. Every target on allocations is met. " +
		"The defaults' 31 more than the quarantine off are the restart proof's two readings in every acquire's pipeline (their commands, replies and the pipeline's own bookkeeping in go-redis), " +
		"and fencing's 129 more its second round and its scripts' replies.\n")
}

func (r *Report) quarantineFindings(b *strings.Builder) {
	def, q0, ok := r.rowPair("s1", 64, NameRFRedlockDefault, NameRFRedlockQ0, mRate)
	if !ok {
		return
	}
	b.WriteString("\n### 64 workers: defaults against quarantine off\n\n")
	if r.Config.NodeAge < defaultQuarantine {
		b.WriteString("(In this run the nodes were younger than the quarantine, so the defaults' script also read `INFO` on every acquire: the figures below overstate what the defaults cost on nodes that have been up longer, as production nodes usually are.) ")
	}
	cq, sq := q0.M[mCliCPU], q0.M[mSrvCPU]
	cd, sd := def.M[mCliCPU], def.M[mSrvCPU]
	b.WriteString("With 64 workers the client and the five redis-server processes keep both cores busy, so cycles/s is about the cores divided by the CPU a cycle costs on both sides. ")
	cpuPrediction(b, "a cycle cost the client %s with the quarantine off and %s with the defaults, and the nodes %s and %s",
		"ratio", cpu{cq, sq}, cpu{cd, sd}, def.M[mRate]/q0.M[mRate])
	b.WriteString(". ")
	fmt.Fprintf(b, "The defaults cost the nodes %s and the client %s more per cycle: on a connection that has passed the restart quarantine's full check, "+
		"an acquire is a bare `SET NX PX` followed, in the same pipeline, by the proof's two readings (`HGET` of the marker's id and `LASTSAVE`; docs/design.md, The proof per connection), "+
		"once per batch of acquires. The readings are what keeps a flush, a marker made anew and a restart behind a proxy from voting (the tests say which reading catches which), "+
		"so they cannot go; under load they are shared by every acquire of a batch, and the rounds' ratios show how close that comes to the quarantine off.\n",
		fmtNs(max(0, sd-sq)), fmtNs(max(0, cd-cq)))
}

// fencedFindings explains s4's 64-worker p50 ratio from the CPU a fenced
// and an unfenced cycle cost: with both cores busy, the latency of a cycle
// follows that cost.
func (r *Report) fencedFindings(b *strings.Builder) {
	f, u, ok := r.rowPair("s4", 64, NameFenced, NameUnfenced, mP50)
	if !ok {
		return
	}
	b.WriteString("\n### 64 workers: fenced against unfenced\n\n")
	cf, sf := f.M[mCliCPU], f.M[mSrvCPU]
	cu, su := u.M[mCliCPU], u.M[mSrvCPU]
	b.WriteString("A fenced acquire is two rounds where an unfenced one is one: the acquire script, which also reads each node's counter, " +
		"then the write of the token (one above the highest counter a majority returned) to a majority (docs/fencing.md, two phases). " +
		"With 64 workers both cores are busy, so a cycle's latency follows the CPU it costs on both sides. ")
	// With the cores busy the p50 grows with the CPU a cycle costs.
	cpuPrediction(b, "a fenced cycle cost the client %s against %s unfenced and the nodes %s against %s",
		"p50 ratio", cpu{cf, sf}, cpu{cu, su}, f.M[mP50]/u.M[mP50])
	fmt.Fprintf(b, ". The nodes' extra %s per cycle is the acquire as a script (the counter and the clock read with the key's `SET`, where the unfenced acquire on a proven connection is a bare `SET NX PX`) "+
		"and the second script on each node phase 2 reaches (token.lua's acknowledge: the counter, `GET` of the key, `TIME` and `PTTL` for the clock floor, the record's `HSET` and `PEXPIRE`); "+
		"the client's extra %s is the second round (its requests, replies and per-node deadlines). "+
		"The token cannot be written in the first round: it must exceed the counters of a majority, which are known only when that round ends, "+
		"and writing an unconfirmed proposal is the repeat docs/fencing.md's counter-examples show; phase 2 must compare and record atomically on each node, so it is a script. "+
		"The bound of 1.6 was set against an unfenced cycle that was itself a script on every node; since the unfenced acquire became a bare `SET` on proven connections, "+
		"the fenced cycle costs about twice the unfenced one on both sides, and the ratio follows. Meeting 1.6 would take dropping the second round or its checks, which the guarantee rests on: not met.\n",
		fmtNs(max(0, sf-su)), fmtNs(max(0, cf-cu)))
}

// cpu is the client and node CPU time of one cycle.
type cpu struct{ client, nodes float64 }

// cpuPrediction writes what the CPU per cycle of a and b says, with what
// (a format of a's client and nodes, then b's), and the ratio it predicts,
// a's total over b's, beside the measured one.
func cpuPrediction(b *strings.Builder, what, ratio string, a, c cpu, measured float64) {
	fmt.Fprintf(b, "In this run "+what, fmtNs(a.client), fmtNs(c.client), fmtNs(a.nodes), fmtNs(c.nodes))
	if c.client+c.nodes > 0 {
		fmt.Fprintf(b, ": (%s + %s) / (%s + %s) predicts a %s of %.2f; the measured one is %.2f",
			fmtNs(a.client), fmtNs(a.nodes), fmtNs(c.client), fmtNs(c.nodes), ratio, (a.client+a.nodes)/(c.client+c.nodes), measured)
	}
}

// evalshaCost is where the server's time in one admitted GCRA call goes,
// measured apart (not in the run): EVALSHA usec_per_call of INFO
// commandstats over 10,000 pipelined calls per variant, the best of seven,
// at scenario 6's limit.
var evalshaCost = table{header: []string{"script", "EVALSHA µs per call"}, rows: [][]string{
	{"ratelimit's GCRA script (args.lua + gcra.lua), TAT packed", "6.9µs"},
	{"the same with the TAT as \"seconds:µs\" text (before)", "8.5µs"},
	{"redis_rate's script", "7.5µs"},
}}

func (r *Report) gcraFindings(b *strings.Builder) {
	b.WriteString("\n### Rate limiting: GCRA against redis_rate\n\n")
	b.WriteString("Both make one EVALSHA per call, and every call here is admitted and writes the key (the dearer path of both scripts; `TestRateLimitWorkloadWrites` checks that both write). ")
	var verdicts []string
	for _, w := range []int{1, 64} {
		rl, rr, ok := r.rowPair("s6", w, NameRLGCRA, NameRedisRate, mRate)
		if !ok {
			continue
		}
		if w == 1 {
			b.WriteString("At one worker a call is a round trip plus the CPU on its path, on both sides. ")
		} else {
			b.WriteString("At 64 workers both cores are busy, so calls/s follows the CPU a call costs on both sides; " +
				"ratelimit sends the calls that arrive while two batches are on their way as one pipeline (docs/coordination.md, Concurrent calls share round trips), so a batch shares its reads and writes on both sides, where redis_rate makes a round trip of its own per call. ")
		}
		cpuPrediction(b, "a call cost the client %s with redis_rate and %s with ratelimit, and the node %s and %s",
			"ratio", cpu{rr.M[mCliCPU], rr.M[mSrvCPU]}, cpu{rl.M[mCliCPU], rl.M[mSrvCPU]}, rl.M[mRate]/rr.M[mRate])
		fmt.Fprintf(b, " (redis_rate's cost over ratelimit's). Of the node's time, running the script (`INFO commandstats`: EVALSHA's usec, the commands it calls included) took %s per call with ratelimit and %s with redis_rate; "+
			"the rest, %s and %s, is reading the request and writing the reply. ",
			fmtNs(rl.M[mScripts]), fmtNs(rr.M[mScripts]), fmtNs(rl.M[mSrvCPU]-rl.M[mScripts]), fmtNs(rr.M[mSrvCPU]-rr.M[mScripts]))
		verdict := "met"
		if rl.M[mRate] < rr.M[mRate] {
			verdict = "not met"
		}
		verdicts = append(verdicts, fmt.Sprintf("%d worker(s) %.2fx, %s", w, rl.M[mRate]/rr.M[mRate], verdict))
	}
	b.WriteString("Where the script's time goes, measured apart on one redis-server (`INFO commandstats` usec_per_call over 10,000 EVALSHA pipelined 100 at a time, the best of seven runs per variant, on 2026-12-06; not this run):\n\n")
	writeMarkdownTable(b, evalshaCost)
	b.WriteString("\nratelimit keeps the theoretical arrival time exact: whole µs since 1970 and the fraction of a µs, two doubles packed with `struct.pack` into 16 bytes (gcra.lua). " +
		"One double of µs since 1970 resolves only 1/4µs, and rounding on every request would pile up over a burst (`TestGCRAFractionalIntervalExact`). " +
		"Packing formats and parses no number, where redis_rate's one float of seconds is formatted as text on every `SET`, and ratelimit's earlier \"seconds:µs\" text cost about 1.6µs more per call than the packed form. " +
		"Until 2026-12-06 scenario 6 limited both to 2147483647 per second: at that rate redis_rate's step (1/2147483647 s) vanished against its TAT (a double of seconds since 2017), so it never wrote its key, and the comparison set its cheaper path against ratelimit's dearer one; the limit is now 1,000,000 per second. " +
		"Client side, ratelimit's own code (validation, key, reply) is under 3% of a call's CPU in a profile of the parallel benchmark " +
		"(`go test -run '^$' -bench 'BenchmarkRateLimit/(ratelimit-gcra|redis_rate)-parallel$' -benchtime 100000x -cpuprofile cpu.prof ./internal/lockbench`), " +
		"and it allocates 19 objects per call against 22.")
	if len(verdicts) > 0 {
		fmt.Fprintf(b, " In this run: %s.", strings.Join(verdicts, "; "))
	}
	if rl, rr, ok := r.rowPair("s6", 1, NameRLGCRA, NameRedisRate, mRate); ok && rl.M[mRate] < rr.M[mRate] {
		b.WriteString(" At one worker nothing is there to batch: both libraries make exactly one round trip per call through the same go-redis client, so the script's time is all that can differ, and ratelimit's is the cheaper one measured apart (the table), " +
			"a difference of well under 1µs in a call that costs tens of µs of CPU on the two sides, below this run's noise. " +
			"Admitting with less than a round trip per call would mean deciding in the client from a share of the limit handed out in advance, and giving up what a call guarantees: that every caller, in any process, is admitted on the server's count. " +
			"So the one-worker row is level by construction, and stays a finding.")
	}
	b.WriteString("\n")
}

func (r *Report) contentionFindings(b *strings.Builder) {
	rf, rs, ok := r.rowPair("s3", 0, NameRFPerWorker, NameRSPerWorkerTuned, mRate)
	if !ok {
		return
	}
	b.WriteString("\n### Contention across clients\n\n")
	hold := time.Duration(rf.M[mHold])
	fmt.Fprintf(b, "With one Client per worker, %d workers want one key: each grant is a hold (`time.Sleep(%v)`, %s on average in this run) and a hand-over. "+
		"redfence hands the key over on the nodes: the release script grants it to the first waiter queued there and tells that waiter's Client, which holds once a majority granted it (docs/design.md, Waiting). ",
		rf.Workers, r.Config.Hold, fmtDur(hold))
	cycle, ok := r.rowOf("s1", NameRFRedlockQ0, 1)
	if ok && cycle.M[mP50] > 0 && hold > 0 {
		round := cycle.M[mP50] / 2
		ceiling := 1 / (float64(hold)/1e9 + round/1e9)
		fmt.Fprintf(b, "No protocol can hand the key over faster than the release reaching a majority of the nodes and the word coming back, one round trip to the nodes: "+
			"in this run an uncontended lock and release took %s at the p50 (s1, quarantine off, 1 worker), so a round about %s, and a grant at least the hold plus that: "+
			"a ceiling of %.0f grants/s for any lock on these nodes. Twice redsync's %.0f grants/s (1-5ms retry, one instance per worker) is %.0f grants/s: ",
			fmtNs(cycle.M[mP50]), fmtNs(round), ceiling, rs.M[mRate], 2*rs.M[mRate])
		// time.Sleep never returns early: the slept hold bounds every lock,
		// whatever the machine's timer slack.
		floor := 1 / (r.Config.Hold.Seconds() + round/1e9)
		switch {
		case 2*rs.M[mRate] > floor:
			fmt.Fprintf(b, "above the ceiling, and above %.0f grants/s, the ceiling even a hold of exactly the %v slept would give (`time.Sleep` never returns sooner): "+
				"the grants/s target cannot be met on this machine whatever the protocol. ", floor, r.Config.Hold)
		case 2*rs.M[mRate] > ceiling:
			b.WriteString("above the ceiling, so the grants/s target cannot be met at this hold on this machine whatever the protocol. ")
		default:
			b.WriteString("below the ceiling, so the target is reachable in principle. ")
		}
		fmt.Fprintf(b, "redfence's %.0f grants/s are %.0f%% of the ceiling. ", rf.M[mRate], 100*rf.M[mRate]/ceiling)
	}
	if bd, ok := r.rowOf("s3", NameBound, rf.Workers); ok && bd.M[mRate] > 0 {
		top := topRate(bd)
		fmt.Fprintf(b, "This run also measured that bound: the same %d workers and hold with no server at all, the lock a channel in this process, made %.0f grants/s; "+
			"their holds averaged %s, so even holds back to back, with no hand-over at all, would make %.0f: ",
			bd.Workers, bd.M[mRate], fmtDur(time.Duration(bd.M[mHold])), top)
		if need := 2 * rs.M[mRate]; need > top {
			fmt.Fprintf(b, "twice redsync's rate, %.0f, is above even that, so no lock, over Redis or in memory, could meet the target in this run. ", need)
		} else {
			fmt.Fprintf(b, "twice redsync's rate, %.0f, is below it. ", need)
		}
		fmt.Fprintf(b, "redfence made %.0f%% of the channel's grants/s, redsync %.0f%%. ", 100*rf.M[mRate]/bd.M[mRate], 100*rs.M[mRate]/bd.M[mRate])
	}
	fmt.Fprintf(b, "Measured: redfence %.0f grants/s, p99 wait %s; redsync %.0f grants/s, p99 wait %s. ", rf.M[mRate], fmtNs(rf.M[mP99]), rs.M[mRate], fmtNs(rs.M[mP99]))
	if a, ok := rf.M[mRetries]; ok {
		if c, ok := rs.M[mRetries]; ok {
			fmt.Fprintf(b, "Retry delays drawn per grant (through each row's own retry policy: for redfence a waiter's refreshes of its entries in the queue, for redsync its failed attempts): redfence %.2f, redsync %.2f. ", a, c)
		}
	}
	b.WriteString("What is left between redfence and the ceiling is the work around each hand-over that shares the two cores with it: the releaser's next Lock (a join of the queue, a script on every node: " +
		"a Mutex whose last Lock had to queue joins at once, without an attempt, docs/design.md, Waiting) and the waiters' refreshes. " +
		"That work also lengthens the hold: Go's network poller sleeps in whole milliseconds, so once the process goes idle with less than 1ms left of a `time.Sleep`, the sleep ends about 1ms after that moment, not when it is due; " +
		"the hold then lasts about 1ms past the last work done during it. " +
		"Measured apart on 2026-12-06 (16 Clients over 5 local nodes, 1ms holds; a Go execution trace of the holder showed its timer firing about 1ms after the process went idle): " +
		"with an attempt, a clean-up and a join after each release, a hold of `time.Sleep(1ms)` took 1.72ms and the workers made 494 grants/s (with wake-up off: 1.24ms; a holder that spun instead of sleeping: 1.00ms and 754 grants/s); " +
		"without the clean-up of an attempt every node refused, 1.57ms and 536 grants/s; joining first, without the attempt, 1.38ms and about 600 grants/s.\n")
}

// clientFindings compares the same locks over rueidis and over go-redis
// (issue 18: which is faster, measured): s1's quarantine-off rows and s2's
// single rows, at 1 and 64 workers.
func (r *Report) clientFindings(b *strings.Builder) {
	type cmp struct{ what, id, row, base string }
	var lines []string
	for _, c := range []cmp{
		{"redlock, quarantine off, over rueidis against over go-redis", "s1", NameRFRueidisQ0, NameRFRedlockQ0},
		{"redlock over rueidis, automatic pipelining off against on", "s1", NameRFRueidisQ0Pool, NameRFRueidisQ0},
		{"single over rueidis against over go-redis", "s2", NameRFRueidisSingle, NameRFSingle},
	} {
		var parts []string
		for _, w := range []int{1, 64} {
			row, base, ok := r.rowPair(c.id, w, c.row, c.base, mRate)
			if !ok || base.M[mP50] == 0 {
				continue
			}
			parts = append(parts, fmt.Sprintf("%d worker(s): cycles/s %.2fx, p50 %.2fx (%s)", w, row.M[mRate]/base.M[mRate], row.M[mP50]/base.M[mP50], faster(row.M[mRate]/base.M[mRate])))
		}
		if len(parts) > 0 {
			lines = append(lines, fmt.Sprintf("- %s: %s.", c.what, strings.Join(parts, "; ")))
		}
	}
	if len(lines) == 0 {
		return
	}
	b.WriteString("\n### Clients: go-redis and rueidis\n\n")
	b.WriteString("The same locks over rueidis clients (module rfrueidis) beside go-redis ones, in this run (ratios of the first named to the second; within 5% counts as the same on a shared 2-core machine):\n\n")
	b.WriteString(strings.Join(lines, "\n"))
	b.WriteString("\n\nredfence's batcher already coalesces a node's queued commands into one pipeline, so rueidis's automatic pipelining has little left to coalesce: what differs is each client's cost per command.\n")
}

// faster words a throughput ratio: which side is faster, or the same.
func faster(ratio float64) string {
	switch {
	case ratio > 1.05:
		return "the first faster"
	case ratio < 0.95:
		return "the second faster"
	}
	return "the same within 5%"
}
