package redlock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/internal/nilcheck"
	"github.com/redfence/redfence/internal/quorum"
	"github.com/redfence/redfence/redisconn"
)

const valueBytes = 20 // random bytes in a lease's owner value

// node is one independent Redis deployment.
type node struct {
	conn  redisconn.Conn
	addr  string
	batch *batcher
}

// Client runs locks over a fixed set of nodes: independent Redis primaries
// (Redlock), or one Redis deployment (the single-instance lock). It is safe
// for concurrent use.
type Client struct {
	pkg     string
	nodes   []node
	need    int
	opts    []Option // the Mutexes' options apply after them
	cfg     config   // opts, resolved
	tracker quorum.Tracker
	batches sync.WaitGroup   // the batchers' goroutines
	now     func() time.Time // time.Now; tests may replace it before first use
	tel     *telemetry
	wait    *waiting // nil: wake-up off

	life       lifecycle // Close and the calls in flight
	closeLanes sync.Once
	leaveFn    func() // e.life.ops.Done, bound once: a method value per enter would allocate
}

// New returns a Client over clients: one per independent Redis primary for
// Redlock (an odd number, 3 or more; never replicas of one another), or a
// single client for the single-instance lock (a server, a Sentinel-managed
// primary, a Cluster). opts set the defaults of every Mutex. The restart
// quarantine is on by default over several nodes and off over one
// (WithQuarantine).
//
// It returns a *ConfigError for no clients, a nil or repeated client, two
// clients that reach one server (asked by run id, in parallel, within
// max(node timeout, 1s); a node that does not answer is not checked), a
// node that refuses scripts, or an invalid option. See docs/topologies.md
// for client settings (ContextTimeoutEnabled, MaxRetries).
func New(clients []redis.UniversalClient, opts ...Option) (*Client, error) {
	conns := make([]redisconn.Conn, len(clients))
	for i, c := range clients {
		conns[i] = redisconn.GoRedis(c)
	}
	return NewFromConns(conns, opts...)
}

// NewFromConns is New over the nodes of another Redis client, through its
// adapter (module github.com/redfence/redfence/rfrueidis for rueidis).
func NewFromConns(conns []redisconn.Conn, opts ...Option) (*Client, error) {
	pkg := "redlock"
	if len(conns) == 1 {
		pkg = "single"
	} else {
		opts = append([]Option{WithQuarantine(defaultQuarantine)}, opts...)
	}
	return newClient(pkg, conns, opts)
}

// newClient validates conns and opts; pkg names the lock in errors.
func newClient(pkg string, conns []redisconn.Conn, opts []Option) (*Client, error) {
	if len(conns) == 0 {
		return nil, &ConfigError{Pkg: pkg, Field: "clients", Msg: "no Redis clients given"}
	}
	nodes := make([]node, len(conns))
	for i, c := range conns {
		if nilcheck.IsNil(c) || nilcheck.IsNil(c.Info().Identity) {
			return nil, &ConfigError{Pkg: pkg, Field: "clients", Msg: fmt.Sprintf("client %d is nil", i)}
		}
		info := c.Info()
		for j := 0; j < i; j++ {
			prev := conns[j].Info()
			if prev.Identity == info.Identity {
				return nil, &ConfigError{Pkg: pkg, Field: "clients", Msg: fmt.Sprintf("clients %d and %d are the same client", j, i)}
			}
			if info.Addr != "" && prev.Addr == info.Addr {
				return nil, &ConfigError{Pkg: pkg, Field: "clients", Msg: fmt.Sprintf("clients %d and %d have the same address %s", j, i, info.Addr)}
			}
		}
		nodes[i] = node{conn: c, addr: cmp.Or(info.Addr, fmt.Sprintf("%T", info.Identity))}
	}
	cfg, err := newConfig(opts).resolve(pkg)
	if err != nil {
		return nil, err
	}
	if err := checkQuarantine(pkg, nodes, cfg); err != nil {
		return nil, err
	}
	if err := checkAcks(pkg, nodes, cfg); err != nil {
		return nil, err
	}
	e := &Client{life: lifecycle{closed: make(chan struct{}), acquiring: map[*int]context.CancelCauseFunc{}}, pkg: pkg, nodes: nodes,
		need: quorum.Majority(len(nodes)), opts: slices.Clone(opts), cfg: cfg, now: time.Now, tel: newTelemetry(cfg)}
	e.leaveFn = e.life.ops.Done
	for i := range nodes {
		nodes[i].batch = newBatcher(nodes[i].conn, &e.batches, cfg, len(nodes))
	}
	if err := e.identify(max(cfg.nodeTimeout, time.Second)); err != nil {
		for _, n := range nodes {
			n.batch.lanes.release()
		}
		return nil, err
	}
	if !cfg.noWakeup {
		e.wait = newWaiting(nodes, e.tel.log)
	}
	return e, nil
}

