package main

// The soak's record (-json) and the table docs/chaos.md shows from it.

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/redfence/redfence/chaos/internal/harness"
)

// soakRecord is what one soak command writes with -json: how it was run,
// from which commit, on what machine, and each run's result. make soak
// writes one per backend and mode under docs/soak/, and make chaos puts
// them into docs/chaos.md (soakRecordsDoc).
type soakRecord struct {
	Command string    `json:"command"`
	Commit  string    `json:"commit"`
	Machine string    `json:"machine"`
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended"`
	Runs    []soakRun `json:"runs"`
}

// soakRun is one run's result and, if it could not be carried out, why.
type soakRun struct {
	harness.SoakResult
	Error string `json:"error,omitempty"`
}

// buildCommit is the commit this binary was built from (go build stamps
// it; "-dirty" when the tree had changes), or "unknown" (go run).
func buildCommit() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value[:min(len(s.Value), 7)]
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "-dirty"
		}
	}
	if rev == "" {
		return "unknown"
	}
	return rev + dirty
}

// withoutFlag returns args without the flag name and its value (given as
// -name v, --name v, -name=v or --name=v): the command a record shows is
// the one that reproduces the runs, not where it wrote them.
func withoutFlag(args []string, name string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := strings.TrimPrefix(strings.TrimPrefix(args[i], "-"), "-")
		switch {
		case a == name && args[i] != a:
			i++ // and its value
		case strings.HasPrefix(a, name+"=") && args[i] != a:
		default:
			out = append(out, args[i])
		}
	}
	return out
}

// machine describes where the soak ran.
func machine() string {
	return fmt.Sprintf("%s/%s, %d CPUs, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())
}

// writeSoakRecord writes rec to path as JSON, creating its directory; the
// file is replaced whole (written aside, then renamed).
func writeSoakRecord(path string, rec soakRecord) error {
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return fmt.Errorf("soak record: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("soak record: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("soak record: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("soak record: %w", err)
	}
	return nil
}

// readSoakRecords reads every *.json record in dir, process backend first,
// then safe before unsafe. A missing dir is no records.
func readSoakRecords(dir string) ([]soakRecord, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	var recs []soakRecord
	for _, name := range names {
		data, err := os.ReadFile(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("soak record: %w", err)
		}
		var rec soakRecord
		if err := json.Unmarshal(data, &rec); err != nil {
			return nil, fmt.Errorf("soak record %s: %w", name, err)
		}
		if len(rec.Runs) == 0 {
			return nil, fmt.Errorf("soak record %s: no runs", name)
		}
		recs = append(recs, rec)
	}
	rank := func(r soakRecord) int {
		b := 0
		if r.Runs[0].Backend != backendProcess {
			b = 2
		}
		if r.Runs[0].Unsafe {
			b++
		}
		return b
	}
	slices.SortStableFunc(recs, func(a, b soakRecord) int { return cmp.Compare(rank(a), rank(b)) })
	return recs, nil
}

// soakRecordsDoc renders the records as docs/chaos.md's recorded soak
// runs: per backend, how each command ran and one table of its runs.
func soakRecordsDoc(recs []soakRecord) (string, error) {
	var b strings.Builder
	b.WriteString("\n### Recorded soak runs\n\n")
	if len(recs) == 0 {
		b.WriteString("None recorded yet: `make soak` records its runs in docs/soak/ and `make chaos` shows them here.\n")
		return b.String(), nil
	}
	b.WriteString("The last `make soak` runs recorded in docs/soak/ (each command's `-json`; scripts/soak.sh), " +
		"pasted by `make chaos` as they were written. docs/soak.md has earlier runs and notes on them.\n")
	for i := 0; i < len(recs); {
		backend := recs[i].Runs[0].Backend
		var results []harness.SoakResult
		var errs []string
		fmt.Fprintf(&b, "\n**%s backend.**\n\n", backend)
		for ; i < len(recs) && recs[i].Runs[0].Backend == backend; i++ {
			r := recs[i]
			fmt.Fprintf(&b, "- `%s` at commit %s, %s to %s (%s)\n", r.Command, r.Commit,
				r.Started.UTC().Format("2006-01-02 15:04"), r.Ended.UTC().Format("15:04 MST"), r.Machine)
			for _, run := range r.Runs {
				results = append(results, run.SoakResult)
				if run.Error != "" {
					errs = append(errs, fmt.Sprintf("%s %s %s: %s", run.Backend, harness.SoakConfig(run.Lock, run.Sentinel), run.Mode(), run.Error))
				}
			}
		}
		b.WriteString("\n")
		if err := harness.WriteSoakMarkdown(&b, results); err != nil {
			return "", err
		}
		for _, e := range errs {
			fmt.Fprintf(&b, "\nError: %s\n", e)
		}
	}
	return b.String(), nil
}
