package chaos

import (
	"cmp"
	"container/heap"
	"fmt"
	"slices"
	"time"

	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/internal/enum"
)

// Interval is the time during which a client believed it held the lock: from
// its Acquire's Return to the earlier of the lease's ValidUntil and the Call
// of its Release (the client stops relying on the lease when it starts
// releasing it).
type Interval struct {
	Lease  int           `json:"lease"` // ID of the Acquire
	Client int           `json:"client"`
	Token  fencing.Token `json:"token,omitempty"`
	Start  time.Duration `json:"start"`
	End    time.Duration `json:"end"`
}

// Overlap is two believed-held intervals of different acquisitions that
// overlap: a double grant. A starts no later than B.
type Overlap struct {
	A, B Interval
}

// String describes the overlap.
func (o Overlap) String() string {
	return fmt.Sprintf("lease %d (client %d, token %d, %v..%v) overlaps lease %d (client %d, token %d, %v..%v) by %v",
		o.A.Lease, o.A.Client, o.A.Token, o.A.Start, o.A.End,
		o.B.Lease, o.B.Client, o.B.Token, o.B.Start, o.B.End, min(o.A.End, o.B.End)-o.B.Start)
}

// HeldIntervals returns the believed-held interval of every granted Acquire
// in ops (see Interval), sorted by Start. A Release is matched to its Acquire
// by its Lease field. Leases already expired at return (ValidUntil not after
// Return) and intervals emptied by an early release are left out: no client
// believed it held them.
func HeldIntervals(ops []Op) []Interval {
	releaseCall := make(map[int]time.Duration)
	for _, op := range ops {
		if op.Kind != Release || op.Lease < 0 {
			continue
		}
		if c, ok := releaseCall[op.Lease]; !ok || op.Call < c {
			releaseCall[op.Lease] = op.Call
		}
	}
	var out []Interval
	for _, op := range ops {
		if !op.Held() {
			continue
		}
		end := op.ValidUntil
		if c, ok := releaseCall[op.ID]; ok && c < end {
			end = c
		}
		if end <= op.Return {
			continue
		}
		out = append(out, Interval{Lease: op.ID, Client: op.Client, Token: op.Token, Start: op.Return, End: end})
	}
	slices.SortFunc(out, func(a, b Interval) int {
		if c := cmp.Compare(a.Start, b.Start); c != 0 {
			return c
		}
		return cmp.Compare(a.Lease, b.Lease)
	})
	return out
}

// Overlaps returns every pair of believed-held intervals (see HeldIntervals)
// that overlap: the exact mutual-exclusion check, valid because all clients
// share the history's clock. Intervals that only touch (one ends exactly when
// the other starts) do not overlap. The number of double grants is
// len(Overlaps(ops)). It runs in O(n log n + overlaps): a sweep over the
// intervals by start, keeping the open ones in a heap by end.
func Overlaps(ops []Op) []Overlap {
	var (
		out  []Overlap
		open endHeap
	)
	for _, iv := range HeldIntervals(ops) {
		for open.Len() > 0 && open[0].End <= iv.Start {
			heap.Pop(&open)
		}
		for _, o := range open {
			out = append(out, Overlap{A: o, B: iv})
		}
		heap.Push(&open, iv)
	}
	slices.SortFunc(out, func(a, b Overlap) int {
		if c := cmp.Compare(a.B.Start, b.B.Start); c != 0 {
			return c
		}
		if c := cmp.Compare(a.A.Start, b.A.Start); c != 0 {
			return c
		}
		return cmp.Compare(a.A.Lease, b.A.Lease)
	})
	return out
}

// highestBefore calls f, in Call order (sortByCall), with each of ops that
// was called after another had returned, and the one with the highest
// Token of those that returned strictly before it was called.
func highestBefore(ops []Op, f func(op, best Op)) {
	byReturn := slices.Clone(ops)
	slices.SortStableFunc(byReturn, func(a, b Op) int { return cmp.Compare(a.Return, b.Return) })
	byCall := slices.Clone(ops)
	sortByCall(byCall)
	best, j := -1, 0
	for _, op := range byCall {
		for j < len(byReturn) && byReturn[j].Return < op.Call {
			if best < 0 || byReturn[j].Token > byReturn[best].Token {
				best = j
			}
			j++
		}
		if best >= 0 {
			f(op, byReturn[best])
		}
	}
}

