package chaos

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/internal/enum"
)

// ErrInvalidHistory reports a history that cannot be read or used: malformed
// JSON, an unknown operation kind or status, or an operation that returns
// before it is called. Errors that wrap it add the details, and wrap
// redlock.ErrInvalid too (see ErrInvalidScenario).
var ErrInvalidHistory = errors.New("chaos: invalid history")

// Inf is the Return of an operation that never returned (its outcome is
// Unknown): the largest time.Duration, as etcd's robustness tests use for
// writes that may have happened.
const Inf = time.Duration(math.MaxInt64)

// NemesisClient is the Client of Fault operations: the fault injector, not a
// lock client.
const NemesisClient = -1

// OpKind says what an operation did.
type OpKind int

const (
	// Acquire is an attempt to take the lock.
	Acquire OpKind = iota + 1
	// Release gives a lease back.
	Release
	// FencedWrite is a write to the fenced resource carrying the lease's
	// token: OK when the guard accepted it, Fail with Note NoteStale when it
	// rejected the token as stale.
	FencedWrite
	// UnfencedWrite is one read-modify-write increment of the unfenced
	// control counter; Value is "old->new".
	UnfencedWrite
	// Read reads the fenced resource; Value is what it returned.
	Read
	// Fault is a fault window: Call is when the fault was injected, Return
	// when it was healed, Note says what it was.
	Fault
)

var kindNames = []string{"acquire", "release", "fenced-write", "unfenced-write", "read", "fault"}

// String returns the kind's name as used in JSON ("acquire", "release",
// "fenced-write", "unfenced-write", "read", "fault").
func (k OpKind) String() string { return enum.String(kindNames, k) }

// MarshalText encodes the kind by name. It fails for an unknown kind.
func (k OpKind) MarshalText() ([]byte, error) { return marshalEnum(kindNames, k, "operation kind") }

// UnmarshalText decodes a kind name. It fails with ErrInvalidHistory for an
// unknown name.
func (k *OpKind) UnmarshalText(b []byte) error {
	return unmarshalEnum(kindNames, b, "operation kind", k)
}

// Status is an operation's outcome, as in Jepsen: ok, fail or info.
type Status int

const (
	// OK means the operation happened.
	OK Status = iota + 1
	// Fail means the operation definitely did not happen.
	Fail
	// Unknown means the operation may or may not have happened (a timeout,
	// a cancelled context, a lost reply, or an operation that never
	// returned).
	Unknown
)

var statusNames = []string{"ok", "fail", "unknown"}

// String returns "ok", "fail" or "unknown".
func (s Status) String() string { return enum.String(statusNames, s) }

// MarshalText encodes the status by name. It fails for an unknown status.
func (s Status) MarshalText() ([]byte, error) { return marshalEnum(statusNames, s, "status") }

// UnmarshalText decodes a status name. It fails with ErrInvalidHistory for an
// unknown name.
func (s *Status) UnmarshalText(b []byte) error { return unmarshalEnum(statusNames, b, "status", s) }

// NoteStale is the Note of a FencedWrite that the guard rejected because its
// token was stale.
const NoteStale = "stale"

// Op is one operation in a History. Times are on the history's monotonic
// clock: the time since the history was created.
type Op struct {
	// ID numbers operations in the order they were invoked, from 0.
	ID int `json:"id"`
	// Client is the client that ran the operation, from 0; NemesisClient for
	// Fault operations.
	Client int `json:"client"`
	// Kind is what the operation did.
	Kind OpKind `json:"kind"`
	// Call is when the operation was invoked.
	Call time.Duration `json:"call"`
	// Return is when the operation returned; Inf if it never did.
	Return time.Duration `json:"return"`
	// Status is the operation's outcome.
	Status Status `json:"status"`
	// Token is the fencing token: the granted lease's for an Acquire, the
	// one presented for a FencedWrite.
	Token fencing.Token `json:"token,omitempty"`
	// ValidUntil is, for a granted Acquire, when the lease's validity ends on
	// the history's clock: Return + time.Until(lease.ValidUntil()) taken at
	// return.
	ValidUntil time.Duration `json:"valid_until,omitempty"`
	// Lease is, for Release, FencedWrite, UnfencedWrite and Read, the ID of
	// the Acquire whose lease the client held; -1 when none.
	Lease int `json:"lease"`
	// Value is the value written (FencedWrite), read (Read), or "old->new"
	// (UnfencedWrite).
	Value string `json:"value,omitempty"`
	// Err is the error the operation returned, if any.
	Err string `json:"err,omitempty"`
	// Note is free text: NoteStale for a stale FencedWrite, the fault's
	// description for a Fault.
	Note string `json:"note,omitempty"`
}

