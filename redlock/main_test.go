package redlock

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redisconn"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testEngine returns a Client of kind pkg ("redlock" or "single") with
// opts over n fresh nodes, and its clients. The test waits for the Client's
// work before the nodes go.
func testEngine(t *testing.T, pkg string, n int, opts ...Option) (*Client, []redis.UniversalClient) {
	t.Helper()
	clients := redistest.Clients(t, redistest.Nodes(t, n))
	conns := make([]redisconn.Conn, n)
	for i, c := range clients {
		conns[i] = redisconn.GoRedis(c)
	}
	e, err := newClient(pkg, conns, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	return e, clients
}
