package lockbench

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// targetVerdicts returns the targets table of rep as target -> "ratio bound
// verdict".
func targetVerdicts(rep *Report) map[string]string {
	got := map[string]string{}
	for _, row := range rep.targetsTable().rows {
		got[row[1]] = row[2] + " " + row[3] + " " + row[4]
	}
	return got
}

func TestTargetsTable(t *testing.T) {
	rep := &Report{Config: Config{NodeAge: 62 * time.Second}, Sections: []*Section{
		{ID: "s1", Rows: []Row{
			{Name: NameRFRedlockQ0, Workers: 64, M: map[string]float64{mRate: 400, mP50: 1}},
			{Name: NameRedsync5, Workers: 64, M: map[string]float64{mRate: 100, mP50: 1}},
			{Name: NameRFRedlockDefault, Workers: 64, M: map[string]float64{mRate: 360}},
		}},
		{ID: "s3", Rows: []Row{
			{Name: NameRFPerWorker, Workers: 16, M: map[string]float64{mRate: 600, mP99: 50e6}},
			{Name: NameRSPerWorkerTuned, Workers: 16, M: map[string]float64{mRate: 400, mP99: 100e6}},
		}},
		{ID: "s5", Rows: []Row{
			{Name: NameRFRedlockQ0, Workers: 1, M: map[string]float64{mAllocs: 142}},
			{Name: NameRedsync5, Workers: 1, M: map[string]float64{mAllocs: 142}},
			{Name: NameRFSingle, Workers: 1, M: map[string]float64{mAllocs: 34}},
			{Name: NameBSM, Workers: 1, M: map[string]float64{mAllocs: 34}},
		}},
		{ID: "s6", Rows: []Row{
			{Name: NameRLGCRA, Workers: 1, M: map[string]float64{mRate: 99}},
			{Name: NameRedisRate, Workers: 1, M: map[string]float64{mRate: 100}},
			{Name: NameRLGCRA, Workers: 64, M: map[string]float64{mRate: 100}},
			{Name: NameRedisRate, Workers: 64, M: map[string]float64{mRate: 100}},
		}},
	}}
	want := map[string]string{
		// >= at the bound is met, just under it is not.
		"64 workers: cycles/s at least 4x redsync (quarantine off)": "4.00 >= 4 yes",
		"64 workers: cycles/s at least 4x redsync (defaults)":       "3.60 >= 4 **no**",
		// within 10%: 360/400 = 0.9 is met.
		"64 workers: defaults within 10% of quarantine off (cycles/s)": "0.90 >= 0.9 yes",
		// strict < is not met at equality; <= is.
		"redlock: fewer allocations per cycle than redsync (quarantine off)": "1.00 < 1 **no**",
		"single: allocations per cycle no more than bsm/redislock":           "1.00 <= 1 yes",
		// the cross-client contention targets: 1.5x is short of 2x, the
		// p99 is exactly half.
		"one Client per worker: grants/s at least 2x redsync's (1-5ms retry)":  "1.50 >= 2 **no**",
		"one Client per worker: p99 wait at most half redsync's (1-5ms retry)": "0.50 <= 0.5 yes",
		"1 worker: GCRA calls/s at least redis_rate's":                         "0.99 >= 1 **no**",
		"64 workers: GCRA calls/s at least redis_rate's":                       "1.00 >= 1 yes",
	}
	got := targetVerdicts(rep)
	if len(got) != len(want) {
		t.Errorf("got %d rows, want %d: %v", len(got), len(want), got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
	if md := rep.targetsMarkdown(); !strings.Contains(md, "## Targets") {
		t.Errorf("no targets section in %q", md)
	}
	if (&Report{}).targetsMarkdown() != "" {
		t.Error("a targets section without rows")
	}

	// Nodes younger than the quarantine: the defaults' targets get no
	// verdict, the others keep theirs.
	rep.Config.NodeAge = 0
	got = targetVerdicts(rep)
	for k, v := range map[string]string{
		"64 workers: defaults within 10% of quarantine off (cycles/s)": "0.90 >= 0.9 n/a: nodes younger than the quarantine (-node-age)",
		"64 workers: cycles/s at least 4x redsync (quarantine off)":    "4.00 >= 4 yes",
	} {
		if got[k] != v {
			t.Errorf("young nodes: %s: got %q, want %q", k, got[k], v)
		}
	}

	// The cross-client target against the run with no server: 2x redsync
	// is 800 grants/s, above a bound of 750 whose holds back to back would
	// make 769 (no library could meet it), below one of 801, or of 750
	// with holds back to back making 833 (missed, and reachable).
	const cross = "one Client per worker: grants/s at least 2x redsync's (1-5ms retry)"
	s3 := rep.sectionOf("s3")
	bound := map[string]float64{mRate: 750, mHold: 1.3e6}
	s3.Rows = append(s3.Rows, Row{Name: NameBound, Workers: 16, M: bound})
	if got, want := targetVerdicts(rep)[cross], "1.50 >= 2 **no**: unreachable in this run (it needs 800; with no server at all, at most 769)"; got != want {
		t.Errorf("bound 750: got %q, want %q", got, want)
	}
	bound[mHold] = 1.2e6
	if got, want := targetVerdicts(rep)[cross], "1.50 >= 2 **no**"; got != want {
		t.Errorf("bound 750, holds back to back 833: got %q, want %q", got, want)
	}
	bound[mRate], bound[mHold] = 801, 0
	if got, want := targetVerdicts(rep)[cross], "1.50 >= 2 **no**"; got != want {
		t.Errorf("bound 801: got %q, want %q", got, want)
	}
	// A met target stays met whatever the bound says.
	s3.Rows[0].M[mRate] = 800
	bound[mRate] = 700
	if got, want := targetVerdicts(rep)[cross], "2.00 >= 2 yes"; got != want {
		t.Errorf("met under a lower bound: got %q, want %q", got, want)
	}
}

// TestEveryTargetHasItsRows checks that each target names rows its scenario
// produces, so that a renamed row cannot silently drop a target from the
// table.
func TestEveryTargetHasItsRows(t *testing.T) {
	for _, tg := range targets {
		for _, name := range []string{tg.num, tg.den, tg.ceiling} {
			if name == "" {
				continue
			}
			if !slices.Contains(scenarioRows[tg.scenario], name) {
				t.Errorf("target %q: %s has no row %q", tg.what, tg.scenario, name)
			}
		}
	}
}

// A target's rounds are its ratio round by round (the rows' values paired
// by round), with how many met the bound; a target missed by the medians
// but met in some round is listed as within the run's noise.
func TestTargetRounds(t *testing.T) {
	rep := &Report{Config: Config{NodeAge: 62 * time.Second}, Sections: []*Section{
		{ID: "s1", Rows: []Row{
			{Name: NameRFRedlockQ0, Workers: 64, M: map[string]float64{mRate: 390},
				Rounds: map[string][]float64{mRate: {380, 390, 500}}},
			{Name: NameRedsync5, Workers: 64, M: map[string]float64{mRate: 100},
				Rounds: map[string][]float64{mRate: {100, 100, 110}}},
		}},
		{ID: "s6", Rows: []Row{ // rounds of different lengths: no per-round ratio
			{Name: NameRLGCRA, Workers: 64, M: map[string]float64{mRate: 90}, Rounds: map[string][]float64{mRate: {90, 91}}},
			{Name: NameRedisRate, Workers: 64, M: map[string]float64{mRate: 100}, Rounds: map[string][]float64{mRate: {100}}},
		}},
	}}
	rows := map[string][]string{}
	for _, row := range rep.targetsTable().rows {
		rows[row[1]] = row
	}
	// 380/100, 390/100, 500/110: only the last meets 4x.
	if got := rows["64 workers: cycles/s at least 4x redsync (quarantine off)"]; got[4] != "**no**" || got[5] != "3.80-4.55, 1 of 3" {
		t.Errorf("s1 row %q", got)
	}
	if got := rows["64 workers: GCRA calls/s at least redis_rate's"]; got[5] != "-" {
		t.Errorf("s6 row %q", got)
	}
	md := rep.findingsMarkdown()
	if want := "- s1, 64 workers: cycles/s at least 4x redsync (quarantine off): 3.90 (>= 4); rounds 3.80 to 4.55, 1 of 3 met."; !strings.Contains(md, want) {
		t.Errorf("findings lack %q:\n%s", want, md)
	}
	if strings.Contains(md, "GCRA calls/s at least redis_rate's: 0.90") {
		t.Errorf("a target without rounds listed as within noise:\n%s", md)
	}
	// Missed in every round: not within noise.
	rep.Sections[0].Rows[0].Rounds[mRate][2] = 430
	if md := rep.findingsMarkdown(); strings.Contains(md, "Missed by the medians, met in some rounds") {
		t.Errorf("a target missed in every round listed as within noise:\n%s", md)
	}
}
