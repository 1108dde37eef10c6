package redlock

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redisconn"
)

// releaseHeldOnNode2 starts 3 nodes and a Client on them (quarantine off,
// TTL an hour, node timeout a minute, then opts) whose release scripts to
// node 2 wait for gate, saying so on held, and returns a fresh key.
func releaseHeldOnNode2(t *testing.T, opts ...Option) (clients []redis.UniversalClient, e *Client, key string, gate, held chan struct{}) {
	t.Helper()
	ctx := context.Background()
	clients = redistest.Clients(t, redistest.Nodes(t, 3))
	conns := make([]redisconn.Conn, len(clients))
	for i, cl := range clients {
		require.NoError(t, releaseScript.Load(ctx, cl).Err()) // sent as EVALSHA from the first
		conns[i] = redisconn.GoRedis(cl)
	}
	gate, held = make(chan struct{}), make(chan struct{}, 1)
	conns[2] = (&gatedConn{script: releaseScript, held: held, gate: gate}).wrap(conns[2])
	e, err := newClient("redlock", conns, append([]Option{WithQuarantine(0), WithTTL(time.Hour), WithNodeTimeout(time.Minute)}, opts...))
	require.NoError(t, err)
	return clients, e, redistest.Key(t), gate, held
}

// Release returns once a majority of the nodes deleted the value, while
// another node's delete is still on its way. A Lock of the same key then
// holds on the nodes that deleted it, and its command to the other node
// waits behind the delete (a node gets one key's commands in order): once
// the delete arrives, that node grants the new lease too.
func TestReleaseReturnsAtMajority(t *testing.T) {
	ctx := context.Background()
	clients, e, key, gate, held := releaseHeldOnNode2(t)
	m, err := e.NewMutex(key)
	require.NoError(t, err)
	l, err := m.Lock(ctx)
	require.NoError(t, err)
	l.acquire.Settle()
	for i, cl := range clients {
		require.Equal(t, l.Value(), cl.Get(ctx, key).Val(), "node %d holds the lease", i)
	}

	done := make(chan error, 1)
	go func() { done <- l.Release(ctx) }()
	<-held // node 2's delete is on its way, and stays there
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second): // the node timeout is a minute
		close(gate)
		t.Fatal("Release waited for the node whose delete was held back")
	}
	for i, cl := range clients[:2] {
		assert.Zero(t, cl.Exists(ctx, key).Val(), "node %d deleted the value before Release returned", i)
	}
	assert.Equal(t, l.Value(), clients[2].Get(ctx, key).Val(), "node 2's delete has not arrived")

	l2, err := m.Lock(ctx) // nodes 0 and 1 grant it
	require.NoError(t, err)
	var looks atomic.Int64
	count := func(b *batcher) {
		if b == e.nodes[2].batch {
			looks.Add(1)
		}
	}
	testHookLook.Store(&count)
	defer testHookLook.Store(nil)
	for range 100 { // time passes while node 2's acquire waits
		require.NoError(t, clients[0].Ping(ctx).Err())
	}
	assert.Less(t, looks.Load(), int64(10), "node 2's senders wait for the delete on its way, and do not spin")
	close(gate)
	l2.acquire.Settle()
	assert.Equal(t, l2.Value(), clients[2].Get(ctx, key).Val(), "node 2 got the acquire after the delete, and granted it")
	require.NoError(t, l2.Release(ctx))
	require.NoError(t, e.Close()) // waits for the deletes on their way
	for i, cl := range clients {
		assert.Zero(t, cl.Exists(ctx, key).Val(), "node %d deleted the value once its delete arrived", i)
	}
}

// A delete that lands after Release returned still counts in the node
// error metric when it fails: here node 2 no longer holds the value when
// its held-back delete arrives.
func TestReleaseCountsLateNodeErrors(t *testing.T) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(ctx) }()
	clients, e, key, gate, held := releaseHeldOnNode2(t, WithTelemetry(nil, mp))
	m, err := e.NewMutex(key)
	require.NoError(t, err)
	l, err := m.TryLock(ctx)
	require.NoError(t, err)
	l.acquire.Settle()

	done := make(chan error, 1)
	go func() { done <- l.Release(ctx) }()
	<-held
	require.NoError(t, <-done, "a majority deleted it")
	require.NoError(t, clients[2].Del(ctx, key).Err()) // node 2's copy is gone before its delete lands
	close(gate)
	require.NoError(t, e.Close()) // waits for the delete on its way

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			if mt.Name != "redfence.node.errors" {
				continue
			}
			for _, dp := range mt.Data.(metricdata.Sum[int64]).DataPoints {
				node, _ := dp.Attributes.Value("redfence.node")
				op, _ := dp.Attributes.Value("redfence.op")
				got[op.AsString()+" "+node.AsString()] += dp.Value
			}
		}
	}
	assert.Equal(t, map[string]int64{"release " + e.nodes[2].addr: 1}, got, "node 2's late failure, and nothing else")
}
