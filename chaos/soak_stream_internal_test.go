package chaos

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/chaos/internal/harness"
	"github.com/redfence/redfence/fencing"
)

// TestHistoryDrain checks that drains taken while operations are invoked
// and completed concurrently hand out every operation once, in Ops order,
// each at or before the watermark it came with, and only completed ones.
func TestHistoryDrain(t *testing.T) {
	h := NewHistory()
	var (
		drained []Op
		marks   []time.Duration
	)
	halt := InBackground(1, func() {
		ops, w := h.drain()
		for _, op := range ops {
			assert.LessOrEqual(t, op.Call, w, "op %d is called after its watermark", op.ID)
			assert.NotEqual(t, Inf, op.Return, "op %d drained before it completed", op.ID)
		}
		if len(marks) > 0 && len(ops) > 0 {
			assert.GreaterOrEqual(t, ops[0].Call, marks[len(marks)-1], "op %d is called before the last watermark", ops[0].ID)
		}
		drained = append(drained, ops...)
		marks = append(marks, w)
	})
	var clients sync.WaitGroup
	for c := range 4 {
		clients.Go(func() {
			for i := range 500 {
				p := h.Invoke(c, Acquire)
				if i%7 == 0 {
					time.Sleep(time.Duration(i%3) * time.Microsecond) // a slow operation holds the watermark back
				}
				op := p.Complete(OK, WithToken(fencing.Token(i+1)))
				assert.Equal(t, op, p.Complete(Fail), "a second Complete returns the first, drained or not")
			}
		})
	}
	clients.Wait()
	halt()
	ops, _ := h.drain()
	drained = append(drained, ops...)
	require.Len(t, drained, 2000)
	for i, op := range drained {
		assert.Equal(t, i, op.ID, "drains hand out IDs in order")
		if i > 0 {
			assert.LessOrEqual(t, drained[i-1].Call, op.Call, "in Call order")
		}
	}
	assert.Empty(t, h.Ops(), "nothing is kept once drained")
}

// randomSoakHistory builds a history like a soak's: grants (some
// overlapping, some repeating or lowering tokens), failed acquires,
// releases, fenced writes accepted, rejected or of unknown outcome, and
// control increments, sorted by Call with IDs in that order.
func randomSoakHistory(rng *rand.Rand, n int) []Op {
	ms := func(x int) time.Duration { return time.Duration(x) * time.Millisecond }
	var ops []Op
	at, token := 0, 1000
	for len(ops) < n {
		at += rng.IntN(40)
		call := at
		ret := call + 1 + rng.IntN(30)
		switch rng.IntN(6) {
		case 0, 1, 2: // a grant, maybe released, maybe writing
			token += rng.IntN(5) - 1 // sometimes repeats or goes down
			a := Op{ID: len(ops), Client: rng.IntN(4), Kind: Acquire, Call: ms(call), Return: ms(ret), Status: OK,
				Token: fencing.Token(token), ValidUntil: ms(ret + 20 + rng.IntN(200)), Lease: -1}
			if rng.IntN(10) == 0 {
				a.ValidUntil = a.Return // expired at return
			}
			ops = append(ops, a)
			if rng.IntN(3) > 0 {
				w := ret + rng.IntN(20)
				st, note := OK, ""
				switch rng.IntN(4) {
				case 0:
					st, note = Fail, NoteStale
				case 1:
					st = Unknown
				}
				ops = append(ops, Op{Client: a.Client, Kind: FencedWrite, Call: ms(w), Return: ms(w + 1 + rng.IntN(15)),
					Status: st, Note: note, Token: a.Token, Lease: a.ID})
			}
			if rng.IntN(4) > 0 {
				r := ret + rng.IntN(250)
				ops = append(ops, Op{Client: a.Client, Kind: Release, Call: ms(r), Return: ms(r + 1 + rng.IntN(10)), Status: OK,
					Lease: a.ID, Token: a.Token})
			}
		case 3:
			st := Fail
			if rng.IntN(5) == 0 {
				st = Unknown
			}
			ops = append(ops, Op{Client: rng.IntN(4), Kind: Acquire, Call: ms(call), Return: ms(ret + rng.IntN(1500)), Status: st, Lease: -1})
		case 4:
			ops = append(ops, Op{Client: rng.IntN(4), Kind: UnfencedWrite, Call: ms(call), Return: ms(ret), Status: OK, Lease: -1})
		default:
			ops = append(ops, Op{Client: NemesisClient, Kind: Fault, Call: ms(call), Return: ms(ret + rng.IntN(900)), Status: OK,
				Lease: -1, Note: "fault"})
		}
	}
	// Sort by Call and renumber, keeping the Lease references.
	for i := range ops {
		ops[i].ID = i
	}
	slices.SortStableFunc(ops, func(a, b Op) int { return cmp.Compare(a.Call, b.Call) })
	newID := map[int]int{}
	for i := range ops {
		newID[ops[i].ID] = i
		ops[i].ID = i
	}
	for i := range ops {
		if ops[i].Lease >= 0 {
			ops[i].Lease = newID[ops[i].Lease]
		}
	}
	return ops
}

