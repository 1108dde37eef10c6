package lockbench

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redfence/redfence/bench/internal/rig"
)

// TestSmoke runs every scenario with tiny durations and checks that every row
// is there with sane figures.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server processes")
	}
	if _, err := rig.Binary(); err != nil {
		t.Fatal(err)
	}
	cfg := QuickConfig()
	cfg.Duration = 100 * time.Millisecond
	cfg.Warmup = 20 * time.Millisecond
	cfg.Workers = []int{1, 4}
	cfg.ContendedWorkers = 4
	cfg.ManyClients = 6
	cfg.AllocCycles = 50
	cfg.Command = "smoke test"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := scenarioRows
	if len(rep.Sections) != len(want) {
		t.Fatalf("got %d sections, want %d", len(rep.Sections), len(want))
	}
	for _, s := range rep.Sections {
		names := want[s.ID]
		workers := cfg.Workers
		switch s.Kind {
		case kindContended:
			workers = []int{cfg.ContendedWorkers}
			if s.ID == "s8" {
				workers = []int{cfg.ManyClients}
			}
		case kindAllocs:
			workers = []int{1}
		}
		if len(s.Rows) != len(names)*len(workers) {
			t.Errorf("%s: %d rows, want %d", s.ID, len(s.Rows), len(names)*len(workers))
		}
		for _, name := range names {
			for _, w := range workers {
				r, ok := s.Find(name, w)
				if !ok {
					t.Errorf("%s: no row %q with %d workers", s.ID, name, w)
					continue
				}
				checkRow(t, s, r)
			}
		}
		if s.Kind == kindThroughput {
			// CPU accounting is by clock tick: a single row of a short run
			// may see none, but a section's rows together do.
			var srv, cli float64
			for _, r := range s.Rows {
				srv += r.M[mSrvCPU]
				cli += r.M[mCliCPU]
			}
			if !(srv > 0) || (selfCPU() > 0 && !(cli > 0)) {
				t.Errorf("%s: no CPU time measured: server %v, client %v", s.ID, srv, cli)
			}
			checkProfiled(t, s)
			for _, r := range s.Rows { // every cycle sends commands
				if !(r.M[mCmds] >= 1) || !(r.M[mInBytes] > 0) {
					t.Errorf("%s %q (%d workers): %v commands, %v bytes read per cycle", s.ID, r.Name, r.Workers, r.M[mCmds], r.M[mInBytes])
				}
			}
			if s.ID == "s6" {
				// Every rate limiter call is one EVALSHA.
				for _, r := range s.Rows {
					if !(r.M[mScripts] > 0) {
						t.Errorf("s6 %q (%d workers): script time %v per call", r.Name, r.Workers, r.M[mScripts])
					}
				}
			}
		}
		main, ratios := s.tables()
		if len(main.rows) != len(s.Rows) || len(ratios.rows) == 0 {
			t.Errorf("%s: %d table rows for %d results, %d ratio rows", s.ID, len(main.rows), len(s.Rows), len(ratios.rows))
		}
		for _, r := range ratios.rows {
			if idleRatio(s, r[0]) {
				continue
			}
			for _, c := range r[1:] {
				if c == "-" || c == "0.00" {
					t.Errorf("%s: ratio row %q has %q", s.ID, r[0], c)
				}
			}
		}
	}

	// Every target is computed from one run of every scenario (those of a
	// worker count the smoke run does not use aside).
	// A slow-retry row with no grant in the short window (checkRow allows
	// it) has no ratio, so its targets have no row either.
	noGrant := map[string]bool{}
	if s3 := sectionByID(rep, "s3"); s3 != nil {
		for _, r := range s3.Rows {
			if slowRetry[r.Name] && r.M[mRate] == 0 {
				noGrant[r.Name] = true
			}
		}
	}
	wantTargets, skipped := 0, 0
	for _, tg := range targets {
		switch {
		case noGrant[tg.num] || noGrant[tg.den]:
			skipped++
		case tg.workers == 0 || slices.Contains(cfg.Workers, tg.workers):
			wantTargets++
		}
	}
	if got := len(rep.targetsTable().rows); got != wantTargets || wantTargets+skipped < len(targets)/2 {
		t.Errorf("targets table has %d rows, want %d (one per target of workers %v)", got, wantTargets, cfg.Workers)
	}
	// The retry counters count: the per-worker rows race for the key, so
	// the polling ones fail attempts, and every counted row has the figure.
	if s3 := sectionByID(rep, "s3"); s3 != nil {
		for _, name := range []string{NameRFPerWorker, NameRFPerWorkerTuned, NameRFPerWorkerOff, NameRSPerWorkerTuned, NameRSTunedRetry, NameRFDefaultRetry} {
			r, _ := s3.Find(name, cfg.ContendedWorkers)
			if _, ok := r.M[mRetries]; !ok {
				t.Errorf("s3 %q: no retries per grant", name)
			}
		}
		for _, name := range []string{NameRSPerWorkerTuned, NameRFPerWorkerOff} {
			if r, _ := s3.Find(name, cfg.ContendedWorkers); !(r.M[mRetries] > 0) {
				t.Errorf("s3 %q: retries per grant %v, want > 0: separate clients polling for a key held about 1ms each time fail attempts", name, r.M[mRetries])
			}
		}
		if r, _ := s3.Find(NameRSPerWorker, cfg.ContendedWorkers); hasKey(r.M, mRetries) {
			t.Errorf("s3 %q: has retries per grant, but is not counted", NameRSPerWorker)
		}
		if r, _ := s3.Find(NameRFPerWorker, cfg.ContendedWorkers); !(r.M[mHold] >= float64(cfg.Hold)) {
			t.Errorf("s3: mean hold %v, want at least the %v slept", r.M[mHold], cfg.Hold)
		}
	}

	var text, md bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, names := range want {
		for _, n := range names {
			if !strings.Contains(text.String(), n) || !strings.Contains(md.String(), "| "+n+" |") {
				t.Errorf("row %q missing from the text or Markdown report", n)
			}
		}
	}
	for _, s := range []string{"GOMAXPROCS", "smoke test", "core machine", "## 3. Contended"} {
		if !strings.Contains(text.String()+md.String(), s) {
			t.Errorf("report lacks %q", s)
		}
	}
	if t.Failed() {
		t.Logf("report:\n%s", text.String())
	}
}

