package chaos_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/chaos"
	"github.com/redfence/redfence/internal/redistest"
)

// A link listening on a given host forwards, blackholes and heals like any
// other, and HealAll and Close cover it.
func TestAddLinkOn(t *testing.T) {
	t.Parallel()
	nodes := procNodes(t, 1, chaos.NodeSpec{})
	nw, err := chaos.NewNetwork(nodes, 1)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, nw.Close()) })

	host, err := chaos.NodeHost(t.Context(), chaos.NewProcessBackend())
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1", host, "process nodes reach the host on loopback")

	l, err := nw.AddLinkOn("repl", host, nodes[0].Addr())
	require.NoError(t, err)
	assert.Equal(t, "repl", l.Name())
	assert.Equal(t, nodes[0].Addr(), l.Upstream())
	c := redistest.Client(t, l.Addr())
	ctx := procCtx(t, 10*time.Second)
	require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
	assert.Equal(t, "v", redistest.Client(t, nodes[0].Addr()).Get(ctx, "k").Val(), "the write went through the link")

	require.NoError(t, l.Blackhole())
	sctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	assert.Error(t, c.Ping(sctx).Err(), "a blackholed link swallows requests")
	require.NoError(t, nw.HealAll())
	assert.NoError(t, c.Ping(ctx).Err(), "HealAll heals it")

	_, err = nw.AddLinkOn("repl", host, nodes[0].Addr())
	assert.ErrorContains(t, err, "exists")
	_, err = nw.AddLinkOn("x", "localhost", nodes[0].Addr())
	assert.ErrorContains(t, err, "not an IP address")
	_, err = nw.AddLinkOn("y", host, "nowhere")
	assert.ErrorContains(t, err, "invalid upstream")
	_, err = nw.AddLinkOn("", host, nodes[0].Addr())
	assert.Error(t, err)
}
