package core

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/internal/nilcheck"
	"github.com/redfence/redfence/internal/quorum"
)

// ValueBytes is how many random bytes make a lease's owner value.
const ValueBytes = 20

// Node is one independent Redis deployment.
type Node struct {
	Conn Conn
	// Client is the go-redis client behind Conn, nil for another client.
	Client redis.UniversalClient
	Addr   string
	batch  *batcher
	// retries says how the client's own retries can outlast the node
	// timeout, or "" (clientRetries).
	retries string
}

// Engine runs the lock protocols over a fixed set of nodes.
type Engine struct {
	pkg     string
	nodes   []Node
	need    int
	base    Config
	tracker quorum.Tracker
	batches sync.WaitGroup   // the batchers' goroutines
	now     func() time.Time // time.Now; tests may replace it before first use
	tel     *telemetry
	wait    *waiting // nil: wake-up off
	acks    *acks    // nil: replica acknowledgement off

	life       lifecycle // Close and the calls in flight (closing.go)
	closeLanes sync.Once
	// leaveFn is e.leave, bound once in NewEngine: Enter returns it, and a
	// method value made per call would allocate.
	leaveFn func()
}

// NewEngine validates clients and the default configuration.
func NewEngine(pkg string, clients []redis.UniversalClient, base Config) (*Engine, error) {
	conns := make([]Conn, len(clients))
	for i, c := range clients {
		if !nilcheck.IsNil(c) {
			conns[i] = GoRedis(c)
		}
	}
	return NewEngineConns(pkg, conns, base)
}

// NewEngineConns is NewEngine over Conns: those of go-redis clients, or of
// another client's adapter.
func NewEngineConns(pkg string, conns []Conn, base Config) (*Engine, error) {
	if len(conns) == 0 {
		return nil, &ConfigError{Pkg: pkg, Field: "clients", Msg: "no Redis clients given"}
	}
	nodes := make([]Node, len(conns))
	for i, c := range conns {
		if nilcheck.IsNil(c) {
			return nil, &ConfigError{Pkg: pkg, Field: "clients", Msg: fmt.Sprintf("client %d is nil", i)}
		}
		info := c.Info()
		if nilcheck.IsNil(info.Identity) {
			return nil, &ConfigError{Pkg: pkg, Field: "clients", Msg: fmt.Sprintf("client %d is nil", i)}
		}
		for j := 0; j < i; j++ {
			if nodes[j].Conn.Info().Identity == info.Identity {
				return nil, &ConfigError{Pkg: pkg, Field: "clients", Msg: fmt.Sprintf("clients %d and %d are the same client", j, i)}
			}
			if info.Addr != "" && nodes[j].Addr == info.Addr {
				return nil, &ConfigError{Pkg: pkg, Field: "clients", Msg: fmt.Sprintf("clients %d and %d have the same address %s", j, i, info.Addr)}
			}
		}
		nodes[i] = Node{Conn: c, Client: info.Client, Addr: info.Addr, retries: info.Retries}
	}
	for i := range nodes {
		if nodes[i].Addr == "" {
			nodes[i].Addr = fmt.Sprintf("%T", nodes[i].Conn.Info().Identity)
		}
	}
	cfg, err := base.Resolve(pkg)
	if err != nil {
		return nil, err
	}
	if err := checkQuarantine(pkg, nodes, cfg); err != nil {
		return nil, err
	}
	if err := checkAcks(pkg, nodes, cfg); err != nil {
		return nil, err
	}
	e := &Engine{pkg: pkg, nodes: nodes, need: quorum.Majority(len(nodes)), base: base, now: time.Now, tel: newTelemetry(base)}
	e.leaveFn = e.leave
	if cfg.ReplicaAcks > 0 {
		e.acks = &acks{n: cfg.ReplicaAcks, timeout: cfg.AckTimeout}
	}
	for i := range nodes {
		nodes[i].batch = newBatcher(nodes[i].Conn, &e.batches, e.acks)
	}
	if err := e.identify(max(cfg.NodeTimeout, IdentifyTimeout)); err != nil {
		for _, n := range nodes {
			n.batch.lanes.release()
		}
		return nil, err
	}
	if !base.NoWakeup {
		e.wait = newWaiting(nodes, e.need, e.tel.log)
	}
	return e, nil
}

