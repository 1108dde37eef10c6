package lockbench

import (
	"bytes"
	"context"
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
	cfg.AllocCycles = 50
	cfg.Command = "smoke test"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"s1": {NameRFRedlockQ0, NameRFRedlockDefault, NameRFRedlockTel, NameRedsync5},
		"s2": {NameRFSingle, NameBSM, NameRedsync1},
		"s3": {NameRFDefaultRetry, NameRFTunedRetry, NameRSDefaultRetry, NameRSTunedRetry, NameRFWakeOff, NameRFRedlockQ0, NameRFPerWorker, NameRFPerWorkerOff, NameRSPerWorker},
		"s4": {NameUnfenced, NameFenced},
		"s5": {NameRFRedlockQ0, NameRFRedlockDefault, NameRedsync5, NameRFSingle, NameBSM, NameRedsync1},
		"s6": {NameRLGCRA, NameRLFixed, NameRedisRate},
		"s7": {NameRFSingleNoAcks, NameRFSingleAcks},
	}
	if len(rep.Sections) != len(want) {
		t.Fatalf("got %d sections, want %d", len(rep.Sections), len(want))
	}
	for _, s := range rep.Sections {
		names := want[s.ID]
		workers := cfg.Workers
		switch s.Kind {
		case kindContended:
			workers = []int{cfg.ContendedWorkers}
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
		main, ratios := s.tables()
		if len(main.rows) != len(s.Rows) || len(ratios.rows) == 0 {
			t.Errorf("%s: %d table rows for %d results, %d ratio rows", s.ID, len(main.rows), len(s.Rows), len(ratios.rows))
		}
		for _, r := range ratios.rows {
			for _, c := range r[1:] {
				if c == "-" || c == "0.00" {
					t.Errorf("%s: ratio row %q has %q", s.ID, r[0], c)
				}
			}
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