// streamOps feeds ops to a new checker in chunks cut at random, each with
// the watermark a drain would give (the Call of the first operation not
// yet fed), then finishes.
func streamOps(t *testing.T, rng *rand.Rand, ops []Op, window time.Duration) *soakChecker {
	c := newSoakChecker(0, harness.SoakOptions{Window: window, CheckTimeout: 5 * time.Second}, nil)
	for i := 0; i < len(ops); {
		j := min(len(ops), i+rng.IntN(8))
		w := Inf
		if j < len(ops) {
			w = ops[j].Call
		}
		require.NoError(t, c.feed(ops[i:j], w))
		i = j
	}
	require.NoError(t, c.feed(nil, Inf))
	return c
}

// TestStreamingChecksAgreeWithBatch checks, on random histories fed in
// random chunks, that the streaming checks find what the batch checks of
// the whole history find: the same double grants, fenced violations,
// token regressions (and a repeated token whenever tokenProblems counts
// one), mutex-model windows and statistics.
func TestStreamingChecksAgreeWithBatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 7))
	seen := map[string]int{}
	for i := range 400 {
		ops := randomSoakHistory(rng, 10+rng.IntN(60))
		window := []time.Duration{50 * time.Millisecond, 300 * time.Millisecond, time.Second}[i%3]
		c := streamOps(t, rng, ops, window)
		name := fmt.Sprintf("history %d", i)

		overlaps := Overlaps(ops)
		assert.Equal(t, len(overlaps), c.overlaps.count, name)
		if len(overlaps) <= maxExamples {
			assert.ElementsMatch(t, overlaps, c.overlaps.examples(), name)
		}
		fenced := FencedViolations(ops)
		assert.Equal(t, len(fenced), c.fenced.count, name)
		if len(fenced) <= maxExamples {
			assert.ElementsMatch(t, fenced, c.fenced.examples, name)
		}
		dups, regr, _ := tokenProblems(ops)
		assert.Equal(t, regr, c.tokens.regr, name)
		assert.LessOrEqual(t, c.tokens.dups, dups, name)
		assert.Equal(t, dups+regr > 0, c.tokens.dups+c.tokens.regr > 0, name)

		windows := mutexWindows(ops, window)
		verdicts := windowVerdicts(windows, 5*time.Second)
		var failing [][]Op
		for k, v := range verdicts {
			if v == Violation && len(failing) < soakArtifactWindows {
				failing = append(failing, windows[k])
			}
		}
		assert.Equal(t, len(windows), c.windows.checked, name)
		assert.Equal(t, failing, c.windows.failing, name)

		end := ops[len(ops)-1].Return + time.Second
		st := computeStats(ops, 0, end, defaultAcquireTimeout, scenarioOverrunSlack)
		assert.Equal(t, []int{len(ops), st.Grants, st.Overran, st.ControlIncrements},
			[]int{c.stats.ops, c.stats.grants, c.stats.overran, c.stats.controlIncrements}, name)
		assert.InDelta(t, st.Availability(availabilityWindow), c.stats.availability(end), 1e-9, name)
		for _, p := range []float64{50, 99} {
			want, got := computeStats(ops, 0, end, defaultAcquireTimeout, scenarioOverrunSlack), c.stats.latency.percentile(p)
			exact := map[float64]time.Duration{50: want.P50, 99: want.P99}[p]
			assert.InDelta(t, float64(exact), float64(got), float64(exact)/100+float64(time.Microsecond), "%s p%v", name, p)
		}
		for k, n := range map[string]int{"overlap": len(overlaps), "fenced": len(fenced), "token": dups + regr, "window": len(failing)} {
			if n > 0 {
				seen[k]++
			}
		}
	}
	for _, k := range []string{"overlap", "fenced", "token", "window"} {
		assert.Greater(t, seen[k], 20, "the random histories exercise %s violations", k)
	}
}

