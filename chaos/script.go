package chaos

import (
	"context"
	"time"
)

// script is one run of a scenario: its play, then its check, over the
// state the play leaves for the check. Each run gets a fresh one.
type script interface {
	play(ctx context.Context, r *run) error
	check(r *run, v *verdict)
}

// scripted is a script whose play and check share a state S of the
// scenario's own type: what the play saw, in typed fields a check cannot
// misspell. The play has returned, its goroutines joined, before the check
// reads S.
type scripted[S any] struct {
	state  S
	playS  func(ctx context.Context, r *run, s *S) error
	checkS func(r *run, v *verdict, s *S)
}

func (s *scripted[S]) play(ctx context.Context, r *run) error { return s.playS(ctx, r, &s.state) }
func (s *scripted[S]) check(r *run, v *verdict)               { s.checkS(r, v, &s.state) }

// newScript returns the maker of a scenario's scripts: play and check over
// a fresh zero S per run.
func newScript[S any](play func(ctx context.Context, r *run, s *S) error, check func(r *run, v *verdict, s *S)) func() script {
	return func() script { return &scripted[S]{playS: play, checkS: check} }
}

// noState is the state of a scenario whose check needs nothing from its
// play.
type noState struct{}

// moment is a moment on the history's clock that a play may or may not
// reach.
type moment struct {
	at time.Duration
	ok bool
}

// mark records now as the moment.
func (m *moment) mark(r *run) { m.at, m.ok = r.h.Now(), true }

// window is a fault's window, from the fault's start to its end.
type window struct{ from, to moment }

// complete reports whether the play reached both ends.
func (w *window) complete() bool { return w.from.ok && w.to.ok }

// duel is the state of the two-client scripts (scenarios 6, 7, 8, 14 and
// 15): A's and B's granted acquires and A's late write, nil if the script
// did not get that far.
type duel struct {
	a, b, late *Op
}

// opRef returns a pointer to a copy of op, for a state's optional fields.
func opRef(op Op) *Op { return &op }

// noCheck is the check of a scenario that asserts only what every scenario
// does (see commonChecks).
func noCheck(*run, *verdict, *noState) {}

// acquireA is A's acquire in a duel: client 0 tries for 2s. It returns
// nil, and records the fact, if A never acquired.
func (r *run) acquireA(ctx context.Context) *scriptedAcquire {
	a := r.acquire(ctx, 0, time.Now().Add(2*time.Second), false)
	if a == nil {
		r.fact("A never acquired")
	}
	return a
}

// writeA records A's granted acquire in s and writes the fenced resource
// with it as client 0.
func (r *run) writeA(ctx context.Context, s *duel, a *scriptedAcquire) {
	s.a = opRef(a.op)
	r.fencedWrite(ctx, 0, a.op, "A")
}

// writeB does the same for B, client 1, if B acquired (b not nil).
func (r *run) writeB(ctx context.Context, s *duel, b *scriptedAcquire) {
	if b != nil {
		s.b = opRef(b.op)
		r.fencedWrite(ctx, 1, b.op, "B")
	}
}

// lateWrite ends a duel: A writes again with its token, recorded in s,
// then A and B (if B acquired) release.
func (r *run) lateWrite(ctx context.Context, s *duel, a, b *scriptedAcquire) {
	s.late = opRef(r.fencedWrite(ctx, 0, a.op, "A-late"))
	r.release(ctx, 0, a)
	if b != nil {
		r.release(ctx, 1, b)
	}
}
