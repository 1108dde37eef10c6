package lockbench

import (
	"strings"
	"testing"
)

func TestTargetsTable(t *testing.T) {
	rep := &Report{Sections: []*Section{
		{ID: "s1", Rows: []Row{
			{Name: NameRFRedlockQ0, Workers: 64, M: map[string]float64{mRate: 400, mP50: 1}},
			{Name: NameRedsync5, Workers: 64, M: map[string]float64{mRate: 100, mP50: 1}},
			{Name: NameRFRedlockDefault, Workers: 64, M: map[string]float64{mRate: 399}},
		}},
		{ID: "s5", Rows: []Row{
			{Name: NameRFRedlockQ0, Workers: 1, M: map[string]float64{mAllocs: 142}},
			{Name: NameRedsync5, Workers: 1, M: map[string]float64{mAllocs: 142}},
		}},
	}}
	got := map[string]string{}
	for _, row := range rep.targetsTable().rows {
		got[row[1]] = row[2] + " " + row[3] + " " + row[4]
	}
	want := map[string]string{
		"64 workers: cycles/s at least 4x redsync (quarantine off)": "4.00 >= 4 yes",
		"64 workers: cycles/s at least 4x redsync (defaults)":       "3.99 >= 4 **no**",
		"fewer allocations per cycle than redsync (quarantine off)": "1.00 < 1 **no**",
	}
	if len(got) != len(want) {
		t.Fatalf("got rows %v, want %v", got, want)
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
}
