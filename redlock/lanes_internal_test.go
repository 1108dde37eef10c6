package redlock

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redisconn"
)

// A lane older than laneMaxAge goes back to the client on its next put, and
// the next take opens a fresh one that has proved nothing; a younger lane is
// kept as it is, proof and all.
func TestOldLanesAreReplaced(t *testing.T) {
	clients := redistest.Clients(t, redistest.Nodes(t, 1))
	p := lanesOf(redisconn.GoRedis(clients[0]))
	t.Cleanup(p.release)

	young := p.take()
	require.NotNil(t, young)
	young.proven = true
	p.put(young)
	again := p.take()
	assert.Same(t, young, again, "a young lane is kept")
	assert.True(t, again.proven)

	again.born = time.Now().Add(-laneMaxAge - time.Millisecond)
	p.put(again)
	fresh := p.take()
	require.NotNil(t, fresh)
	assert.NotSame(t, again, fresh, "an old lane is replaced")
	assert.False(t, fresh.proven, "a fresh lane proves itself anew")
	p.put(fresh)
	p.mu.Lock()
	defer p.mu.Unlock()
	assert.Equal(t, 1, p.open, "the old lane no longer counts as open")
}
