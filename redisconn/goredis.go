package redisconn

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/internal/nilcheck"
)

type goRedis struct {
	c    redis.UniversalClient
	info Info
}

// GoRedis returns the Conn of a go-redis client, nil for a nil client.
func GoRedis(c redis.UniversalClient) Conn {
	if nilcheck.IsNil(c) {
		return nil
	}
	info := Info{Addr: addrOf(c), Client: c, Identity: c}
	switch v := c.(type) {
	case *redis.Client:
		o := v.Options()
		// Half the pool at most: the lanes are taken from its other users.
		info.ReadTimeout, info.PubSub, info.Lanes = o.ReadTimeout, true, o.PoolSize/2
		info.HonorsContext, info.Retries = o.ContextTimeoutEnabled, clientRetries(o.MaxRetries, o.DialerRetries)
	case *redis.ClusterClient:
		o := v.Options()
		// A Cluster client subscribes on one node; PUBLISH (not SPUBLISH)
		// reaches every node of the cluster.
		info.Topology, info.ReadTimeout, info.PubSub = Cluster, o.ReadTimeout, true
		info.HonorsContext, info.Retries = o.ContextTimeoutEnabled, clientRetries(o.MaxRetries, o.DialerRetries)
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

// clientRetries describes a client's retries (MaxRetries cmd, DialerRetries
// dial) that can outlast a per-node timeout, or "": go-redis retries within
// the command's context, so a refused connection ends at redfence's deadline
// as a timeout.
func clientRetries(cmd, dial int) string {
	var parts []string
	if cmd > 0 {
		parts = append(parts, fmt.Sprintf("MaxRetries %d", cmd))
	}
	if dial > 1 {
		parts = append(parts, fmt.Sprintf("DialerRetries %d", dial))
	}
	if len(parts) == 0 {
		return ""
	}
	return "the client's retries (" + strings.Join(parts, ", ") + ") may have hidden the node's error: " +
		"set MaxRetries -1, DialerRetries 1 (README, Lock clients)"
}

// addrOf returns a go-redis client's configured address(es), or "".
func addrOf(c redis.UniversalClient) string {
	var a []string
	switch v := c.(type) {
	case *redis.Client:
		if a := v.Options().Addr; a != "FailoverClient" {
			return a
		}
		return ""
	case *redis.ClusterClient:
		a = slices.Clone(v.Options().Addrs)
	case *redis.Ring:
		a = slices.Collect(maps.Values(v.Options().Addrs))
	default:
		return ""
	}
	slices.Sort(a)
	return strings.Join(a, ",")
}