// IdentifyTimeout is how long NewEngine waits, at least, for each node to
// answer the probe (identify).
const IdentifyTimeout = time.Second

// identify asks every node, in parallel and within timeout, for its run id
// with a script (probe.lua). It refuses a node whose user may not run
// scripts (NOPERM: every lease's extend and release are scripts), and two
// clients that reach the same server under two addresses (127.0.0.1:P and
// localhost:P, say), which would give it two votes. A node that does not
// answer, or answers with another error, is not checked: the engine is still
// built, since a minority may be down at start, and such a node's identity
// is unknown until CheckNodes reports it. Cluster and Ring clients are
// checked for scripts only (their probe reaches one shard of several).
//
// New takes no context: the probe is bounded by timeout alone.
func (e *Engine) identify(timeout time.Duration) error {
	r := quorum.Start(context.Background(), len(e.nodes), len(e.nodes), timeout, &e.tracker,
		func(ctx context.Context, i int) (string, error) {
			c := e.nodes[i].Conn
			top := c.Info().Topology
			if top == Ring {
				return "", nil // a script without keys cannot be routed
			}
			id, err := runScript(ctx, c, probeScript, nil).Text()
			if top == Cluster {
				id = ""
			}
			return id, err
		})
	r.Wait()
	replies := slices.Clone(r.Replies())
	slices.SortFunc(replies, func(a, b quorum.Reply[string]) int { return a.Index - b.Index })
	seen := make(map[string]int, len(replies))
	for _, rep := range replies {
		i := rep.Index
		if redis.HasErrorPrefix(rep.Err, "NOPERM") {
			return &ConfigError{Pkg: e.pkg, Field: "clients", Msg: fmt.Sprintf("node %d (%s) refuses scripts (%v): every lease's extend and release run Lua scripts, so the user needs +evalsha and +eval (docs/topologies.md, The minimal ACL rule)", i, e.nodes[i].Addr, rep.Err)}
		}
		if rep.Err != nil || rep.Value == "" {
			continue
		}
		if j, ok := seen[rep.Value]; ok {
			return &ConfigError{Pkg: e.pkg, Field: "clients", Msg: fmt.Sprintf("clients %d (%s) and %d (%s) reach the same Redis server (run id %s), which would vote twice: give each independent server once", j, e.nodes[j].Addr, i, e.nodes[i].Addr, rep.Value)}
		}
		seen[rep.Value] = i
	}
	return nil
}

// run sends the command args to every node, through the nodes' batchers,
// and decodes each reply with decode.
func (e *Engine) run(ctx context.Context, need int, timeout time.Duration, args []any, decode decoder) *quorum.Round[int64] {
	return e.sendAll(ctx, need, timeout, args, decode)
}

// timeout returns the per-node timeout of the default configuration.
func (e *Engine) timeout() time.Duration {
	cfg, _ := e.base.Resolve(e.pkg) // validated in NewEngine
	return cfg.NodeTimeout
}

// SetClock replaces the clock used to measure elapsed time. For tests only;
// call it before the engine is used.
func (e *Engine) SetClock(now func() time.Time) { e.now = now }

// Nodes returns the engine's nodes.
func (e *Engine) Nodes() []Node { return e.nodes }

// Quorum returns the number of nodes that must agree.
func (e *Engine) Quorum() int { return e.need }

// Wait blocks until every node call started by the engine has returned. Calls
// end at their per-node timeout when the client honours contexts, and at the
// client's own read timeout otherwise.
func (e *Engine) Wait() {
	e.tracker.Wait()
	for _, n := range e.nodes {
		n.batch.waitIdle()
	}
}

// Close refuses every call that begins after it (with ErrClosed),
// interrupts the Lock calls in flight, waits for the other calls in flight
// (each bounded by the node timeout), ends the engine's release-notice
// subscriptions, joining their goroutines, then waits as Wait does. It is
// safe to call concurrently with any use of the engine, and more than once.
func (e *Engine) Close() {
	e.shut()
	if e.wait != nil {
		e.wait.notes.close()
	}
	e.Wait()
	for _, n := range e.nodes {
		n.batch.close()
	}
	e.batches.Wait() // the senders' goroutines
	e.closeLanes.Do(func() {
		for _, n := range e.nodes {
			n.batch.lanes.release()
		}
	})
}