func TestLatencyHistogram(t *testing.T) {
	var h latencyHist
	assert.Zero(t, h.percentile(50))
	var exact []time.Duration
	rng := rand.New(rand.NewPCG(3, 4))
	for range 5000 {
		d := time.Duration(rng.ExpFloat64() * float64(20*time.Millisecond))
		h.add(d)
		exact = append(exact, d)
	}
	slices.Sort(exact)
	for _, p := range []float64{1, 50, 90, 99, 100} {
		want := percentile(exact, p)
		assert.InDelta(t, float64(want), float64(h.percentile(p)), float64(want)/128+float64(time.Microsecond), "p%v", p)
	}
	values := []uint64{0, 1, 255, 256, 257, 1000, 1 << 20, 1<<40 + 12345}
	for range 1000 {
		values = append(values, rng.Uint64N(1<<rng.IntN(50)))
	}
	for _, us := range values {
		i := histIndex(us)
		assert.Less(t, i, histBuckets)
		v := histValue(i)
		assert.InDelta(t, float64(us), float64(v), float64(us)/256+1, "%dµs: within half a bucket", us)
		assert.Equal(t, i, histIndex(v), "%dµs: its bucket's value is in it", us)
	}
}

// soakOp builds operations for the targeted tests below; times in ms.
func soakOp(id int, kind OpKind, call, ret int, st Status, token int, lease int) Op {
	return Op{ID: id, Client: id % 4, Kind: kind, Call: time.Duration(call) * time.Millisecond,
		Return: time.Duration(ret) * time.Millisecond, Status: st, Token: fencing.Token(token), Lease: lease}
}

