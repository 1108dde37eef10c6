package single_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/single"
)

// Vouch and CheckNodes answer a nil context with a *ConfigError, and a
// closed Client with ErrClosed (the locks' methods are covered by the
// conformance suite: NilArguments, CloseWhileInUse).
func TestVouchAndCheckNodesNilContextAndClosed(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, redistest.Client(t, redistest.Nodes(t, 1)[0].Addr()))
	var nilCtx context.Context
	var ce *single.ConfigError
	require.ErrorAs(t, c.Vouch(nilCtx), &ce)
	assert.Equal(t, "context", ce.Field)
	checks := c.CheckNodes(nilCtx)
	require.Len(t, checks, 1)
	assert.ErrorAs(t, checks[0].Err, &ce)

	require.NoError(t, c.Close())
	assert.ErrorIs(t, c.Vouch(ctx), single.ErrClosed)
	checks = c.CheckNodes(ctx)
	require.Len(t, checks, 1)
	assert.ErrorIs(t, checks[0].Err, single.ErrClosed)
	assert.Equal(t, 0, checks[0].Index)
}
