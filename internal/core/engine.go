package core

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/internal/quorum"
)

// ValueBytes is how many random bytes make a lease's owner value.
const ValueBytes = 20

// Node is one independent Redis deployment.
type Node struct {
	Client redis.UniversalClient
	Addr   string
	// ap is the client's AutoPipeliner (WithAutoPipeline), or nil: lock
	// commands then go through batch.
	ap    processor
	batch *batcher
	// retries says how the client's own retries can outlast the node
	// timeout, or "" (clientRetries).
	retries string
}

// processor is the part of a go-redis client a command goes through.
type processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
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
	wake    *waker // nil: wake-up off
	acks    *acks  // nil: replica acknowledgement off

	life lifecycle // Close and the calls in flight (closing.go)
}

// NewEngine validates clients and the default configuration.
func NewEngine(pkg string, clients []redis.UniversalClient, base Config) (*Engine, error) {
	if len(clients) == 0 {
		return nil, &ConfigError{pkg, "clients", "no Redis clients given"}
	}
	nodes := make([]Node, len(clients))
	for i, c := range clients {
		if isNil(c) {
			return nil, &ConfigError{pkg, "clients", fmt.Sprintf("client %d is nil", i)}
		}
		addr := AddrOf(c)
		for j := 0; j < i; j++ {
			if nodes[j].Client == c {
				return nil, &ConfigError{pkg, "clients", fmt.Sprintf("clients %d and %d are the same client", j, i)}
			}
			if addr != "" && nodes[j].Addr == addr {
				return nil, &ConfigError{pkg, "clients", fmt.Sprintf("clients %d and %d have the same address %s", j, i, addr)}
			}
		}
		nodes[i] = Node{Client: c, Addr: addr, retries: clientRetries(c)}
		if base.AutoPipeline {
			if rc, ok := c.(*redis.Client); ok {
				if ap, err := rc.AutoPipeline(); err == nil {
					nodes[i].ap = ap
				}
			}
		}
	}
	for i := range nodes {
		if nodes[i].Addr == "" {
			nodes[i].Addr = fmt.Sprintf("%T", nodes[i].Client)
		}
	}
	cfg, err := base.Resolve(pkg)
	if err != nil {
		return nil, err
	}
	if err := checkQuarantine(pkg, nodes, cfg); err != nil {
		return nil, err
	}
	if err := checkAcks(pkg, nodes, base, cfg); err != nil {
		return nil, err
	}
	e := &Engine{pkg: pkg, nodes: nodes, need: quorum.Majority(len(nodes)), base: base, now: time.Now, tel: newTelemetry(base)}
	if cfg.ReplicaAcks > 0 {
		e.acks = &acks{n: cfg.ReplicaAcks, timeout: cfg.AckTimeout}
	}
	for i := range nodes {
		nodes[i].batch = &batcher{client: nodes[i].Client, honorsCtx: honorsContext(nodes[i].Client), wg: &e.batches, acks: e.acks}
	}
	if err := e.identify(max(cfg.NodeTimeout, IdentifyTimeout)); err != nil {
		return nil, err
	}
	if !base.NoWakeup {
		e.wake = newWaker(nodes, e.need, e.tel.log)
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
//nolint:contextcheck // New takes no context: the probe is bounded by timeout alone
func (e *Engine) identify(timeout time.Duration) error {
	r := quorum.Start(context.Background(), len(e.nodes), len(e.nodes), timeout, &e.tracker,
		func(ctx context.Context, i int) (string, error) {
			c := e.nodes[i].Client
			if _, ok := c.(*redis.Ring); ok {
				return "", nil // a script without keys cannot be routed
			}
			id, err := probeScript.Run(ctx, c, nil).Text()
			if _, ok := c.(*redis.ClusterClient); ok {
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
			return &ConfigError{e.pkg, "clients", fmt.Sprintf("node %d (%s) refuses scripts (%v): every lease's extend and release run Lua scripts, so the user needs +evalsha and +eval (docs/topologies.md, The minimal ACL rule)", i, e.nodes[i].Addr, rep.Err)}
		}
		if rep.Err != nil || rep.Value == "" {
			continue
		}
		if j, ok := seen[rep.Value]; ok {
			return &ConfigError{e.pkg, "clients", fmt.Sprintf("clients %d (%s) and %d (%s) reach the same Redis server (run id %s), which would vote twice: give each independent server once", j, e.nodes[j].Addr, i, e.nodes[i].Addr, rep.Value)}
		}
		seen[rep.Value] = i
	}
	return nil
}

// checkQuarantine refuses the restart quarantine over Cluster clients.
func checkQuarantine(pkg string, nodes []Node, cfg Config) error {
	if cfg.Quarantine == 0 {
		return nil
	}
	for i, n := range nodes {
		if _, ok := n.Client.(*redis.ClusterClient); ok {
			return &ConfigError{pkg, "quarantine", fmt.Sprintf("client %d is a Redis Cluster client: the restart quarantine needs one marker key per node, which Cluster cannot address; turn the quarantine off", i)}
		}
	}
	return nil
}

// clientRetries describes the retries of c that can outlast a per-node
// timeout, or returns "": go-redis retries a failed command (MaxRetries,
// default 3) and a failed dial (DialerRetries, default 5, 100ms apart) within
// the command's context, so a refused connection or a READONLY replica ends
// at redfence's deadline as a timeout, its own error never seen.
func clientRetries(c redis.UniversalClient) string {
	var cmd, dial int
	switch v := c.(type) {
	case *redis.Client:
		cmd, dial = v.Options().MaxRetries, v.Options().DialerRetries
	case *redis.ClusterClient:
		cmd, dial = v.Options().MaxRetries, v.Options().DialerRetries
	default:
		return ""
	}
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

// hintedTimeoutError is a node's timeout with a note on what may have caused it.
type hintedTimeoutError struct {
	err  error
	hint string
}

func (e hintedTimeoutError) Error() string { return e.err.Error() + " (" + e.hint + ")" }
func (e hintedTimeoutError) Unwrap() error { return e.err }

func honorsContext(c redis.UniversalClient) bool {
	switch v := c.(type) {
	case *redis.Client:
		return v.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return v.Options().ContextTimeoutEnabled
	}
	return false
}

func isNil(c redis.UniversalClient) bool {
	if c == nil {
		return true
	}
	v := reflect.ValueOf(c)
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Func, reflect.Slice, reflect.Chan:
		return v.IsNil()
	}
	return false
}

// AddrOf returns a client's configured address(es) for messages and
// duplicate detection, or "" when it cannot tell.
func AddrOf(c redis.UniversalClient) string {
	switch v := c.(type) {
	case *redis.Client:
		if a := v.Options().Addr; a != "FailoverClient" {
			return a
		}
	case *redis.ClusterClient:
		a := slices.Clone(v.Options().Addrs)
		slices.Sort(a)
		return strings.Join(a, ",")
	case *redis.Ring:
		var a []string
		for _, addr := range v.Options().Addrs {
			a = append(a, addr)
		}
		slices.Sort(a)
		return strings.Join(a, ",")
	}
	return ""
}

// run sends the command args to every node and decodes each reply with
// decode: through the nodes' batchers, or, with WithAutoPipeline, through
// each node's AutoPipeliner from a goroutine per node.
func (e *Engine) run(ctx context.Context, need int, timeout time.Duration, args []any, decode decoder) *quorum.Round[int64] {
	if e.nodes[0].ap == nil {
		return e.sendAll(ctx, need, timeout, args, decode)
	}
	return quorum.Start(ctx, len(e.nodes), need, timeout, &e.tracker, func(ctx context.Context, i int) (int64, error) {
		p := e.nodes[i].ap
		if p == nil {
			p = e.nodes[i].Client
		}
		cmd := redis.NewCmd(ctx, args...)
		_ = p.Process(ctx, cmd)
		retryScript(ctx, p, cmd)
		return decode(cmd)
	})
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
	e.batches.Wait()
}

// Close refuses every call that begins after it (with ErrClosed),
// interrupts the Lock calls in flight, waits for the other calls in flight
// (each bounded by the node timeout), ends the engine's release-notice
// subscriptions, joining their goroutines, then waits as Wait does. It is
// safe to call concurrently with any use of the engine, and more than once.
func (e *Engine) Close() {
	e.shut()
	if e.wake != nil {
		e.wake.close()
	}
	e.Wait()
}

// Mutex names one lock key with its configuration. It holds no ownership
// state and is safe for concurrent use.
type Mutex struct {
	e        *Engine
	key      string // the full Redis key, prefix included
	fenceKey string // FenceKey(key)
	cfg      Config // resolved
	// spanAttrs are the acquire span's fixed attributes, keyAttrs the other
	// spans', built once.
	spanAttrs, keyAttrs trace.SpanStartEventOption
	// acquireTmpl and releaseTmpl are the commands with a nil in place of
	// the owner value (withValue).
	acquireTmpl, releaseTmpl []any
}

// NewMutex validates key and the merged configuration.
func (e *Engine) NewMutex(key string, over Config) (*Mutex, error) {
	if key == "" {
		return nil, &ConfigError{e.pkg, "key", "empty"}
	}
	if over.ReplicaAcks != 0 {
		return nil, &ConfigError{e.pkg, "replica acks", "set for the whole Client (New), not per Mutex: WAIT covers every write on a connection"}
	}
	cfg, err := Merge(e.base, over).Resolve(e.pkg)
	if err != nil {
		return nil, err
	}
	if err := checkQuarantine(e.pkg, e.nodes, cfg); err != nil {
		return nil, err
	}
	k := cfg.KeyPrefix + key
	if why := reservedKey(k); why != "" {
		return nil, &ConfigError{e.pkg, "key", fmt.Sprintf("%q is %s", k, why)}
	}
	m := &Mutex{e: e, key: k, fenceKey: FenceKey(k), cfg: cfg, spanAttrs: trace.WithAttributes(
		attribute.String("redfence.key", k),
		attribute.Int("redfence.nodes", len(e.nodes)),
		attribute.Int("redfence.quorum", e.need),
		attribute.Bool("redfence.fencing", cfg.Fencing)),
		keyAttrs: trace.WithAttributes(attribute.String("redfence.key", k))}
	m.acquireTmpl = m.acquireTemplate()
	m.releaseTmpl = []any{"evalsha", releaseScript.Hash(), 1, k, nil}
	return m, nil
}

// reservedKey says why the full key k is a name redfence uses itself, or "":
// the quarantine marker, the fence hash of some lock key (FenceKey), or a
// name under the release notices' prefix. A lock on such a key would fail
// with WRONGTYPE, or break the locks whose key it shadows.
func reservedKey(k string) string {
	switch {
	case k == MarkerKey:
		return "the restart quarantine's marker key"
	case strings.HasPrefix(k, ReleasedPrefix):
		return "under " + ReleasedPrefix + ", the prefix of redfence's release notices"
	}
	if base, ok := strings.CutSuffix(k, ":fence"); ok && base != "" && FenceKey(base) == k {
		if inner, ok := strings.CutPrefix(base, "{"); ok && FenceKey(strings.TrimSuffix(inner, "}")) == k {
			base = strings.TrimSuffix(inner, "}") // "{x}:fence" is x's
		}
		return fmt.Sprintf("the fence hash of the lock key %q", base)
	}
	return ""
}

// Key returns the full Redis key.
func (m *Mutex) Key() string { return m.key }

// Config returns the resolved configuration.
func (m *Mutex) Config() Config { return m.cfg }

func newValue() string {
	b := make([]byte, ValueBytes)
	_, _ = rand.Read(b) // never returns an error (crypto/rand, Go >= 1.24)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Lock retries TryLock under the configured back-off until it succeeds, the
// policy stops, or ctx ends. With wake-up on, it waits its turn among the
// engine's Lock calls for the key (lockInTurn).
func (m *Mutex) Lock(ctx context.Context) (l *Lease, err error) {
	ctx, done, err := m.e.enterAcquire(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { err = done(err) }()
	start := time.Now()
	defer func() {
		m.e.tel.waitDur.Record(ctx, seconds(time.Since(start)), m.e.tel.outcomeOpt(classify(err)))
	}()
	b := m.cfg.Retry()
	if isNilValue(b) {
		return nil, &ConfigError{m.e.pkg, "retry", "the back-off factory returned nil"}
	}
	b.Reset()
	if m.e.wake != nil {
		return m.lockInTurn(ctx, m.e.wake, b)
	}
	for attempt := 1; ; attempt++ {
		l, err := m.tryLock(ctx, attempt)
		if err == nil || ctx.Err() != nil {
			return l, err
		}
		d := b.NextBackOff()
		if d == backoff.Stop {
			return nil, fmt.Errorf("%w (gave up after %d attempts)", err, attempt)
		}
		m.e.tel.log.DebugContext(ctx, "redfence: lock attempt failed, retrying",
			"key", m.key, "attempt", attempt, "retry_in", d, "err", err)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w (after %d attempts): %w", err, attempt, ctx.Err())
		case <-t.C:
		}
	}
}

// TryLock makes exactly one attempt.
func (m *Mutex) TryLock(ctx context.Context) (*Lease, error) {
	leave, err := m.e.Enter(ctx)
	if err != nil {
		if errors.Is(err, ErrClosed) {
			err = fmt.Errorf("%w: %w", ErrNotAcquired, err)
		}
		return nil, err
	}
	defer leave()
	return m.tryLock(ctx, 1)
}

func (m *Mutex) tryLock(ctx context.Context, attempt int) (l *Lease, err error) {
	return m.acquire(ctx, attempt, nil)
}

// acquire is one attempt: its own round, or, with h, the round the
// releasing lease of the same engine started on its behalf (handed).
func (m *Mutex) acquire(ctx context.Context, attempt int, h *handed) (l *Lease, err error) {
	tel := m.e.tel
	began := time.Now()
	ctx, span := tel.tracer.Start(ctx, "redfence.acquire", m.spanAttrs)
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("redfence.attempt", attempt))
	}
	defer func() {
		outcome := classify(err)
		attrs := tel.outcomeOpt(outcome)
		tel.acquireDur.Record(ctx, seconds(time.Since(began)), attrs)
		tel.acquisitions.Add(ctx, 1, attrs)
		if !span.IsRecording() {
			span.End()
			return
		}
		span.SetAttributes(attribute.String("redfence.outcome", outcome))
		if l != nil {
			span.SetAttributes(attribute.Int64("redfence.validity_left_ms", time.Until(l.ValidUntil()).Milliseconds()),
				attribute.Int64("redfence.token", int64(l.token)))
		}
		endSpan(span, err)
	}()
	var (
		value string
		start time.Time
		r     *quorum.Round[int64]
	)
	if h != nil {
		value, start, r = h.value, h.start, h.r
	} else {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNotAcquired, err)
		}
		value = newValue()
		start = m.e.now() // monotonic reading: elapsed time is immune to wall-clock jumps
		r = m.e.run(ctx, m.e.need, m.cfg.RoundTimeout(), m.acquireArgs(value), m.acquireDecoder())
	}
	reached := r.Decide()
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("redfence.votes_for", r.OK()), attribute.Int("redfence.votes_against", len(r.Replies())-r.OK()))
	}
	if tel.log.Enabled(ctx, slog.LevelDebug) {
		tel.log.DebugContext(ctx, "redfence: acquire votes", "key", m.key, "for", r.OK(),
			"against", len(r.Replies())-r.OK(), "quorum", m.e.need, "attempt", attempt)
	}
	var (
		token int64
		cause error
	)
	switch {
	case !reached:
		cause = m.quorumError("acquire", r)
	case m.cfg.Fencing && len(m.e.nodes) == 1:
		token = r.Replies()[0].Value
	case m.cfg.Fencing:
		token, cause = m.fence(ctx, value, start, r.Replies())
	}
	elapsed := m.e.now().Sub(start)
	if cause == nil && ctx.Err() == nil && m.cfg.Validity(elapsed) > 0 {
		// Every key was set after start, so each expires no earlier than
		// start+TTL by its node's clock; the drift allowance covers clock
		// rates. Remaining validity at this point is TTL - elapsed - drift.
		l := newLease(m, value, start.Add(m.cfg.TTL-m.cfg.DriftAllowance()), r.Settle)
		l.token = uint64(token)
		return l, nil
	}
	// Failed: every node may hold our value (a reply can be lost after the
	// write landed), so wait for all calls to end, then release everywhere.
	r.Wait()
	tel.nodeReplies(ctx, span, "acquire", m.e.nodes, r.Replies())
	m.cleanup(context.WithoutCancel(ctx), value, r.Replies())
	if !reached {
		cause = quarantined(m.quorumError("acquire", r)) // now with every node's reply
	}
	switch {
	case ended(ctx) != nil:
		if cause == nil {
			cause = m.quorumError("acquire", r)
		}
		cause = fmt.Errorf("%w: %w", ended(ctx), cause)
	case cause == nil:
		cause = fmt.Errorf("acquire took %v, leaving no validity of the %v TTL", elapsed, m.cfg.TTL)
	}
	return nil, fmt.Errorf("%w: %w", ErrNotAcquired, cause)
}