// identify asks every node for its run id with a script (probe.lua), and
// refuses a node that may not run scripts and two clients that reach the
// same server. A node that does not answer is not checked: a minority may be
// down at start (docs/design.md, Options and defaults).
func (e *Client) identify(timeout time.Duration) error {
	r := quorum.Start(context.Background(), len(e.nodes), len(e.nodes), timeout, &e.tracker,
		func(ctx context.Context, i int) (string, error) {
			c := e.nodes[i].conn
			top := c.Info().Topology
			if top == redisconn.Ring {
				return "", nil // a script without keys cannot be routed
			}
			id, err := runScript(ctx, c, probeScript, nil).Text()
			if top == redisconn.Cluster {
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
			return &ConfigError{Pkg: e.pkg, Field: "clients", Msg: fmt.Sprintf("node %d (%s) refuses scripts (%v): every lease's extend and release run Lua scripts, so the user needs +evalsha and +eval (docs/topologies.md, The minimal ACL rule)", i, e.nodes[i].addr, rep.Err)}
		}
		if rep.Err != nil || rep.Value == "" {
			continue
		}
		if j, ok := seen[rep.Value]; ok {
			return &ConfigError{Pkg: e.pkg, Field: "clients", Msg: fmt.Sprintf("clients %d (%s) and %d (%s) reach the same Redis server (run id %s), which would vote twice: give each independent server once", j, e.nodes[j].addr, i, e.nodes[i].addr, rep.Value)}
		}
		seen[rep.Value] = i
	}
	return nil
}

func (e *Client) waitIdle() {
	e.tracker.Wait()
	for _, n := range e.nodes {
		n.batch.waitIdle()
	}
}

// Clients returns the go-redis clients the Client was made with (New), one
// per node in order, in a new slice; nil for a Client made over another
// client's adapter (NewFromConns). Package coord runs its own commands on
// them.
func (e *Client) Clients() []redis.UniversalClient {
	out := make([]redis.UniversalClient, len(e.nodes))
	for i, n := range e.nodes {
		if out[i] = n.conn.Info().Client; out[i] == nil { // another client's adapter
			return nil
		}
	}
	return out
}

// Close shuts the Client down; it is safe to call during use and more than
// once, and always returns nil. Calls that begin after it fail with
// ErrClosed; a waiting Lock returns ErrNotAcquired and ErrClosed; other
// calls in flight are waited for (each bounded by the node timeout). It
// does not close the Redis clients, and leases not released stay on the
// nodes until their TTL runs out (docs/design.md, Closing a Client).
func (e *Client) Close() error {
	e.shut()
	if e.wait != nil {
		e.wait.notes.close()
	}
	e.waitIdle()
	for _, n := range e.nodes {
		n.batch.close()
	}
	e.batches.Wait() // the senders' goroutines
	e.closeLanes.Do(func() {
		for _, n := range e.nodes {
			n.batch.lanes.release()
		}
	})
	return nil
}

// lifecycle is a Client's open or closed state and its calls in flight:
// Close waits for those that began before it and refuses the others.
type lifecycle struct {
	ops     sync.WaitGroup // calls in flight (enter without leave); none added once closing
	mu      sync.Mutex     // guards the fields below; never held across I/O
	closing bool
	closed  chan struct{} // closed when Close begins
	// acquiring cancels the waiting Lock calls, which Close interrupts.
	acquiring map[*int]context.CancelCauseFunc
}

var closedDone = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

func (e *Client) nilContext() error {
	return &ConfigError{Pkg: e.pkg, Field: "context", Msg: "nil (pass context.Background() or a context derived from it)"}
}

// enter registers a call that talks to the nodes; the caller calls leave
// when it ends. It returns ErrClosed once Close began, or a nil ctx's error.
func (e *Client) enter(ctx context.Context) (leave func(), err error) {
	if ctx == nil {
		return nil, e.nilContext()
	}
	lc := &e.life
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.closing {
		return nil, ErrClosed
	}
	lc.ops.Add(1)
	return e.leaveFn, nil
}

// enterAcquire is enter whose ErrClosed wraps ErrNotAcquired too.
func (e *Client) enterAcquire(ctx context.Context) (leave func(), err error) {
	leave, err = e.enter(ctx)
	if errors.Is(err, ErrClosed) {
		err = fmt.Errorf("%w: %w", ErrNotAcquired, err)
	}
	return leave, err
}

// interruptible returns ctx, cancelled by Close, for a waiting Lock, and
// done, to call with Lock's error: it returns that error, or ErrNotAcquired
// and ErrClosed if Close interrupted the call.
func (e *Client) interruptible(ctx context.Context) (context.Context, func(error) error) {
	cctx, cancel := context.WithCancelCause(ctx)
	id := new(int)
	lc := &e.life
	lc.mu.Lock()
	if lc.closing {
		cancel(ErrClosed) // Close began after enter: its cancels have run
	} else {
		lc.acquiring[id] = cancel
	}
	lc.mu.Unlock()
	return cctx, func(err error) error {
		lc.mu.Lock()
		delete(lc.acquiring, id)
		lc.mu.Unlock()
		if err != nil && ctx.Err() == nil && errors.Is(context.Cause(cctx), ErrClosed) {
			err = fmt.Errorf("%w: %w", ErrNotAcquired, ErrClosed)
		}
		cancel(context.Canceled)
		return err
	}
}

// shut refuses new calls, interrupts waiting Locks, waits for the others.
func (e *Client) shut() {
	lc := &e.life
	lc.mu.Lock()
	if !lc.closing {
		lc.closing = true
		close(lc.closed)
		for _, cancel := range lc.acquiring {
			cancel(ErrClosed)
		}
	}
	lc.mu.Unlock()
	lc.ops.Wait()
}
