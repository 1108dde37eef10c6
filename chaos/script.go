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

// opRef returns a pointer to a copy of op, for a state's optional fields.
func opRef(op Op) *Op { return &op }

// noCheck is the check of a scenario that asserts only what every scenario
// does (see commonChecks).
func noCheck(*run, *verdict, *noState) {}
