package chaos_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/redfence/redfence/chaos"
	"github.com/redfence/redfence/fencing"
)

// Builders for hand-written histories; times in milliseconds. IDs are given
// by the caller and must be 0..n-1 when the ops go through historyOf.

func acq(id, client int, call, ret, validUntil time.Duration, token fencing.Token) chaos.Op {
	return chaos.Op{ID: id, Client: client, Kind: chaos.Acquire, Call: call * ms, Return: ret * ms,
		Status: chaos.OK, Token: token, ValidUntil: validUntil * ms, Lease: -1}
}

func acqStatus(id, client int, call, ret time.Duration, st chaos.Status) chaos.Op {
	op := chaos.Op{ID: id, Client: client, Kind: chaos.Acquire, Call: call * ms, Return: ret * ms, Status: st, Lease: -1}
	if st == chaos.Unknown {
		op.Return = chaos.Inf
	}
	return op
}

func rel(id, client, lease int, call, ret time.Duration) chaos.Op {
	return chaos.Op{ID: id, Client: client, Kind: chaos.Release, Call: call * ms, Return: ret * ms, Status: chaos.OK, Lease: lease}
}

func write(id, client int, call, ret time.Duration, st chaos.Status, token fencing.Token, value string) chaos.Op {
	op := chaos.Op{ID: id, Client: client, Kind: chaos.FencedWrite, Call: call * ms, Return: ret * ms, Status: st,
		Token: token, Value: value, Lease: -1}
	switch st {
	case chaos.Fail:
		op.Note = chaos.NoteStale
	case chaos.Unknown:
		op.Return = chaos.Inf
	}
	return op
}

func read(id, client int, call, ret time.Duration, value string) chaos.Op {
	return chaos.Op{ID: id, Client: client, Kind: chaos.Read, Call: call * ms, Return: ret * ms, Status: chaos.OK, Value: value, Lease: -1}
}

func TestOverlaps(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []chaos.Op
		want [][2]int // (A.Lease, B.Lease) of each overlap, in order
	}{
		{"empty", nil, nil},
		{"one lease", []chaos.Op{acq(0, 0, 0, 10, 100, 1)}, nil},
		{"sequential", []chaos.Op{acq(0, 0, 0, 10, 100, 1), acq(1, 1, 120, 150, 250, 2)}, nil},
		{"touching is not overlap", []chaos.Op{acq(0, 0, 0, 10, 100, 1), acq(1, 1, 50, 100, 200, 2)}, nil},
		{"overlap", []chaos.Op{acq(0, 0, 0, 10, 100, 1), acq(1, 1, 20, 50, 200, 2)}, [][2]int{{0, 1}}},
		{"order of ops does not matter", []chaos.Op{acq(1, 1, 20, 50, 200, 2), acq(0, 0, 0, 10, 100, 1)}, [][2]int{{0, 1}}},
		{"release before validity ends shortens the interval", []chaos.Op{
			acq(0, 0, 0, 10, 100, 1), rel(1, 0, 0, 40, 60), acq(2, 1, 20, 50, 200, 2),
		}, nil},
		{"release call touching the next grant", []chaos.Op{
			acq(0, 0, 0, 10, 100, 1), rel(1, 0, 0, 50, 60), acq(2, 1, 20, 50, 200, 2),
		}, nil},
		{"release after validity does not lengthen it", []chaos.Op{
			acq(0, 0, 0, 10, 100, 1), acq(1, 1, 120, 150, 250, 2), rel(2, 0, 0, 200, 210),
		}, nil},
		{"release after the other grant", []chaos.Op{
			acq(0, 0, 0, 10, 100, 1), acq(1, 1, 20, 50, 200, 2), rel(2, 0, 0, 60, 70),
		}, [][2]int{{0, 1}}},
		{"failed and unknown acquires hold nothing", []chaos.Op{
			acq(0, 0, 0, 10, 100, 1), acqStatus(1, 1, 20, 50, chaos.Fail), acqStatus(2, 2, 20, 0, chaos.Unknown),
		}, nil},
		{"lease expired at return holds nothing", []chaos.Op{acq(0, 0, 0, 10, 100, 1), acq(1, 1, 20, 50, 40, 2)}, nil},
		{"three at once", []chaos.Op{
			acq(0, 0, 0, 10, 100, 1), acq(1, 1, 0, 20, 100, 2), acq(2, 2, 0, 30, 100, 3),
		}, [][2]int{{0, 1}, {0, 2}, {1, 2}}},
		{"nested", []chaos.Op{
			acq(0, 0, 0, 10, 100, 1), acq(1, 1, 0, 20, 200, 2), rel(2, 1, 1, 25, 26), acq(3, 2, 0, 30, 40, 3),
		}, [][2]int{{0, 1}, {0, 3}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := chaos.Overlaps(tc.ops)
			var pairs [][2]int
			for _, o := range got {
				pairs = append(pairs, [2]int{o.A.Lease, o.B.Lease})
				assert.Less(t, o.B.Start, o.A.End, "reported pairs really overlap")
				assert.Less(t, o.A.Start, o.B.End, "reported pairs really overlap")
				assert.NotEmpty(t, o.String())
			}
			assert.Equal(t, tc.want, pairs)
		})
	}
}

