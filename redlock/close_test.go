package redlock_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
)

// Vouch and CheckNodes answer a nil context with a *ConfigError, and a
// closed Client with ErrClosed (the locks' methods are covered by the
// conformance suite: NilArguments, CloseWhileInUse).
func TestVouchAndCheckNodesNilContextAndClosed(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, redistest.Clients(t, redistest.Nodes(t, 3)))
	var nilCtx context.Context
	var ce *redlock.ConfigError
	require.ErrorAs(t, c.Vouch(nilCtx), &ce)
	assert.Equal(t, "context", ce.Field)
	checks := c.CheckNodes(nilCtx)
	require.Len(t, checks, 3)
	for _, ch := range checks {
		assert.ErrorAs(t, ch.Err, &ce)
	}

	require.NoError(t, c.Close())
	assert.ErrorIs(t, c.Vouch(ctx), redlock.ErrClosed)
	checks = c.CheckNodes(ctx)
	require.Len(t, checks, 3)
	for i, ch := range checks {
		assert.ErrorIs(t, ch.Err, redlock.ErrClosed)
		assert.Equal(t, i, ch.Index)
	}
}
