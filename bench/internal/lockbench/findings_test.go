package lockbench

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// The findings quote this run's rows and compute from them: the ratio the
// CPU per cycle predicts, the contention ceiling and whether twice
// redsync's rate lies above it.
func TestFindings(t *testing.T) {
	us := float64(time.Microsecond)
	rep := &Report{Config: Config{Hold: time.Millisecond}, Sections: []*Section{
		{ID: "s1", Rows: []Row{
			{Name: NameRFRedlockQ0, Workers: 64, M: map[string]float64{mRate: 1000, mP50: 4e6, mCliCPU: 70 * us, mSrvCPU: 60 * us, mSpread: 0.1}},
			{Name: NameRedsync5, Workers: 64, M: map[string]float64{mRate: 250, mCliCPU: 300 * us, mSrvCPU: 220 * us, mSpread: 0.6}},
			{Name: NameRFRueidisQ0, Workers: 64, M: map[string]float64{mRate: 1200, mP50: 3e6}},
			{Name: NameRFRedlockDefault, Workers: 64, M: map[string]float64{mRate: 760, mCliCPU: 70 * us, mSrvCPU: 100 * us}},
			{Name: NameRFRedlockDefault, Workers: 1, M: map[string]float64{mP50: 250 * us}},
			{Name: NameRFRedlockQ0, Workers: 1, M: map[string]float64{mP50: 500 * us, mCliCPU: 450 * us, mSrvCPU: 400 * us,
				mGoroutines: 10, mCmds: 25, mInBytes: 1500, "prof io": 180 * us, "prof sched": 90 * us, "prof lib": 30 * us, "prof client": 40 * us}},
			{Name: NameRedsync5, Workers: 1, M: map[string]float64{mP50: 400 * us, mCliCPU: 380 * us, mSrvCPU: 410 * us,
				mGoroutines: 10, mCmds: 20, mInBytes: 1100, "prof io": 150 * us, "prof sched": 60 * us, "prof lib": 11 * us, "prof client": 45 * us}},
		}},
		{ID: "s2", Rows: []Row{
			{Name: NameRFSingle, Workers: 1, M: map[string]float64{mP50: 150 * us, mCliCPU: 100 * us, mSrvCPU: 50 * us,
				mGoroutines: 0, "prof io": 40 * us, "prof sched": 10 * us, "prof lib": 12 * us, "prof client": 20 * us}},
			{Name: NameBSM, Workers: 1, M: map[string]float64{mP50: 140 * us, mCliCPU: 90 * us, mSrvCPU: 55 * us,
				mGoroutines: 0, "prof io": 38 * us, "prof sched": 12 * us, "prof lib": 4 * us, "prof client": 21 * us}},
		}},
		{ID: "s6", Rows: []Row{
			{Name: NameRLGCRA, Workers: 64, M: map[string]float64{mRate: 900, mCliCPU: 30 * us, mSrvCPU: 40 * us, mScripts: 12 * us}},
			{Name: NameRedisRate, Workers: 64, M: map[string]float64{mRate: 1000, mCliCPU: 33 * us, mSrvCPU: 30 * us, mScripts: 7 * us}},
			{Name: NameRLGCRA, Workers: 1, M: map[string]float64{mRate: 99}},
			{Name: NameRedisRate, Workers: 1, M: map[string]float64{mRate: 100}},
		}},
		{ID: "s4", Rows: []Row{
			{Name: NameUnfenced, Workers: 64, M: map[string]float64{mP50: 5e6, mCliCPU: 60 * us, mSrvCPU: 90 * us}},
			{Name: NameFenced, Workers: 64, M: map[string]float64{mP50: 8e6, mCliCPU: 90 * us, mSrvCPU: 150 * us}},
		}},
		{ID: "s3", Rows: []Row{
			{Name: NameRFPerWorker, Workers: 16, M: map[string]float64{mRate: 300, mP99: 200e6, mHold: 1250 * us, mRetries: 4.5}},
			{Name: NameRFDefaultRetry, Workers: 16, M: map[string]float64{mRate: 480, mMinGrants: 60, mMaxGrants: 61, mJain: 1}},
			{Name: NameRSDefaultRetry, Workers: 16, M: map[string]float64{mRate: 500, mMinGrants: 17, mMaxGrants: 129, mJain: 0.785}},
			{Name: NameRSPerWorkerTuned, Workers: 16, M: map[string]float64{mRate: 400, mP99: 150e6, mRetries: 8.25}},
			{Name: NameBound, Workers: 16, M: map[string]float64{mRate: 750, mHold: 1300 * us}},
		}},
	}}
	md := rep.findingsMarkdown()
	for _, want := range []string{
		"predicts a ratio of 0.76; the measured one is 0.76", // (70+60)/(70+100)
		"The defaults cost the nodes 40µs and the client 0 more per cycle",
		"a ceiling of 667 grants/s", // 1 / (1.25ms + 0.25ms)
		"is 800 grants/s: above the ceiling",
		"redfence 4.50, redsync 8.25",
		"with no server at all, the lock a channel in this process, made 750 grants/s; their holds averaged 1.30ms, so even holds back to back, with no hand-over at all, would make 769: twice redsync's rate, 800, is above even that, so no lock",
		"redfence made 40% of the channel's grants/s, redsync 53%.",
		"predicts a p50 ratio of 1.60; the measured one is 1.60", // (90+150)/(60+90), 8ms/5ms
		"The nodes' extra 60µs per cycle",
		"over rueidis against over go-redis: 64 worker(s): cycles/s 1.20x, p50 0.75x (the first faster)",
		"p50 500µs against 400µs (1.25x, +100µs); per cycle the client spent +70µs and the nodes -10µs, running 25.0 commands against 20.0 and reading 1500 bytes against 1100",
		// io +30µs, sched +30µs: ties keep cpuKinds' order; lib +19µs is third.
		"the kinds that differ most are socket reads and writes (system calls) (+30µs) and scheduler: goroutine start and exit, parking, waking, idle polling (+30µs), and the library's own code cost 30µs against 11µs",
		"p50 150µs against 140µs (1.07x, +10µs); per cycle the client spent +10µs and the nodes -5.00µs, running 0.0 commands against 0.0",
		"the kinds that differ most are lock library's own code (telemetry calls included) (+8.00µs) and socket reads and writes (system calls) (+2.00µs)",
		"| goroutines started | 10.0 | 10.0 | 0.0 | 0.0 |",
		"| client: all the profile saw | 340µs | 266µs | 82µs | 75µs |",
		"the p50 is 250µs against 500µs with the quarantine off (0.50x)",
		// (33+30)/(30+40): redis_rate's cost over ratelimit's; 900/1000.
		"the client 33µs with redis_rate and 30µs with ratelimit, and the node 30µs and 40µs: (33µs + 30µs) / (30µs + 40µs) predicts a ratio of 0.90; the measured one is 0.90",
		"took 12µs per call with ratelimit and 7.00µs with redis_rate; the rest, 28µs and 23µs, is reading",
		"| ratelimit's GCRA script (args.lua + gcra.lua), TAT packed | 6.9µs |",
		"In this run: 1 worker(s) 0.99x, not met; 64 worker(s) 0.90x, not met.",
		"So the one-worker row is level by construction, and stays a finding.",
		"Every target on allocations is met",
		// (300+220)/(70+60) = 4.00; 1000/250.
		"a cycle cost the client 300µs with redsync and 70µs with redfence, and the nodes 220µs and 60µs: (300µs + 220µs) / (70µs + 60µs) predicts a ratio of 4.00; the measured one is 4.00",
		"varied by 60% between rounds in this run (its spread), redfence's by 10%",
		"its workers got 60 to 61 grants each (Jain's index 1.000), redsync's default (retry 50-250ms) 17 to 129 (Jain's index 0.785), at 480 against 500 grants/s",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("findings lack %q:\n%s", want, md)
		}
	}
	rsTuned := rep.sectionOf("s3").Rows[slices.IndexFunc(rep.sectionOf("s3").Rows, func(r Row) bool { return r.Name == NameRSPerWorkerTuned })]
	// Twice redsync's rate above even a hold of exactly the time slept.
	rsTuned.M[mRate] = 450
	if md := rep.findingsMarkdown(); !strings.Contains(md, "is 900 grants/s: above the ceiling, and above 800 grants/s, the ceiling even a hold of exactly the 1ms slept") {
		t.Errorf("no verdict against the slept hold:\n%s", md)
	}
	// Twice redsync's rate under the ceiling: reachable in principle.
	rsTuned.M[mRate] = 200
	if md := rep.findingsMarkdown(); !strings.Contains(md, "is 400 grants/s: below the ceiling") || !strings.Contains(md, "twice redsync's rate, 400, is below it.") {
		t.Errorf("no below-the-ceiling verdict:\n%s", md)
	}
	// A zero divisor (redsync's rate) leaves its paragraph out.
	rsTuned.M[mRate] = 0
	if md := rep.findingsMarkdown(); strings.Contains(md, "Contention across clients") {
		t.Errorf("a paragraph dividing by a zero rate:\n%s", md)
	}
	// One worker level with redis_rate or ahead: no finding to argue.
	s6 := rep.sectionOf("s6")
	s6.Rows[2].M[mRate] = 100
	if md := rep.findingsMarkdown(); strings.Contains(md, "level by construction") {
		t.Errorf("a one-worker finding for a met target:\n%s", md)
	}
	// Without the rows, no paragraph quotes them.
	if md := (&Report{}).findingsMarkdown(); strings.Contains(md, "Contention across clients") || strings.Contains(md, "defaults against quarantine off") || strings.Contains(md, "fenced against unfenced") {
		t.Errorf("paragraphs without their rows:\n%s", md)
	}
}