func TestHeldIntervals(t *testing.T) {
	got := chaos.HeldIntervals([]chaos.Op{
		acq(0, 0, 0, 10, 100, 1), rel(1, 0, 0, 40, 60),
		acq(2, 1, 50, 60, 200, 2),
		acq(3, 2, 50, 70, 300, 3), rel(4, 2, 3, 70, 80), // released at once: empty
	})
	assert.Equal(t, []chaos.Interval{
		{Lease: 0, Client: 0, Token: 1, Start: 10 * ms, End: 40 * ms},
		{Lease: 2, Client: 1, Token: 2, Start: 60 * ms, End: 200 * ms},
	}, got)
}

func TestFencedViolations(t *testing.T) {
	type v struct {
		kind           chaos.ViolationKind
		write, against int
	}
	unfenced := chaos.Op{ID: 9, Kind: chaos.UnfencedWrite, Call: 0, Return: 100 * ms, Status: chaos.OK, Lease: -1}
	invalid := write(8, 0, 20, 30, chaos.Fail, 0, "x")
	invalid.Note = ""
	for _, tc := range []struct {
		name string
		ops  []chaos.Op
		want []v
	}{
		{"empty", nil, nil},
		{"increasing", []chaos.Op{write(0, 0, 0, 10, chaos.OK, 1, "a"), write(1, 1, 20, 30, chaos.OK, 2, "b")}, nil},
		{"equal tokens", []chaos.Op{write(0, 0, 0, 10, chaos.OK, 1, "a"), write(1, 0, 20, 30, chaos.OK, 1, "b")}, nil},
		{"stale accepted", []chaos.Op{write(0, 0, 0, 10, chaos.OK, 5, "a"), write(1, 1, 20, 30, chaos.OK, 3, "b")},
			[]v{{chaos.StaleAccepted, 1, 0}}},
		{"stale accepted against the highest earlier token", []chaos.Op{
			write(0, 0, 0, 10, chaos.OK, 5, "a"), write(1, 1, 11, 12, chaos.OK, 7, "b"), write(2, 2, 20, 30, chaos.OK, 6, "c"),
		}, []v{{chaos.StaleAccepted, 2, 1}}},
		{"concurrent lower token may precede", []chaos.Op{write(0, 0, 0, 10, chaos.OK, 5, "a"), write(1, 1, 5, 15, chaos.OK, 3, "b")}, nil},
		{"touching is concurrent", []chaos.Op{write(0, 0, 0, 10, chaos.OK, 5, "a"), write(1, 1, 10, 15, chaos.OK, 3, "b")}, nil},
		{"unknown write does not count as accepted", []chaos.Op{write(0, 0, 0, 10, chaos.Unknown, 5, "a"), write(1, 1, 20, 30, chaos.OK, 3, "b")}, nil},
		{"stale rejected", []chaos.Op{write(0, 0, 0, 10, chaos.OK, 5, "a"), write(1, 1, 20, 30, chaos.Fail, 3, "b")}, nil},
		{"fresh rejected", []chaos.Op{write(0, 0, 0, 10, chaos.OK, 3, "a"), write(1, 1, 20, 30, chaos.Fail, 5, "b")},
			[]v{{chaos.FreshRejected, 1, 0}}},
		{"equal token rejected", []chaos.Op{write(0, 0, 0, 10, chaos.OK, 3, "a"), write(1, 1, 20, 30, chaos.Fail, 3, "b")},
			[]v{{chaos.FreshRejected, 1, 0}}},
		{"rejected with nothing before", []chaos.Op{write(0, 1, 20, 30, chaos.Fail, 5, "b")},
			[]v{{chaos.FreshRejected, 0, -1}}},
		{"rejection explained by an unknown write", []chaos.Op{write(0, 0, 0, 10, chaos.Unknown, 7, "a"), write(1, 1, 20, 30, chaos.Fail, 5, "b")}, nil},
		{"rejection explained by a concurrent write", []chaos.Op{write(0, 0, 25, 40, chaos.OK, 7, "a"), write(1, 1, 20, 30, chaos.Fail, 5, "b")}, nil},
		{"rejection not explained by a later write", []chaos.Op{write(0, 0, 31, 40, chaos.OK, 7, "a"), write(1, 1, 20, 30, chaos.Fail, 5, "b")},
			[]v{{chaos.FreshRejected, 1, -1}}},
		{"other failures and kinds are ignored", []chaos.Op{write(0, 0, 0, 10, chaos.OK, 5, "a"), invalid, unfenced}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []v
			for _, viol := range chaos.FencedViolations(tc.ops) {
				got = append(got, v{viol.Kind, viol.Write.ID, viol.Against.ID})
				assert.NotEmpty(t, viol.String())
			}
			assert.Equal(t, tc.want, got)
		})
	}
}
