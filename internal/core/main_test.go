package core

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/redfence/redfence/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testEngine returns an Engine of package pkg ("redlock" or "single") with
// cfg over n fresh nodes, and its clients. The test waits for the engine's
// work before the nodes go.
func testEngine(t *testing.T, pkg string, n int, cfg Config) (*Engine, []redis.UniversalClient) {
	t.Helper()
	clients := redistest.Clients(t, redistest.Nodes(t, n))
	e, err := NewEngine(pkg, clients, cfg)
	require.NoError(t, err)
	t.Cleanup(e.Close)
	return e, clients
}
