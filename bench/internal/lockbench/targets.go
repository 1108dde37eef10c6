package lockbench

import (
	"fmt"
	"slices"
	"strings"
)

// target is one of the performance goals the benchmark checks (issues 6 and
// 17 of the project): a ratio between two rows, compared with a bound.
type target struct {
	scenario, what string
	num, den       string // row names
	workers        int    // 0: the contended or allocation section's rows
	metric         string
	atLeast        bool // the ratio must be >= bound; otherwise <= (or < with strict)
	strict         bool
	bound          float64
	// aged: the target is about nodes older than the restart quarantine
	// (redlock's defaults on their fast path); a run whose nodes were
	// younger (-node-age below it) reports the ratio but no verdict.
	aged bool
	// ceiling names the row that bounds num's metric for any library (the
	// scenario run with no server at all); "": none.
	ceiling string
}

// goal is a target with its fields in order, so that the table below reads
// as one line per goal.
func goal(scenario, what, num, den string, workers int, metric string, atLeast, strict bool, bound float64) target {
	return target{scenario: scenario, what: what, num: num, den: den, workers: workers, metric: metric, atLeast: atLeast, strict: strict, bound: bound}
}

func (t target) needsAge() target { t.aged = true; return t }

// cappedBy names the row no library's num can exceed on this machine.
func (t target) cappedBy(row string) target { t.ceiling = row; return t }

var targets = []target{
	goal("s1", "64 workers: cycles/s at least 4x redsync (quarantine off)", NameRFRedlockQ0, NameRedsync5, 64, mRate, true, false, 4),
	goal("s1", "64 workers: cycles/s at least 4x redsync (defaults)", NameRFRedlockDefault, NameRedsync5, 64, mRate, true, false, 4).needsAge(),
	goal("s1", "64 workers: defaults within 10% of quarantine off (cycles/s)", NameRFRedlockDefault, NameRFRedlockQ0, 64, mRate, true, false, 0.9).needsAge(),
	goal("s1", "1 worker: p50 no worse than redsync (quarantine off)", NameRFRedlockQ0, NameRedsync5, 1, mP50, false, false, 1),
	goal("s1", "1 worker: p50 no worse than redsync (defaults)", NameRFRedlockDefault, NameRedsync5, 1, mP50, false, false, 1).needsAge(),
	goal("s2", "64 workers: cycles/s at least 1.5x bsm/redislock", NameRFSingle, NameBSM, 64, mRate, true, false, 1.5),
	goal("s2", "1 worker: p50 no worse than bsm/redislock", NameRFSingle, NameBSM, 1, mP50, false, false, 1),
	goal("s3", "p99 wait at most a fifth of redsync's default", NameRFDefaultRetry, NameRSDefaultRetry, 0, mP99, false, false, 0.2),
	goal("s3", "grants/s at least redsync's default", NameRFDefaultRetry, NameRSDefaultRetry, 0, mRate, true, false, 1),
	goal("s3", "no worker starved: Jain's index at least redsync's", NameRFDefaultRetry, NameRSDefaultRetry, 0, mJain, true, false, 1),
	goal("s3", "one Client per worker: grants/s at least 2x redsync's (1-5ms retry)", NameRFPerWorker, NameRSPerWorkerTuned, 0, mRate, true, false, 2).cappedBy(NameBound),
	goal("s3", "one Client per worker: p99 wait at most half redsync's (1-5ms retry)", NameRFPerWorker, NameRSPerWorkerTuned, 0, mP99, false, false, 0.5),
	goal("s4", "1 worker: fenced p50 at most 1.6x unfenced", NameFenced, NameUnfenced, 1, mP50, false, false, 1.6),
	goal("s4", "64 workers: fenced p50 at most 1.6x unfenced", NameFenced, NameUnfenced, 64, mP50, false, false, 1.6),
	goal("s5", "redlock: fewer allocations per cycle than redsync (quarantine off)", NameRFRedlockQ0, NameRedsync5, 0, mAllocs, false, true, 1),
	goal("s5", "redlock: fewer allocations per cycle than redsync (defaults)", NameRFRedlockDefault, NameRedsync5, 0, mAllocs, false, true, 1),
	goal("s5", "single: allocations per cycle no more than bsm/redislock", NameRFSingle, NameBSM, 0, mAllocs, false, false, 1),
	goal("s6", "1 worker: GCRA calls/s at least redis_rate's", NameRLGCRA, NameRedisRate, 1, mRate, true, false, 1),
	goal("s6", "64 workers: GCRA calls/s at least redis_rate's", NameRLGCRA, NameRedisRate, 64, mRate, true, false, 1),
}