func sectionByID(rep *Report, id string) *Section {
	for _, s := range rep.Sections {
		if s.ID == id {
			return s
		}
	}
	return nil
}

// scenarioRows are the rows each scenario must produce.
var scenarioRows = map[string][]string{
	"s1": {NameRFRedlockQ0, NameRFRedlockDefault, NameRFRedlockTel, NameRedsync5, NameRFRueidisQ0, NameRFRueidisQ0Pool},
	"s2": {NameRFSingle, NameBSM, NameRedsync1, NameRFRueidisSingle},
	"s3": {NameRFDefaultRetry, NameRFTunedRetry, NameRSDefaultRetry, NameRSTunedRetry, NameRFWakeOff, NameRFRedlockQ0,
		NameRFPerWorker, NameRFPerWorkerTuned, NameRFPerWorkerOff, NameRSPerWorker, NameRSPerWorkerTuned, NameBound},
	"s4": {NameUnfenced, NameFenced},
	"s5": {NameRFRedlockQ0, NameRFRedlockDefault, NameRedsync5, NameRFSingle, NameBSM, NameRedsync1},
	"s6": {NameRLGCRA, NameRLFixed, NameRedisRate},
	"s7": {NameRFSingleNoAcks, NameRFSingleAcks},
	"s8": {NameRFPerWorker, NameRSPerWorker, NameRSPerWorkerTuned},
}

