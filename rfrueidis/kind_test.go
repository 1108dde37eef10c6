package rfrueidis

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/redfence/redfence/internal/locktest"
	"github.com/redfence/redfence/redisconn"
	"github.com/redfence/redfence/redlock"
)

// The shared tests of internal/locktest build go-redis clients for the nodes
// they start; the kinds below hand the engine rueidis clients to the same
// servers instead (same address, user, password and TLS), so that every
// lock command of those tests goes through rueidis. The tests' own checks
// on the nodes stay go-redis calls.

var (
	opened   sync.Mutex
	rclients []rueidis.Client
)

// TestMain closes the rueidis clients the kinds opened, then checks for
// leaked goroutines.
func TestMain(m *testing.M) {
	code := m.Run()
	opened.Lock()
	for _, c := range rclients {
		c.Close()
	}
	opened.Unlock()
	if code == 0 {
		// A closed rueidis Cluster client closes its old connections 5s
		// after a slot refresh, and schedules a lazy slot refresh (a sleep
		// of up to a second) after a redirect or a broken connection, each
		// from a goroutine of its own that Close does not stop.
		if err := goleak.Find(
			goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2"),
			goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1"),
		); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// rueidisOf returns a rueidis client to the servers of c.
func rueidisOf(c redis.UniversalClient) (rueidis.Client, error) {
	opt := rueidis.ClientOption{DisableCache: true, DisableRetry: true}
	switch v := c.(type) {
	case *redis.Client:
		o := v.Options()
		opt.InitAddress, opt.Username, opt.Password, opt.TLSConfig = []string{o.Addr}, o.Username, o.Password, o.TLSConfig
	case *redis.ClusterClient:
		o := v.Options()
		opt.InitAddress, opt.Username, opt.Password, opt.TLSConfig = o.Addrs, o.Username, o.Password, o.TLSConfig
	default:
		panic("rueidisOf: a go-redis client other than Client or ClusterClient")
	}
	rc, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, err
	}
	opened.Lock()
	rclients = append(rclients, rc)
	opened.Unlock()
	if h := locktest.HooksOf(c); len(h) > 0 {
		return &hooked{Client: rc, hooks: h}, nil
	}
	return rc, nil
}

// hooked runs a rueidis client's commands through the go-redis hooks the
// shared tests added to the go-redis client of the same server: their
// probes see each lock command begin and end, and their gates hold its
// reply back, as over go-redis.
type hooked struct {
	rueidis.Client
	hooks []redis.Hook
}

func (h *hooked) Do(ctx context.Context, cmd rueidis.Completed) (res rueidis.RedisResult) {
	next := redis.ProcessHook(func(ctx context.Context, _ redis.Cmder) error {
		res = h.Client.Do(ctx, cmd)
		return res.Error()
	})
	for i := len(h.hooks) - 1; i >= 0; i-- {
		next = h.hooks[i].ProcessHook(next)
	}
	_ = next(ctx, redis.NewCmd(ctx, argsOf(cmd)...))
	return res
}

func (h *hooked) DoMulti(ctx context.Context, multi ...rueidis.Completed) (res []rueidis.RedisResult) {
	next := redis.ProcessPipelineHook(func(ctx context.Context, _ []redis.Cmder) error {
		res = h.Client.DoMulti(ctx, multi...)
		return nil
	})
	for i := len(h.hooks) - 1; i >= 0; i-- {
		next = h.hooks[i].ProcessPipelineHook(next)
	}
	cmds := make([]redis.Cmder, len(multi))
	for i, m := range multi {
		cmds[i] = redis.NewCmd(ctx, argsOf(m)...)
	}
	_ = next(ctx, cmds)
	return res
}

func argsOf(cmd rueidis.Completed) []any {
	s := cmd.Commands()
	a := make([]any, len(s))
	for i, v := range s {
		a[i] = v
	}
	return a
}

// connsOf returns the engine's connections over rueidis clients to the
// servers of clients. A server that refuses the connection (the shared
// tests' unreachable nodes) gets a deadConn: rueidis.NewClient dials at
// once and fails for a node that is down, so a Client over rueidis cannot
// be made with such a node (see doc.go); the tests model what the engine
// sees of it, every command failing with the dial's error. all reports
// whether every server answered.
func connsOf(clients []redis.UniversalClient) (conns []redisconn.Conn, rcs []rueidis.Client, all bool) {
	conns, rcs, all = make([]redisconn.Conn, len(clients)), make([]rueidis.Client, len(clients)), true
	for i, c := range clients {
		if c == nil {
			all = false
			continue
		}
		rc, err := rueidisOf(c)
		if err != nil {
			conns[i], all = &deadConn{addr: c.(*redis.Client).Options().Addr, err: err}, false
			continue
		}
		conns[i], rcs[i] = newConn(rc), rc
	}
	return conns, rcs, all
}

// deadConn is a node that could not be dialled: every command fails with
// the dial's error.
type deadConn struct {
	addr string
	err  error
}

func (d *deadConn) Process(_ context.Context, cmd *redis.Cmd) error { cmd.SetErr(d.err); return d.err }
func (d *deadConn) Pipeline(_ context.Context, cmds []*redis.Cmd) {
	for _, c := range cmds {
		c.SetErr(d.err)
	}
}
func (d *deadConn) Tx(ctx context.Context, cmds []*redis.Cmd) error {
	d.Pipeline(ctx, cmds)
	return d.err
}
func (d *deadConn) Subscribe(context.Context) redisconn.PubSub            { return nil }
func (d *deadConn) Lane() redisconn.Lane                                  { return nil }
func (d *deadConn) Shard(context.Context, string) (redisconn.Conn, error) { return d, nil }
func (d *deadConn) EachPrimary(context.Context, func(context.Context, redisconn.Conn) error) error {
	return d.err
}
func (d *deadConn) Refresh(context.Context) {}
func (d *deadConn) Info() redisconn.Info {
	return redisconn.Info{Addr: d.addr, HonorsContext: true, Identity: d}
}

// rueidisGoroutines are a rueidis connection's reader and writer, which it
// starts when it first has requests in flight and which live as long as
// the connection.
var rueidisGoroutines = []goleak.Option{
	goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*pipe)._backgroundRead"),
	goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*pipe)._backgroundWrite"),
	goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*pipe)._background"),
}

// redlockKind is Redlock over nodes nodes, through rueidis.
func redlockKind(nodes int) locktest.Kind {
	return locktest.Kind{
		Nodes: nodes,
		New: func(clients []redis.UniversalClient, opts ...redlock.Option) (*redlock.Client, error) {
			conns, rcs, all := connsOf(clients)
			if all {
				return New(rcs, opts...) // the public constructor, whenever it can be used
			}
			return redlock.NewFromConns(conns, opts...)
		},
		DefaultQuarantine: 60 * time.Second, // redlock's over several nodes
		ClientGoroutines:  rueidisGoroutines,
	}
}

// singleKind is the single-instance lock, through rueidis.
var singleKind = locktest.Kind{
	Nodes: 1,
	New: func(clients []redis.UniversalClient, opts ...redlock.Option) (*redlock.Client, error) {
		conns, rcs, all := connsOf(clients[:1])
		if all {
			return NewSingle(rcs[0], opts...)
		}
		return redlock.NewFromConns(conns, opts...)
	},
	ACLUnused:        []string{"+pttl"}, // only fenced Redlock's second phase sends PTTL
	ClientGoroutines: rueidisGoroutines,
}