// ViolationKind says how a fenced resource misbehaved.
type ViolationKind int

const (
	// StaleAccepted means the guard accepted a write whose token is lower
	// than the token of an accepted write that returned before this one was
	// called. A correct guard never does this; it is the violation fencing
	// exists to prevent.
	StaleAccepted ViolationKind = iota + 1
	// FreshRejected means the guard rejected as stale a write whose token
	// is at least as high as every token it can have seen (every write,
	// accepted or of unknown outcome, called before this one returned).
	// This assumes the guard's fence for the resource started empty.
	FreshRejected
)

// String returns "stale-accepted" or "fresh-rejected".
func (k ViolationKind) String() string {
	return enum.String([]string{"stale-accepted", "fresh-rejected"}, k)
}

// FencedViolation is one write the guard got wrong.
type FencedViolation struct {
	Kind ViolationKind
	// Write is the offending write.
	Write Op
	// Against is the write whose token made it wrong: for StaleAccepted,
	// the accepted write with the highest token that returned before Write
	// was called; for FreshRejected, the possibly accepted write with the
	// highest token called before Write returned (Against.ID is -1 when
	// there was none).
	Against Op
}

// String describes the violation.
func (v FencedViolation) String() string {
	if v.Kind == StaleAccepted {
		return fmt.Sprintf("stale-accepted: write %d (token %d, called %v) accepted after write %d (token %d) returned at %v",
			v.Write.ID, v.Write.Token, v.Write.Call, v.Against.ID, v.Against.Token, v.Against.Return)
	}
	return fmt.Sprintf("fresh-rejected: write %d (token %d) rejected; highest token it can have seen is %d (write %d)",
		v.Write.ID, v.Write.Token, v.Against.Token, v.Against.ID)
}

// FencedViolations checks the FencedWrite operations in ops (others are
// ignored) against what a correct guard must do, in real-time order on the
// history's clock:
//
//   - StaleAccepted: an accepted (OK) write whose token is lower than the
//     highest token among accepted writes that returned before it was called;
//   - FreshRejected: a write rejected as stale (Fail with Note NoteStale)
//     although no write called before it returned, accepted or of unknown
//     outcome, had a higher token.
//
// Writes that failed for other reasons are ignored. It runs in O(n log n).
func FencedViolations(ops []Op) []FencedViolation {
	var accepted, possible, rejected []Op
	for _, op := range ops {
		if op.Kind != FencedWrite {
			continue
		}
		switch {
		case op.Status == OK:
			accepted = append(accepted, op)
			possible = append(possible, op)
		case op.Status == Unknown:
			possible = append(possible, op)
		case op.Status == Fail && op.Note == NoteStale:
			rejected = append(rejected, op)
		}
	}
	var out []FencedViolation

	// StaleAccepted: walk accepted writes by Call, folding in those that
	// returned strictly earlier.
	highestBefore(accepted, func(w, best Op) {
		if w.Token < best.Token {
			out = append(out, FencedViolation{Kind: StaleAccepted, Write: w, Against: best})
		}
	})

	// FreshRejected: walk rejected writes by Return, folding in the writes
	// that were called no later (closed intervals: a write called exactly
	// when the rejected one returned may precede it).
	sortByCall(possible)
	slices.SortStableFunc(rejected, func(a, b Op) int { return cmp.Compare(a.Return, b.Return) })
	best, j := -1, 0
	for _, w := range rejected {
		for j < len(possible) && possible[j].Call <= w.Return {
			if best < 0 || possible[j].Token > possible[best].Token {
				best = j
			}
			j++
		}
		if best < 0 {
			out = append(out, FencedViolation{Kind: FreshRejected, Write: w, Against: Op{ID: -1, Lease: -1}})
			continue
		}
		if possible[best].Token <= w.Token {
			out = append(out, FencedViolation{Kind: FreshRejected, Write: w, Against: possible[best]})
		}
	}
	slices.SortStableFunc(out, func(a, b FencedViolation) int { return cmp.Compare(a.Write.Call, b.Write.Call) })
	return out
}
