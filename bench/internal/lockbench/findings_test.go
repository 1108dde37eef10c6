package lockbench

import (
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
			{Name: NameRFRedlockQ0, Workers: 64, M: map[string]float64{mRate: 1000, mP50: 4e6, mCliCPU: 70 * us, mSrvCPU: 60 * us}},
			{Name: NameRFRueidisQ0, Workers: 64, M: map[string]float64{mRate: 1200, mP50: 3e6}},
			{Name: NameRFRedlockDefault, Workers: 64, M: map[string]float64{mRate: 760, mCliCPU: 70 * us, mSrvCPU: 100 * us}},
			{Name: NameRFRedlockDefault, Workers: 1, M: map[string]float64{mP50: 250 * us}},
		}},
		{ID: "s4", Rows: []Row{
			{Name: NameUnfenced, Workers: 64, M: map[string]float64{mP50: 5e6, mCliCPU: 60 * us, mSrvCPU: 90 * us}},
			{Name: NameFenced, Workers: 64, M: map[string]float64{mP50: 8e6, mCliCPU: 90 * us, mSrvCPU: 150 * us}},
		}},
		{ID: "s3", Rows: []Row{
			{Name: NameRFPerWorker, Workers: 16, M: map[string]float64{mRate: 300, mP99: 200e6, mHold: 1250 * us, mRetries: 4.5}},
			{Name: NameRSPerWorkerTuned, Workers: 16, M: map[string]float64{mRate: 400, mP99: 150e6, mRetries: 8.25}},
		}},
	}}
	md := rep.findingsMarkdown()
	for _, want := range []string{
		"predicts a ratio of 0.76; the measured one is 0.76", // (70+60)/(70+100)
		"40µs more per cycle, about 8.00µs per node",
		"a ceiling of 667 grants/s", // 1 / (1.25ms + 0.25ms)
		"is 800 grants/s: above the ceiling",
		"redfence 4.50, redsync 8.25",
		"predicts a p50 ratio of 1.60; the measured one is 1.60", // (90+150)/(60+90), 8ms/5ms
		"The nodes' extra 60µs per cycle",
		"over rueidis against over go-redis: 64 worker(s): cycles/s 1.20x, p50 0.75x (the first faster)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("findings lack %q:\n%s", want, md)
		}
	}
	// Twice redsync's rate under the ceiling: reachable in principle.
	rep.Sections[2].Rows[1].M[mRate] = 200
	if md := rep.findingsMarkdown(); !strings.Contains(md, "is 400 grants/s: below the ceiling") {
		t.Errorf("no below-the-ceiling verdict:\n%s", md)
	}
	// A zero divisor (redsync's rate) leaves its paragraph out.
	rep.Sections[2].Rows[1].M[mRate] = 0
	if md := rep.findingsMarkdown(); strings.Contains(md, "Contention across clients") {
		t.Errorf("a paragraph dividing by a zero rate:\n%s", md)
	}
	// Without the rows, no paragraph quotes them.
	if md := (&Report{}).findingsMarkdown(); strings.Contains(md, "Contention across clients") || strings.Contains(md, "defaults against quarantine off") || strings.Contains(md, "fenced against unfenced") {
		t.Errorf("paragraphs without their rows:\n%s", md)
	}
}