// slowRetry are the contended rows whose first retry (redsync's default
// delay, 50-250ms) can outlast the smoke run's 100ms window: when the first
// attempts of all workers split the votes, such a row ends with no grant.
var slowRetry = map[string]bool{NameRSDefaultRetry: true, NameRSPerWorker: true}

// idleRatio reports whether the ratio row labelled label compares with a
// slowRetry row that got no grant.
func idleRatio(s *Section, label string) bool {
	for name := range slowRetry {
		if r, ok := s.find(name, 0); ok && r.M[mRate] == 0 && strings.Contains(label, short(name)) {
			return true
		}
	}
	return false
}

func checkRow(t *testing.T, s *Section, r Row) {
	t.Helper()
	pos := func(metric string) {
		if v := r.M[metric]; !(v > 0) {
			t.Errorf("%s %q (%d workers): %s = %v, want > 0 (first error: %s)", s.ID, r.Name, r.Workers, metric, v, r.FirstErr)
		}
	}
	switch s.Kind {
	case kindThroughput:
		pos(mRate)
		pos(mP50)
		pos(mP99)
		if r.M[mP99] < r.M[mP50] {
			t.Errorf("%s %q: p99 %v < p50 %v", s.ID, r.Name, r.M[mP99], r.M[mP50])
		}
		// A loaded machine may time out a request now and then; a broken
		// library fails most cycles.
		if r.M[mErrors] > 0 {
			t.Logf("%s %q (%d workers): %v errors, first: %s", s.ID, r.Name, r.Workers, r.M[mErrors], r.FirstErr)
		}
	case kindContended:
		if slowRetry[r.Name] && r.M[mRate] == 0 {
			t.Logf("%s %q: no grant in the short window (its first retry waits 50-250ms)", s.ID, r.Name)
			return
		}
		pos(mRate)
		pos(mP50)
		pos(mP99)
		pos(mMax)
		pos(mMaxGrants)
		if j := r.M[mJain]; !(j > 0 && j <= 1.0000001) {
			t.Errorf("%s %q: Jain's index %v out of (0, 1]", s.ID, r.Name, j)
		}
		if r.M[mMax] < r.M[mP99] || r.M[mP99] < r.M[mP50] {
			t.Errorf("%s %q: waits not ordered: p50 %v p99 %v max %v", s.ID, r.Name, r.M[mP50], r.M[mP99], r.M[mMax])
		}
	case kindAllocs:
		pos(mAllocs)
		pos(mBytes)
		if r.M[mErrors] > 0 {
			t.Errorf("%s %q: %v errors, first: %s", s.ID, r.Name, r.M[mErrors], r.FirstErr)
		}
	}
}

func hasKey(m map[string]float64, k string) bool {
	_, ok := m[k]
	return ok
}

// checkProfiled checks the one-worker rows' profile figures (profile.go):
// per cycle, the CPU the profile saw adds up to about the client CPU of
// getrusage (together over the section's rows: a short run's profile has few
// samples), and each Redlock cycle on five nodes started goroutines.
func checkProfiled(t *testing.T, s *Section) {
	t.Helper()
	var prof, cli float64
	for _, r := range s.Rows {
		if r.Workers != 1 {
			continue
		}
		g, ok := r.M[mGoroutines]
		if !ok {
			t.Errorf("%s %q: one worker, no profile", s.ID, r.Name)
			continue
		}
		// redsync starts a goroutine per node and call: the count works if it
		// sees them (redfence's senders wait for the next batch instead).
		if r.Peer && r.Nodes == redlockNodes && !(g >= 1) {
			t.Errorf("%s %q: %v goroutines started per cycle, want at least one", s.ID, r.Name, g)
		}
		for _, k := range cpuKinds {
			prof += r.M[k.key]
		}
		cli += r.M[mCliCPU]
	}
	if cli > 0 && !(prof > 0.05*cli && prof < 2*cli) {
		t.Errorf("%s: the one-worker profiles saw %v per cycle against getrusage's %v", s.ID, time.Duration(prof), time.Duration(cli))
	}
}
