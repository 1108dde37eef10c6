package core

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
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
		nodes[i] = Node{Client: c, Addr: addr}
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
	e := &Engine{pkg: pkg, nodes: nodes, need: quorum.Majority(len(nodes)), base: base, now: time.Now, tel: newTelemetry(base)}
	for i := range nodes {
		nodes[i].batch = &batcher{client: nodes[i].Client, honorsCtx: honorsContext(nodes[i].Client), wg: &e.batches}
	}
	if !base.NoWakeup {
		e.wake = newWaker(nodes, e.need, e.tel.log)
	}
	return e, nil
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
	cfg, err := Merge(e.base, over).Resolve(e.pkg)
	if err != nil {
		return nil, err
	}
	if err := checkQuarantine(e.pkg, e.nodes, cfg); err != nil {
		return nil, err
	}
	k := cfg.KeyPrefix + key
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
		r = m.e.run(ctx, m.e.need, m.cfg.NodeTimeout, m.acquireArgs(value), m.acquireDecoder())
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
	m.releaseAll(context.WithoutCancel(ctx), value)
	if !reached {
		cause = m.quorumError("acquire", r) // now with every node's reply
	}
	switch {
	case ctx.Err() != nil:
		if cause == nil {
			cause = m.quorumError("acquire", r)
		}
		cause = fmt.Errorf("%w: %w", ctx.Err(), cause)
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
			qe.Nodes = append(qe.Nodes, NodeError{Index: rep.Index, Addr: nodes[rep.Index].Addr, Err: rep.Err})
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
	return m.e.run(ctx, need, m.cfg.NodeTimeout, append(a, args...), decodeOne)
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
	r := m.e.run(ctx, len(m.e.nodes), m.cfg.NodeTimeout, withValue(m.releaseTmpl, value), decodeOne)
	r.Wait()
	return r
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
