package fencing_test

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/fencing"
)

func TestStaleTokenError(t *testing.T) {
	t.Parallel()
	e := &fencing.StaleTokenError{Resource: "orders/1", Token: 33, Current: 34}
	assert.EqualError(t, e, `fencing: stale token 33 for resource "orders/1": current token is 34`)
	assert.ErrorIs(t, e, fencing.ErrStaleToken)
	wrapped := fmt.Errorf("saving order: %w", e)
	assert.ErrorIs(t, wrapped, fencing.ErrStaleToken)
	var got *fencing.StaleTokenError
	require.ErrorAs(t, wrapped, &got)
	assert.Same(t, e, got)
	assert.NotErrorIs(t, e, fencing.ErrInvalidToken)
	assert.NotErrorIs(t, e, fencing.ErrInvalidArgument)
	assert.False(t, errors.Is(fencing.ErrInvalidToken, fencing.ErrStaleToken))
}

func TestTokenString(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "0", fencing.Token(0).String())
	assert.Equal(t, "18446744073709551615", fencing.Token(math.MaxUint64).String())
}

// step is one Check in a sequence and what it must return: nil, or an error
// matching want; for ErrStaleToken, a *StaleTokenError with current.
type step struct {
	resource string
	token    fencing.Token
	want     error
	current  fencing.Token
}

var sequences = []struct {
	name  string
	steps []step
}{
	{"accept equal", []step{
		{"a", 5, nil, 0},
		{"a", 5, nil, 0},
		{"a", 5, nil, 0},
	}},
	{"accept larger", []step{
		{"a", 1, nil, 0},
		{"a", 2, nil, 0},
		{"a", 10, nil, 0},
		{"a", 1000, nil, 0},
	}},
	{"reject smaller", []step{
		{"a", 10, nil, 0},
		{"a", 9, fencing.ErrStaleToken, 10},
		{"a", 1, fencing.ErrStaleToken, 10},
		{"a", 10, nil, 0}, // the rejections did not lower the fence
		{"a", 11, nil, 0},
		{"a", 10, fencing.ErrStaleToken, 11},
	}},
	{"reject zero", []step{
		{"a", 0, fencing.ErrInvalidToken, 0},
		{"a", 1, nil, 0},
		{"a", 0, fencing.ErrInvalidToken, 0},
		{"a", 1, nil, 0}, // 0 was not recorded
		{"a", 2, nil, 0},
	}},
	{"per-resource independence", []step{
		{"a", 10, nil, 0},
		{"b", 1, nil, 0},
		{"b", 5, nil, 0},
		{"a", 9, fencing.ErrStaleToken, 10},
		{"b", 4, fencing.ErrStaleToken, 5},
		{"c", 1, nil, 0},
		{"a", 10, nil, 0},
		{"A", 1, nil, 0}, // names are case-sensitive
	}},
	{"resource names with hash-tag and SQL characters", []step{
		{"orders/{42}:x", 7, nil, 0},
		{"o'; DROP TABLE redfence_fences; --", 3, nil, 0},
		{"orders/{42}:x", 6, fencing.ErrStaleToken, 7},
		{"o'; DROP TABLE redfence_fences; --", 2, fencing.ErrStaleToken, 3},
		{"ünïcødé", 1, nil, 0},
	}},
	{"empty resource", []step{
		{"", 1, fencing.ErrInvalidArgument, 0},
		{"", 0, fencing.ErrInvalidArgument, 0},
	}},
	{"exact beyond 2^53", []step{ // Lua numbers are doubles: 2^53+1 == 2^53 there
		{"a", 1 << 53, nil, 0},
		{"a", 1<<53 + 1, nil, 0},
		{"a", 1 << 53, fencing.ErrStaleToken, 1<<53 + 1},
		{"a", math.MaxInt64 - 1, nil, 0},
		{"a", math.MaxInt64, nil, 0},
		{"a", math.MaxInt64 - 1, fencing.ErrStaleToken, math.MaxInt64},
	}},
}

func TestGuardSequences(t *testing.T) {
	t.Parallel()
	for _, kind := range guardKinds() {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			for _, seq := range sequences {
				t.Run(seq.name, func(t *testing.T) {
					t.Parallel()
					g := kind.new(t)
					ctx := testCtx(t)
					for i, s := range seq.steps {
						err := g.Check(ctx, s.resource, s.token)
						if s.want == nil {
							require.NoError(t, err, "step %d: %q with %d", i, s.resource, s.token)
							continue
						}
						require.ErrorIs(t, err, s.want, "step %d: %q with %d", i, s.resource, s.token)
						if errors.Is(s.want, fencing.ErrStaleToken) {
							requireStale(t, err, s.resource, s.token, s.current)
						} else {
							assert.NotErrorIs(t, err, fencing.ErrStaleToken, "step %d", i)
						}
					}
				})
			}
		})
	}
}

// TestGuardFullTokenRange checks tokens above math.MaxInt64: the memory and
// Redis guards compare all 64 bits exactly; the SQL guard's BIGINT cannot
// hold them and says so.
func TestGuardFullTokenRange(t *testing.T) {
	t.Parallel()
	big := []step{
		{"a", math.MaxInt64, nil, 0},
		{"a", 1 << 63, nil, 0},
		{"a", 1<<63 + 1, nil, 0},
		{"a", 1 << 63, fencing.ErrStaleToken, 1<<63 + 1},
		{"a", math.MaxUint64 - 1, nil, 0},
		{"a", math.MaxUint64, nil, 0},
		{"a", math.MaxUint64, nil, 0},
		{"a", math.MaxUint64 - 1, fencing.ErrStaleToken, math.MaxUint64},
		{"a", 9, fencing.ErrStaleToken, math.MaxUint64},
	}
	for _, kind := range guardKinds() {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			g := kind.new(t)
			ctx := testCtx(t)
			isSQL := kind.name == "SQL" || kind.name == "SQLCheckTx"
			for i, s := range big {
				err := g.Check(ctx, s.resource, s.token)
				switch {
				case isSQL && s.token > math.MaxInt64:
					require.ErrorIs(t, err, fencing.ErrInvalidToken, "step %d", i)
					assert.Contains(t, err.Error(), "BIGINT")
				case isSQL && errors.Is(s.want, fencing.ErrStaleToken):
					// The SQL fence stays at MaxInt64, which the stale
					// tokens here are at least.
				case s.want == nil:
					require.NoError(t, err, "step %d", i)
				default:
					requireStale(t, err, s.resource, s.token, s.current)
				}
			}
			if isSQL {
				requireStale(t, g.Check(ctx, "a", 9), "a", 9, math.MaxInt64)
			}
		})
	}
}