// Held reports whether op is a granted Acquire whose lease was valid at
// return (ValidUntil after Return): one that gives its client a
// believed-held interval.
func (op Op) Held() bool {
	return op.Kind == Acquire && op.Status == OK && op.ValidUntil > op.Return
}

// History records operations on one monotonic clock. It is safe for
// concurrent use. The zero value is not usable: call NewHistory.
type History struct {
	start time.Time // carries a monotonic reading

	mu   sync.Mutex
	base int    // guarded by mu: ID of ops[0]; the ops before it were taken by drain
	ops  []Op   // guarded by mu; index == ID - base
	done []bool // guarded by mu; done[i]: ops[i] completed
}

// NewHistory returns an empty History whose clock starts now.
func NewHistory() *History { return &History{start: time.Now()} }

// Now returns the current time on the history's clock.
func (h *History) Now() time.Duration { return time.Since(h.start) }

// At converts t to the history's clock. t should carry a monotonic reading
// (time.Now and values derived from it with Add do); otherwise the wall
// clocks are compared.
func (h *History) At(t time.Time) time.Duration { return t.Sub(h.start) }

// Pending is an invoked operation that has not completed yet.
type Pending struct {
	h     *History
	id    int
	final Op // guarded by h.mu: the operation once completed, for a Complete after drain
}

// Invoke records the start of an operation by client and returns it as
// Pending; complete it with Complete. An operation never completed appears
// in Ops as Unknown with Return Inf.
func (h *History) Invoke(client int, kind OpKind) *Pending {
	return h.invoke(client, kind, "")
}

func (h *History) invoke(client int, kind OpKind, note string) *Pending {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.Now() // under mu, so that ID order is Call order (see drain)
	id := h.base + len(h.ops)
	h.ops = append(h.ops, Op{ID: id, Client: client, Kind: kind, Call: now, Return: Inf, Status: Unknown, Lease: -1, Note: note})
	h.done = append(h.done, false)
	return &Pending{h: h, id: id}
}

// ID returns the operation's ID.
func (p *Pending) ID() int { return p.id }

// Field sets one field of an operation as it completes.
type Field interface{ set(op *Op, now time.Time) }

type fieldFunc func(op *Op, now time.Time)

func (f fieldFunc) set(op *Op, now time.Time) { f(op, now) }

// WithToken sets the operation's fencing token.
func WithToken(t fencing.Token) Field { return fieldFunc(func(op *Op, _ time.Time) { op.Token = t }) }

// WithValidUntil sets ValidUntil from a lease's ValidUntil: the return time
// plus the validity left at return.
func WithValidUntil(t time.Time) Field {
	return fieldFunc(func(op *Op, now time.Time) { op.ValidUntil = op.Return + t.Sub(now) })
}

// WithLease sets the ID of the Acquire whose lease the operation used.
func WithLease(acquireID int) Field {
	return fieldFunc(func(op *Op, _ time.Time) { op.Lease = acquireID })
}

// WithValue sets the value written or read.
func WithValue(v string) Field { return fieldFunc(func(op *Op, _ time.Time) { op.Value = v }) }

// WithErr records err's text; a nil err sets nothing.
func WithErr(err error) Field {
	return fieldFunc(func(op *Op, _ time.Time) {
		if err != nil {
			op.Err = err.Error()
		}
	})
}

// WithNote sets the operation's note.
func WithNote(n string) Field { return fieldFunc(func(op *Op, _ time.Time) { op.Note = n }) }

// Complete records the operation's return with status and fields and
// returns the completed Op. Only the first call has an effect; later calls
// return the operation as first completed. A nil field is ignored.
func (p *Pending) Complete(status Status, fields ...Field) Op {
	now := time.Now()
	ret := now.Sub(p.h.start)
	p.h.mu.Lock()
	defer p.h.mu.Unlock()
	i := p.id - p.h.base
	if i < 0 { // completed and drained
		return p.final
	}
	op := &p.h.ops[i]
	if p.h.done[i] {
		return *op
	}
	p.h.done[i] = true
	op.Return = max(ret, op.Call)
	op.Status = status
	for _, f := range fields {
		if f != nil {
			f.set(op, now)
		}
	}
	p.final = *op
	return *op
}