// find returns the row named name with the given worker count (0: any).
func (s *Section) find(name string, workers int) (Row, bool) {
	for _, r := range s.Rows {
		if r.Name == name && (workers == 0 || r.Workers == workers) {
			return r, true
		}
	}
	return Row{}, false
}

// meets reports whether ratio meets the target's bound, and the operator.
func (tg target) meets(ratio float64) (bool, string) {
	switch {
	case tg.atLeast:
		return ratio >= tg.bound, ">="
	case tg.strict:
		return ratio < tg.bound, "<"
	}
	return ratio <= tg.bound, "<="
}

// targetResult is one target checked against a run: the ratio of the
// medians, and the ratios round by round (rounds ran the two rows back to
// back; nil where the metric has none).
type targetResult struct {
	target
	ratio  float64
	rounds []float64
	met    bool
	op     string
	// need is what the numerator's metric must reach (bound times the
	// denominator's) and capped the ceiling row's figure (for a rate, or
	// its holds back to back, if more), when the target has a ceiling row
	// that ran; unreachable: need is above it, so no library could meet the
	// target in this run.
	need, capped float64
	unreachable  bool
}

// roundsMet returns how many rounds met the bound.
func (t targetResult) roundsMet() int {
	n := 0
	for _, x := range t.rounds {
		if ok, _ := t.meets(x); ok {
			n++
		}
	}
	return n
}

// checkTargets checks every target whose rows ran.
func (r *Report) checkTargets() []targetResult {
	var out []targetResult
	for _, tg := range targets {
		sec := r.sectionOf(tg.scenario)
		if sec == nil {
			continue
		}
		a, ok1 := sec.find(tg.num, tg.workers)
		b, ok2 := sec.find(tg.den, tg.workers)
		if !ok1 || !ok2 || b.M[tg.metric] == 0 {
			continue
		}
		res := targetResult{target: tg, ratio: a.M[tg.metric] / b.M[tg.metric]}
		res.met, res.op = tg.meets(res.ratio)
		if c, ok := sec.find(tg.ceiling, tg.workers); tg.ceiling != "" && ok && tg.atLeast {
			res.need, res.capped = tg.bound*b.M[tg.metric], c.M[tg.metric]
			if tg.metric == mRate {
				res.capped = topRate(c)
			}
			res.unreachable = res.need > res.capped
		}
		if ra, rb := a.Rounds[tg.metric], b.Rounds[tg.metric]; len(ra) > 1 && len(ra) == len(rb) {
			for i := range ra {
				if rb[i] > 0 {
					res.rounds = append(res.rounds, ra[i]/rb[i])
				}
			}
		}
		out = append(out, res)
	}
	return out
}

// targetsTable is the targets section's table.
func (r *Report) targetsTable() table {
	t := table{header: []string{"scenario", "target", "ratio", "bound", "met", "rounds: ratio range, met"}}
	for _, res := range r.checkTargets() {
		verdict := "yes"
		switch {
		case res.aged && r.Config.NodeAge < defaultQuarantine:
			verdict = "n/a: nodes younger than the quarantine (-node-age)"
		case !res.met && res.unreachable:
			verdict = fmt.Sprintf("**no**: unreachable in this run (it needs %.0f; with no server at all, at most %.0f)", res.need, res.capped)
		case !res.met:
			verdict = "**no**"
		}
		rounds := "-"
		if len(res.rounds) > 0 {
			rounds = fmt.Sprintf("%.2f-%.2f, %d of %d", slices.Min(res.rounds), slices.Max(res.rounds), res.roundsMet(), len(res.rounds))
		}
		t.rows = append(t.rows, []string{res.scenario, res.what, fmt.Sprintf("%.2f", res.ratio), fmt.Sprintf("%s %g", res.op, res.bound), verdict, rounds})
	}
	return t
}

// targetsMarkdown is the report's targets section, or "" when no target's
// rows ran.
func (r *Report) targetsMarkdown() string {
	t := r.targetsTable()
	if len(t.rows) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n## Targets\n\n")
	b.WriteString("The project's performance goals, checked against the medians of this run (ratios as in the sections below; " +
		"one run on a shared 2-core machine, so a ratio near its bound can land on either side in another run). " +
		"The last column gives the ratio of each round (the two rows ran back to back in every round) and in how many rounds it met the bound.\n\n")
	writeMarkdownTable(&b, t)
	return b.String()
}