func (m *Mutex) quorumError(op string, r *quorum.Round[int64]) *QuorumError {
	return quorumError(op, m.e.nodes, r.Need(), r.OK(), r.Replies())
}

func quorumError[T any](op string, nodes []Node, need, got int, replies []quorum.Reply[T]) *QuorumError {
	qe := &QuorumError{Op: op, Need: need, Got: got}
	for _, rep := range replies {
		if rep.Err != nil {
			err := rep.Err
			if h := nodes[rep.Index].retries; h != "" && errors.Is(err, quorum.ErrTimeout) {
				err = hintedTimeoutError{err, h}
			}
			qe.Nodes = append(qe.Nodes, NodeError{Index: rep.Index, Addr: nodes[rep.Index].Addr, Err: err})
		}
	}
	slices.SortFunc(qe.Nodes, func(a, b NodeError) int { return a.Index - b.Index })
	return qe
}

// script runs a compare-and-X script on every node, counting a reply of 1 as
// success and 0 as ErrNotHeld.
func (m *Mutex) script(ctx context.Context, s *redis.Script, need int, args ...any) *quorum.Round[int64] {
	a := make([]any, 0, 4+len(args))
	a = append(a, "evalsha", s.Hash(), 1, m.key)
	return m.e.run(ctx, need, m.cfg.RoundTimeout(), append(a, args...), decodeOne)
}