// TestStreamingChecksCatch feeds small histories with one violation each,
// one operation at a time, and checks each is caught, with nothing else.
func TestStreamingChecksCatch(t *testing.T) {
	grant := func(id, call, ret, until, token int) Op {
		op := soakOp(id, Acquire, call, ret, OK, token, -1)
		op.ValidUntil = time.Duration(until) * time.Millisecond
		return op
	}
	write := func(id, call, ret int, st Status, token, lease int) Op {
		op := soakOp(id, FencedWrite, call, ret, st, token, lease)
		if st == Fail {
			op.Note = NoteStale
		}
		return op
	}
	for _, tc := range []struct {
		name                       string
		ops                        []Op
		double, fenced, dups, regr int
	}{
		{"clean", []Op{grant(0, 0, 10, 500, 5), write(1, 11, 12, OK, 5, 0), soakOp(2, Release, 20, 21, OK, 5, 0),
			grant(3, 30, 40, 600, 6), write(4, 41, 42, OK, 6, 3)}, 0, 0, 0, 0},
		{"double grant", []Op{grant(0, 0, 10, 500, 5), grant(1, 20, 30, 600, 6)}, 1, 0, 0, 0},
		{"released before the next grant", []Op{grant(0, 0, 10, 500, 5), soakOp(1, Release, 20, 300, OK, 5, 0),
			grant(2, 25, 30, 600, 6)}, 0, 0, 0, 0},
		{"repeated token, concurrent", []Op{grant(0, 0, 10, 11, 5), grant(1, 5, 20, 30, 5)}, 0, 0, 1, 0},
		{"repeated token, later", []Op{grant(0, 0, 10, 11, 5), grant(1, 50, 60, 70, 5)}, 0, 0, 0, 1},
		{"lower token, later", []Op{grant(0, 0, 10, 11, 5), grant(1, 50, 60, 70, 4)}, 0, 0, 0, 1},
		{"stale write accepted", []Op{write(0, 0, 10, OK, 7, -1), write(1, 20, 30, OK, 6, -1)}, 0, 1, 0, 0},
		{"fresh write rejected", []Op{write(0, 0, 10, OK, 7, -1), write(1, 20, 30, Fail, 8, -1)}, 0, 1, 0, 0},
		{"stale write rejected", []Op{write(0, 0, 10, OK, 7, -1), write(1, 20, 30, Fail, 6, -1)}, 0, 0, 0, 0},
	} {
		c := newSoakChecker(0, harness.SoakOptions{Window: time.Second, CheckTimeout: 5 * time.Second}, nil)
		for i, op := range tc.ops {
			w := Inf
			if i+1 < len(tc.ops) {
				w = tc.ops[i+1].Call
			}
			require.NoError(t, c.feed([]Op{op}, w))
		}
		assert.Equal(t, []int{tc.double, tc.fenced, tc.dups, tc.regr},
			[]int{c.overlaps.count, c.fenced.count, c.tokens.dups, c.tokens.regr}, tc.name)
		assert.Equal(t, tc.double, c.windows.violations, "%s: the mutex windows agree", tc.name)
		assert.Equal(t, int64(tc.double), c.doubleSeen.Load(), tc.name)
	}
}

// TestSoakHistoryFile checks the history a soak streams to disk: read back,
// it is the history, in order; a passing run removes it; a failing run's
// artifacts keep it as history.json next to the failing windows' timelines
// and a summary listing the double grant.
func TestSoakHistoryFile(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(5, 6))
	ops := randomSoakHistory(rng, 300)
	hf, err := createHistoryFile(dir)
	require.NoError(t, err)
	c := newSoakChecker(0, harness.SoakOptions{Window: time.Second, CheckTimeout: 5 * time.Second}, hf)
	for i := 0; i < len(ops); i += 7 {
		j := min(len(ops), i+7)
		w := Inf
		if j < len(ops) {
			w = ops[j].Call
		}
		require.NoError(t, c.feed(ops[i:j], w))
	}
	require.Positive(t, c.overlaps.count, "the history has a double grant to report")

	res := &harness.SoakResult{Seed: 11, Artifacts: filepath.Join(dir, "run")}
	require.NoError(t, writeSoakArtifacts(res, c.windows.failing, hf, 5*time.Second))
	f, err := os.Open(filepath.Join(res.Artifacts, "history.json"))
	require.NoError(t, err)
	h, err := ReadHistoryJSON(f)
	require.NoError(t, f.Close())
	require.NoError(t, err)
	assert.Equal(t, ops, h.Ops(), "the history, read back")
	summary, err := os.ReadFile(filepath.Join(res.Artifacts, "summary.txt"))
	require.NoError(t, err)
	assert.Contains(t, string(summary), "seed: 11")
	assert.Contains(t, string(summary), "double grant: "+Overlaps(ops)[0].String())
	require.NotEmpty(t, c.windows.failing)
	assert.FileExists(t, filepath.Join(res.Artifacts, "window-0.html"))
	hidden, err := filepath.Glob(filepath.Join(dir, ".soak-history-*"))
	require.NoError(t, err)
	assert.Empty(t, hidden, "moved, not copied")

	passing, err := createHistoryFile(dir)
	require.NoError(t, err)
	require.NoError(t, passing.write(ops[:10]))
	require.NoError(t, passing.remove())
	hidden, err = filepath.Glob(filepath.Join(dir, ".soak-history-*"))
	require.NoError(t, err)
	assert.Empty(t, hidden, "a passing run leaves no history behind")
}