// Fault records the start of a fault window described by note, and returns a
// function that records its end (the heal) and returns the heal's time on
// the history's clock, for Stats.RecoveryAfter; calling it again records
// nothing and returns the same time. A window never ended appears in Ops with
// Return Inf.
func (h *History) Fault(note string) (end func() time.Duration) {
	p := h.invoke(NemesisClient, Fault, note)
	return func() time.Duration { return p.Complete(OK).Return }
}

// drain removes the longest run of completed operations at the start of
// the history, in ID order, and returns them with the watermark: every
// operation called before it has now been drained, and every later one
// will be called at or after it (the Call of the first operation still
// pending, or now). IDs are handed out in Call order (invoke reads the
// clock under mu), so successive drains yield exactly what Ops would have
// returned, in the same order, with bounded memory: a long run that drains
// as it goes keeps only the operations in flight.
func (h *History) drain() (ops []Op, watermark time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for n < len(h.done) && h.done[n] {
		n++
	}
	ops = slices.Clone(h.ops[:n])
	// Copy the rest, so the drained prefix's backing array can be freed.
	h.ops, h.done = slices.Clone(h.ops[n:]), slices.Clone(h.done[n:])
	h.base += n
	if len(h.ops) > 0 {
		return ops, h.ops[0].Call
	}
	return ops, h.Now()
}

// Ops returns a copy of every operation, sorted by Call (then ID); after a
// drain, of every operation not drained.
func (h *History) Ops() []Op {
	h.mu.Lock()
	ops := slices.Clone(h.ops)
	h.mu.Unlock()
	sortByCall(ops)
	return ops
}

// sortByCall sorts ops by Call, then ID.
func sortByCall(ops []Op) {
	slices.SortStableFunc(ops, func(a, b Op) int {
		if a.Call != b.Call {
			return cmpDur(a.Call, b.Call)
		}
		return a.ID - b.ID
	})
}

func cmpDur(a, b time.Duration) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// historyVersion is the version of the JSON encoding.
const historyVersion = 1

type historyJSON struct {
	Version int  `json:"version"`
	Ops     []Op `json:"ops"`
}

// WriteJSON writes the history as JSON: {"version": 1, "ops": [...]}, times
// in nanoseconds on the history's clock, kinds and statuses by name.
func (h *History) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(historyJSON{Version: historyVersion, Ops: h.Ops()}); err != nil {
		return fmt.Errorf("chaos: writing history: %w", err)
	}
	return nil
}

// ReadHistoryJSON reads a history written by WriteJSON. The result holds the
// operations as recorded; their IDs must be 0..n-1, as WriteJSON writes them,
// since Lease fields refer to them. Its clock, for operations added later,
// starts when it is read. Malformed input gives an error wrapping
// ErrInvalidHistory.
func ReadHistoryJSON(r io.Reader) (*History, error) {
	var in historyJSON
	dec := json.NewDecoder(r)
	if err := dec.Decode(&in); err != nil {
		if errors.Is(err, ErrInvalidHistory) {
			return nil, err
		}
		return nil, invalidHistory("%w", err)
	}
	if in.Version != historyVersion {
		return nil, invalidHistory("version %d, want %d", in.Version, historyVersion)
	}
	h := NewHistory()
	slices.SortStableFunc(in.Ops, func(a, b Op) int { return a.ID - b.ID })
	for i, op := range in.Ops {
		if op.Kind == 0 || op.Status == 0 {
			return nil, invalidHistory("op %d: missing kind or status", op.ID)
		}
		if op.Return < op.Call {
			return nil, invalidHistory("op %d returns (%v) before it is called (%v)", op.ID, op.Return, op.Call)
		}
		if i > 0 && op.ID == in.Ops[i-1].ID {
			return nil, invalidHistory("duplicate op id %d", op.ID)
		}
		if op.ID != i {
			return nil, invalidHistory("op ids must be 0..%d, found %d", len(in.Ops)-1, op.ID)
		}
		h.ops = append(h.ops, op)
		h.done = append(h.done, true)
	}
	return h, nil
}