func decodeOne(cmd *redis.Cmd) (int64, error) {
	n, err := cmd.Int64()
	if err == nil && n != 1 {
		err = ErrNotHeld
	}
	return n, err
}

// releaseAll deletes value from every node that still holds it and waits for
// every reply (each bounded by the node timeout).
func (m *Mutex) releaseAll(ctx context.Context, value string) *quorum.Round[int64] {
	r := m.e.run(ctx, len(m.e.nodes), m.cfg.RoundTimeout(), withValue(m.releaseTmpl, value), decodeOne)
	r.Wait()
	return r
}

// cleanup deletes a failed acquire's value from every node. It waits for the
// deletes on the nodes that answered the acquire, so none of them still holds
// the value when the acquire returns, but not on the nodes that timed out or
// were cut off by the caller's context (timedOut): their deletes go out all the same and
// end at the node timeout, and whatever they did not undo expires with the
// TTL. So an acquire that fails on hung nodes returns when its context ends,
// not one node timeout later.
func (m *Mutex) cleanup(ctx context.Context, value string, acquire []quorum.Reply[int64]) {
	answered := make([]int, 0, len(acquire))
	for _, rep := range acquire {
		if !timedOut(rep.Err) {
			answered = append(answered, rep.Index)
		}
	}
	r := m.e.run(ctx, len(m.e.nodes), m.cfg.RoundTimeout(), withValue(m.releaseTmpl, value), decodeOne)
	r.WaitFor(answered)
}

// ended returns ctx.Err(), or context.DeadlineExceeded once ctx's deadline
// has passed: the replies of a client whose read deadline is the context's
// can arrive a moment before the context's own timer fires.
func ended(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// timedOut reports whether err says a node did not answer in time: the
// round's timeout, the caller's context, or the client's own deadline (with
// ContextTimeoutEnabled, the round's deadline becomes a read deadline).
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, quorum.ErrTimeout) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.As(err, &ne) && ne.Timeout()
}

// notHeld counts replies that definitely said the node does not hold our value.
func notHeld(replies []quorum.Reply[int64]) int {
	n := 0
	for _, rep := range replies {
		if errors.Is(rep.Err, ErrNotHeld) {
			n++
		}
	}
	return n
}
