package chaos

import (
	"cmp"
	"container/heap"
	"fmt"
	"slices"
	"time"
)

// The soak's streaming checks. Each is fed the history's operations in
// Call order (History.drain) and told the watermark, the time before which
// every operation has been fed; from that each decides what no later
// operation can change, and forgets it. They find what the batch checks of
// the whole history find (Overlaps, FencedViolations, tokenProblems; see
// TestStreamingChecksAgreeWithBatch) while keeping only the operations
// still in flight and the leases still valid.

// overlapStream is Overlaps, streamed. It keeps each granted lease's
// believed-held interval (Interval) until the watermark passes its end,
// then compares it with every interval still kept: any interval fed later
// starts after the watermark, so after the end, and one kept ends no
// earlier, so two intervals overlap exactly when the later start is before
// the closing one's end.
type overlapStream struct {
	open  map[int]*Interval // by lease (Acquire ID): intervals not yet closed
	count int
	// first holds the first maxExamples overlaps, A first; their
	// intervals' ends may still move when found (see examples).
	first [][2]*Interval
}

// maxExamples is how many violations of each kind a streaming check keeps
// to describe.
const maxExamples = 10

func (s *overlapStream) feed(op Op) {
	switch {
	case op.Held():
		if s.open == nil {
			s.open = map[int]*Interval{}
		}
		s.open[op.ID] = &Interval{Lease: op.ID, Client: op.Client, Token: op.Token, Start: op.Return, End: op.ValidUntil}
	case op.Kind == Release && op.Lease >= 0:
		// Releases come in Call order: the first one fed is the earliest.
		iv, ok := s.open[op.Lease]
		if !ok || op.Call >= iv.End {
			return
		}
		iv.End = op.Call
		if iv.End <= iv.Start { // released before it returned: never believed held
			delete(s.open, op.Lease)
		}
	}
}

// advance closes the intervals that end at or before w, in order of end.
func (s *overlapStream) advance(w time.Duration) {
	var closing []*Interval
	for _, iv := range s.open {
		if iv.End <= w {
			closing = append(closing, iv)
		}
	}
	slices.SortFunc(closing, func(a, b *Interval) int {
		return cmp.Or(cmp.Compare(a.End, b.End), cmp.Compare(a.Lease, b.Lease))
	})
	for _, x := range closing {
		delete(s.open, x.Lease)
		for _, y := range s.open {
			if max(x.Start, y.Start) >= x.End {
				continue
			}
			s.count++
			if len(s.first) < maxExamples {
				a, b := x, y
				if cmp.Or(cmp.Compare(b.Start, a.Start), cmp.Compare(b.Lease, a.Lease)) < 0 {
					a, b = b, a
				}
				s.first = append(s.first, [2]*Interval{a, b})
			}
		}
	}
}

// examples returns the first overlaps found (up to maxExamples), with
// their intervals as they are now: final once both are closed.
func (s *overlapStream) examples() []Overlap {
	out := make([]Overlap, len(s.first))
	for i, p := range s.first {
		out[i] = Overlap{A: *p[0], B: *p[1]}
	}
	return out
}

// highestStream is highestBefore, streamed: fed operations in Call order,
// it knows the one with the highest Token among those that returned
// strictly before a given time.
type highestStream struct {
	waiting opHeap // fed, not yet returned before the last time asked
	best    Op
	has     bool
}

// before folds in the operations that returned before t and returns the
// highest, if any; t must not decrease between calls.
func (s *highestStream) before(t time.Duration) (Op, bool) {
	for s.waiting.Len() > 0 && s.waiting[0].Return < t {
		op := heap.Pop(&s.waiting).(Op)
		if !s.has || op.Token > s.best.Token {
			s.best, s.has = op, true
		}
	}
	return s.best, s.has
}

func (s *highestStream) add(op Op) { heap.Push(&s.waiting, op) }

// fencedStream is FencedViolations, streamed.
type fencedStream struct {
	accepted highestStream // accepted writes, for StaleAccepted
	rejected opHeap        // rejected as stale, waiting to be judged
	possible Op            // the highest-token possibly accepted write fed so far
	hasPoss  bool
	count    int
	examples []FencedViolation
}

func (s *fencedStream) found(v FencedViolation) {
	s.count++
	if len(s.examples) < maxExamples {
		s.examples = append(s.examples, v)
	}
}

func (s *fencedStream) feed(op Op) {
	if op.Kind != FencedWrite {
		return
	}
	switch {
	case op.Status == OK:
		if best, ok := s.accepted.before(op.Call); ok && op.Token < best.Token {
			s.found(FencedViolation{Kind: StaleAccepted, Write: op, Against: best})
		}
		s.accepted.add(op)
		s.addPossible(op)
	case op.Status == Unknown:
		s.addPossible(op)
	case op.Status == Fail && op.Note == NoteStale:
		heap.Push(&s.rejected, op)
	}
}

// addPossible judges the rejected writes that returned before op was
// called (every possibly accepted write called no later than they returned
// has been fed), then folds op in.
func (s *fencedStream) addPossible(op Op) {
	s.judge(op.Call)
	if !s.hasPoss || op.Token > s.possible.Token {
		s.possible, s.hasPoss = op, true
	}
}

// judge judges the rejected writes that returned before t.
func (s *fencedStream) judge(t time.Duration) {
	for s.rejected.Len() > 0 && s.rejected[0].Return < t {
		w := heap.Pop(&s.rejected).(Op)
		switch {
		case !s.hasPoss:
			s.found(FencedViolation{Kind: FreshRejected, Write: w, Against: Op{ID: -1, Lease: -1}})
		case s.possible.Token <= w.Token:
			s.found(FencedViolation{Kind: FreshRejected, Write: w, Against: s.possible})
		}
	}
}

// advance judges the rejected writes that returned before w: every write
// called before w has been fed.
func (s *fencedStream) advance(w time.Duration) { s.judge(w) }

// tokenStream checks the tokens of granted acquires: a regression is a
// token not above the highest of the grants that returned before it was
// called (as tokenProblems); a repeat is a token equal to that of a grant
// still in flight or recent (returned at or after the watermark). A repeat
// of an older grant's token is a regression, so every repeat tokenProblems
// counts is found, counted once where tokenProblems may count it twice.
type tokenStream struct {
	granted     highestStream
	recent      map[uint64]Op // by token: grants that returned at or after the watermark
	dups, regr  int
	example     string
	grantsTotal int
}

func (s *tokenStream) feed(op Op) {
	if op.Kind != Acquire || op.Status != OK || op.Token == 0 {
		return
	}
	s.grantsTotal++
	if prev, ok := s.recent[uint64(op.Token)]; ok {
		s.dups++
		s.note("acquires %d and %d both got token %d", prev.ID, op.ID, op.Token)
	} else {
		if s.recent == nil {
			s.recent = map[uint64]Op{}
		}
		s.recent[uint64(op.Token)] = op
	}
	if best, ok := s.granted.before(op.Call); ok && op.Token <= best.Token {
		s.regr++
		s.note("acquire %d got token %d after acquire %d had returned token %d", op.ID, op.Token, best.ID, best.Token)
	}
	s.granted.add(op)
}

func (s *tokenStream) note(format string, args ...any) {
	if s.example == "" {
		s.example = fmt.Sprintf(format, args...)
	}
}

// advance forgets the recent grants that returned before w: any grant fed
// later is called at or after w, so after they returned, and a repeat of
// their token is a regression.
func (s *tokenStream) advance(w time.Duration) {
	for t, op := range s.recent {
		if op.Return < w {
			delete(s.recent, t)
		}
	}
}
