package fencing_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/fencing"
)

const (
	writers     = 8
	writeTokens = 400
)

func TestMemoryGuardConcurrentDo(t *testing.T) {
	t.Parallel()
	for _, order := range tokenOrders {
		t.Run(order.name, func(t *testing.T) {
			t.Parallel()
			g := fencing.NewMemoryGuard()
			lists := tokenLists(t, writeTokens, writers, order.ascending)

			// data and applied are written only by fn, under the guard's
			// lock; the read-modify-write of applied loses entries if two
			// fns ever overlap.
			var data fencing.Token
			var applied []fencing.Token
			outcomes := runWriters(lists, func(tok fencing.Token) error {
				return g.Do("account", tok, func() error {
					data = tok
					next := append(slices.Clone(applied), tok)
					runtime.Gosched()
					applied = next
					return nil
				})
			})
			checkOutcomes(t, outcomes, applied, writeTokens)
			assert.Equal(t, fencing.Token(writeTokens), data, "the data comes from the highest token")
		})
	}
}

func TestMemoryGuardKleppmann(t *testing.T) {
	t.Parallel()
	t.Run("guarded", func(t *testing.T) {
		t.Parallel()
		g := fencing.NewMemoryGuard()
		data := ""
		// Client A acquired the lock with token 33, then paused (a GC pause)
		// before writing; its lease expired. Client B acquired token 34 and
		// wrote.
		require.NoError(t, g.Do("file", 34, func() error { data = "B"; return nil }))
		// A wakes up and writes with its old token: rejected.
		ran := false
		err := g.Do("file", 33, func() error { ran = true; data = "A"; return nil })
		requireStale(t, err, "file", 33, 34)
		assert.False(t, ran, "the stale write did not run")
		assert.Equal(t, "B", data, "B's write survives")
	})
	t.Run("control: no guard loses B's update", func(t *testing.T) {
		t.Parallel()
		data := ""
		writeB := func() { data = "B" }
		writeA := func() { data = "A" }
		writeB()
		writeA() // A's late write lands
		assert.Equal(t, "A", data, "without fencing, A overwrote B")
	})
}

func TestMemoryGuardDo(t *testing.T) {
	t.Parallel()
	t.Run("fn error is returned and the token stays recorded", func(t *testing.T) {
		t.Parallel()
		g := fencing.NewMemoryGuard()
		boom := errors.New("boom")
		require.ErrorIs(t, g.Do("r", 5, func() error { return boom }), boom)
		requireStale(t, g.Check(t.Context(), "r", 4), "r", 4, 5)
	})
	t.Run("nil fn", func(t *testing.T) {
		t.Parallel()
		g := fencing.NewMemoryGuard()
		require.ErrorIs(t, g.Do("r", 5, nil), fencing.ErrInvalidArgument)
		require.NoError(t, g.Check(t.Context(), "r", 1), "a rejected call records nothing")
	})
	t.Run("invalid arguments do not run fn", func(t *testing.T) {
		t.Parallel()
		g := fencing.NewMemoryGuard()
		ran := false
		fn := func() error { ran = true; return nil }
		require.ErrorIs(t, g.Do("r", 0, fn), fencing.ErrInvalidToken)
		require.ErrorIs(t, g.Do("", 1, fn), fencing.ErrInvalidArgument)
		assert.False(t, ran)
	})
	t.Run("fn panics: the lock is released", func(t *testing.T) {
		t.Parallel()
		g := fencing.NewMemoryGuard()
		assert.Panics(t, func() { _ = g.Do("r", 1, func() error { panic("in fn") }) })
		require.NoError(t, g.Do("r", 2, func() error { return nil }))
	})
}

func TestMemoryGuardEdgeCases(t *testing.T) {
	t.Parallel()
	t.Run("zero value is ready", func(t *testing.T) {
		t.Parallel()
		var g fencing.MemoryGuard
		require.NoError(t, g.Check(t.Context(), "r", 3))
		requireStale(t, g.Check(t.Context(), "r", 2), "r", 2, 3)
	})
	t.Run("nil guard", func(t *testing.T) {
		t.Parallel()
		var g *fencing.MemoryGuard
		require.ErrorIs(t, g.Check(t.Context(), "r", 1), fencing.ErrInvalidArgument)
		require.ErrorIs(t, g.Do("r", 1, func() error { return nil }), fencing.ErrInvalidArgument)
	})
	t.Run("done context", func(t *testing.T) {
		t.Parallel()
		g := fencing.NewMemoryGuard()
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		require.ErrorIs(t, g.Check(ctx, "r", 5), context.Canceled)
		require.NoError(t, g.Check(t.Context(), "r", 1), "the cancelled Check recorded nothing")
	})
}
