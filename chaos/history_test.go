package chaos_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/chaos"
	"github.com/redfence/redfence/fencing"
)

const ms = time.Millisecond

// historyOf builds a History holding exactly ops (IDs must be 0..n-1), by
// way of its JSON encoding.
func historyOf(t *testing.T, ops ...chaos.Op) *chaos.History {
	t.Helper()
	b, err := json.Marshal(map[string]any{"version": 1, "ops": ops})
	require.NoError(t, err)
	h, err := chaos.ReadHistoryJSON(bytes.NewReader(b))
	require.NoError(t, err)
	return h
}

func TestHistoryRecordsOps(t *testing.T) {
	h := chaos.NewHistory()
	a := h.Invoke(0, chaos.Acquire)
	b := h.Invoke(1, chaos.Acquire)
	vu := time.Now().Add(500 * ms)
	opA := a.Complete(chaos.OK, chaos.WithToken(7), chaos.WithValidUntil(vu), nil)
	assert.Equal(t, 0, opA.ID)
	assert.Equal(t, chaos.OK, opA.Status)
	assert.Equal(t, fencing.Token(7), opA.Token)
	assert.Equal(t, -1, opA.Lease, "acquires use no lease")
	assert.GreaterOrEqual(t, opA.Return, opA.Call)
	left := opA.ValidUntil - opA.Return
	assert.True(t, left > 400*ms && left <= 500*ms, "ValidUntil is Return + validity left at return, got %v", left)

	again := a.Complete(chaos.Fail, chaos.WithErr(errors.New("late")))
	assert.Equal(t, opA, again, "only the first Complete counts")

	w := h.Invoke(0, chaos.FencedWrite)
	w.Complete(chaos.Fail, chaos.WithLease(a.ID()), chaos.WithValue("v"), chaos.WithErr(errors.New("boom")),
		chaos.WithNote(chaos.NoteStale), chaos.WithErr(nil))
	heal := h.Fault("kill n0")
	healed := heal()
	assert.Equal(t, healed, heal(), "a second call records nothing")
	h.Fault("never healed")

	ops := h.Ops()
	require.Len(t, ops, 5)
	for i := 1; i < len(ops); i++ {
		assert.LessOrEqual(t, ops[i-1].Call, ops[i].Call, "sorted by Call")
	}
	byID := map[int]chaos.Op{}
	for _, op := range ops {
		byID[op.ID] = op
	}
	assert.Equal(t, chaos.Unknown, byID[b.ID()].Status, "never completed: unknown")
	assert.Equal(t, chaos.Inf, byID[b.ID()].Return, "never completed: returns at +inf")
	wop := byID[w.ID()]
	assert.Equal(t, []any{0, "v", "boom", chaos.NoteStale}, []any{wop.Lease, wop.Value, wop.Err, wop.Note})
	assert.Equal(t, chaos.Fault, byID[3].Kind)
	assert.Equal(t, chaos.NemesisClient, byID[3].Client)
	assert.Equal(t, chaos.OK, byID[3].Status)
	assert.Equal(t, healed, byID[3].Return, "the heal time is the window's end")
	assert.Equal(t, "never healed", byID[4].Note)
	assert.Equal(t, chaos.Inf, byID[4].Return)
}

func TestHistoryConcurrent(t *testing.T) {
	h := chaos.NewHistory()
	const goroutines, each = 8, 100
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for range each {
				h.Invoke(g, chaos.Read).Complete(chaos.OK)
			}
		})
	}
	wg.Wait()
	ops := h.Ops()
	require.Len(t, ops, goroutines*each)
	seen := map[int]bool{}
	for i, op := range ops {
		assert.False(t, seen[op.ID], "duplicate id %d", op.ID)
		seen[op.ID] = true
		assert.GreaterOrEqual(t, op.Return, op.Call)
		assert.Equal(t, chaos.OK, op.Status)
		if i > 0 {
			assert.LessOrEqual(t, ops[i-1].Call, op.Call)
		}
	}
	assert.Len(t, seen, goroutines*each)
}

