package coord_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/coord"
	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/ratelimit"
	"github.com/redfence/redfence/redlock"
)

// Every package's bad argument is the one shape: a *redlock.ConfigError
// naming its package and field, wrapping the one ErrInvalid.
func TestOneInvalidArgumentShape(t *testing.T) {
	_, lockErr := redlock.New(nil)
	_, coordErr := coord.New(nil)
	_, rateErr := ratelimit.New(nil, ratelimit.GCRA)
	fenceErr := fencing.NewMemoryGuard().Check(context.Background(), "", 1)
	for pkg, err := range map[string]error{"redlock": lockErr, "coord": coordErr, "ratelimit": rateErr, "fencing": fenceErr} {
		require.Error(t, err, pkg)
		var ce *redlock.ConfigError
		if assert.True(t, errors.As(err, &ce), "%s: %v", pkg, err) {
			assert.Equal(t, pkg, ce.Pkg)
		}
		assert.ErrorIs(t, err, redlock.ErrInvalid, pkg)
		assert.ErrorIs(t, err, coord.ErrInvalid, pkg)
		assert.ErrorIs(t, err, ratelimit.ErrInvalid, pkg)
		assert.ErrorIs(t, err, fencing.ErrInvalidArgument, pkg)
	}
}
