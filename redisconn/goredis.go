package redisconn

import (
	"context"

	"github.com/redis/go-redis/v9"
)

type goRedis struct {
	c    redis.UniversalClient
	info Info
}

// GoRedis returns the Conn of a go-redis client, nil for a nil client.
func GoRedis(c redis.UniversalClient) Conn {
	info := Info{Addr: addrOf(c), HonorsContext: honorsContext(c), Retries: clientRetries(c), Client: c, Identity: c}
	switch v := c.(type) {
	case *redis.Client:
		// Half the pool at most: the lanes are taken from its other users.
		info.ReadTimeout, info.PubSub, info.Lanes = v.Options().ReadTimeout, true, v.Options().PoolSize/2
	case *redis.ClusterClient:
		// A Cluster client subscribes on one node; PUBLISH (not SPUBLISH)
		// reaches every node of the cluster.
		info.Topology, info.ReadTimeout, info.PubSub = Cluster, v.Options().ReadTimeout, true
	case *redis.Ring:
		info.Topology = Ring
	}
	return &goRedis{c: c, info: info}
}

func (g *goRedis) Process(ctx context.Context, cmd *redis.Cmd) error { return g.c.Process(ctx, cmd) }

func (g *goRedis) Pipeline(ctx context.Context, cmds []*redis.Cmd) {
	_ = exec(ctx, g.c.Pipeline(), cmds)
}

func (g *goRedis) Tx(ctx context.Context, cmds []*redis.Cmd) error {
	return exec(ctx, g.c.TxPipeline(), cmds)
}

func exec(ctx context.Context, pipe redis.Pipeliner, cmds []*redis.Cmd) error {
	for _, cmd := range cmds {
		_ = pipe.Process(ctx, cmd)
	}
	_, err := pipe.Exec(ctx)
	return err
}

func (g *goRedis) Subscribe(ctx context.Context) PubSub { return g.c.Subscribe(ctx) }

func (g *goRedis) Shard(ctx context.Context, key string) (Conn, error) {
	cc, ok := g.c.(*redis.ClusterClient)
	if !ok {
		return g, nil
	}
	shard, err := cc.MasterForKey(ctx, key)
	if err != nil {
		return nil, err
	}
	return GoRedis(shard), nil
}

func (g *goRedis) EachPrimary(ctx context.Context, fn func(ctx context.Context, c Conn) error) error {
	cc, ok := g.c.(*redis.ClusterClient)
	if !ok {
		return fn(ctx, g)
	}
	return cc.ForEachMaster(ctx, func(ctx context.Context, shard *redis.Client) error {
		return fn(ctx, GoRedis(shard))
	})
}

func (g *goRedis) Refresh(ctx context.Context) {
	if cc, ok := g.c.(*redis.ClusterClient); ok {
		cc.ReloadState(ctx)
	}
}

func (g *goRedis) Info() Info { return g.info }

// Lane returns a *redis.Conn of a *redis.Client: it keeps one pooled
// connection until Close and fails for good once that one breaks.
func (g *goRedis) Lane() Lane {
	c, ok := g.c.(*redis.Client)
	if !ok || g.info.Lanes == 0 {
		return nil
	}
	conn := c.Conn()
	return &goRedisLane{c: conn, pipe: conn.Pipeline()}
}

// goRedisLane reuses one Pipeline: a Lane serves one batch at a time.
type goRedisLane struct {
	c    *redis.Conn
	pipe redis.Pipeliner
	buf  []redis.Cmder
}

func (l *goRedisLane) Process(ctx context.Context, cmd *redis.Cmd) error {
	return l.c.Process(ctx, cmd)
}

func (l *goRedisLane) Pipeline(ctx context.Context, cmds []*redis.Cmd) {
	l.buf = l.buf[:0]
	for _, cmd := range cmds {
		l.buf = append(l.buf, cmd)
	}
	_ = l.pipe.BatchProcess(ctx, l.buf...)
	_, _ = l.pipe.Exec(ctx)
	clear(l.buf)
}

func (l *goRedisLane) Close() { _ = l.c.Close() }