func TestHistoryJSONRoundTrip(t *testing.T) {
	h := chaos.NewHistory()
	a := h.Invoke(0, chaos.Acquire)
	op := a.Complete(chaos.OK, chaos.WithToken(3), chaos.WithValidUntil(time.Now().Add(time.Second)))
	h.Invoke(1, chaos.Acquire).Complete(chaos.Unknown, chaos.WithErr(errors.New("context deadline exceeded")))
	h.Invoke(0, chaos.FencedWrite).Complete(chaos.OK, chaos.WithToken(3), chaos.WithLease(op.ID), chaos.WithValue("c0"))
	h.Invoke(0, chaos.Read).Complete(chaos.OK, chaos.WithLease(op.ID), chaos.WithValue("c0"))
	h.Invoke(0, chaos.UnfencedWrite).Complete(chaos.OK, chaos.WithLease(op.ID), chaos.WithValue("0->1"))
	end := h.Fault("pause n1")
	h.Invoke(0, chaos.Release).Complete(chaos.Fail, chaos.WithLease(op.ID), chaos.WithErr(errors.New("lost")))
	end()
	h.Invoke(2, chaos.Acquire) // never completes

	var buf bytes.Buffer
	require.NoError(t, h.WriteJSON(&buf))
	assert.Contains(t, buf.String(), `"kind": "fenced-write"`, "kinds by name")
	assert.Contains(t, buf.String(), `"status": "unknown"`, "statuses by name")
	got, err := chaos.ReadHistoryJSON(&buf)
	require.NoError(t, err)
	assert.Equal(t, h.Ops(), got.Ops())

	// The read history keeps recording with fresh IDs.
	p := got.Invoke(0, chaos.Acquire)
	assert.Equal(t, len(h.Ops()), p.ID())
}

func TestReadHistoryJSONInvalid(t *testing.T) {
	for _, tc := range []struct {
		name, in string
	}{
		{"not json", `{`},
		{"wrong version", `{"version": 2, "ops": []}`},
		{"unknown kind", `{"version": 1, "ops": [{"id":0,"kind":"dance","status":"ok","call":0,"return":1}]}`},
		{"unknown status", `{"version": 1, "ops": [{"id":0,"kind":"read","status":"maybe","call":0,"return":1}]}`},
		{"missing kind", `{"version": 1, "ops": [{"id":0,"status":"ok","call":0,"return":1}]}`},
		{"returns before call", `{"version": 1, "ops": [{"id":0,"kind":"read","status":"ok","call":5,"return":1}]}`},
		{"duplicate ids", `{"version": 1, "ops": [{"id":0,"kind":"read","status":"ok"},{"id":0,"kind":"read","status":"ok"}]}`},
		{"ids not 0..n-1", `{"version": 1, "ops": [{"id":3,"kind":"read","status":"ok"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := chaos.ReadHistoryJSON(strings.NewReader(tc.in))
			assert.Nil(t, h)
			assert.ErrorIs(t, err, chaos.ErrInvalidHistory)
		})
	}
}

func TestKindAndStatusNames(t *testing.T) {
	for _, tc := range []struct {
		kind chaos.OpKind
		name string
	}{
		{chaos.Acquire, "acquire"}, {chaos.Release, "release"}, {chaos.FencedWrite, "fenced-write"},
		{chaos.UnfencedWrite, "unfenced-write"}, {chaos.Read, "read"}, {chaos.Fault, "fault"},
	} {
		assert.Equal(t, tc.name, tc.kind.String())
		var k chaos.OpKind
		require.NoError(t, k.UnmarshalText([]byte(tc.name)))
		assert.Equal(t, tc.kind, k)
	}
	_, err := chaos.OpKind(99).MarshalText()
	assert.ErrorIs(t, err, chaos.ErrInvalidHistory)
	assert.Equal(t, "OpKind(99)", chaos.OpKind(99).String())
	for st, name := range map[chaos.Status]string{chaos.OK: "ok", chaos.Fail: "fail", chaos.Unknown: "unknown"} {
		assert.Equal(t, name, st.String())
	}
	_, err = chaos.Status(0).MarshalText()
	assert.ErrorIs(t, err, chaos.ErrInvalidHistory)
}
