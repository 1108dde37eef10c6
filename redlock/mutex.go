package redlock

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/internal/keys"
	"github.com/redfence/redfence/internal/nilcheck"
	"github.com/redfence/redfence/internal/quorum"
)

// Mutex is a named lock: one key, several keys (NewMultiMutex), a
// semaphore's permits (NewSemaphore) or one side of a read-write lock
// (NewRWMutex). It holds no ownership state and is safe for concurrent use;
// every successful Lock or TryLock returns a new Lease.
type Mutex struct {
	e        *Client
	key      string // the full Redis key, prefix included
	fenceKey string // keys.Fence(key)
	cfg      config // resolved
	// spanAttrs (the acquire span's) and keyAttrs (the others') are built
	// once, so that starting a span allocates nothing.
	spanAttrs, keyAttrs []trace.SpanStartOption
	// The commands, with a nil for the owner value (withValue); provenTmpl
	// is the acquire's proven form (proof.go), a bare SET NX PX if provenSet.
	acquireTmpl, releaseTmpl, extendTmpl, provenTmpl []any
	provenSet                                        bool

	queueKey string   // "" with wake-up off
	keys     []string // a multi-key lock's, key first; nil for one key
	need     int      // the majority, or a semaphore's quorum
	shape    *shape   // nil for a plain one-key lock
	try      *Mutex   // whose TryLock this one's is (a writer's leaves no intent marker); nil: itself
	// queuing is 1 when the last Lock had to queue, so the next joins at
	// once (docs/design.md, Waiting: joining first). Not an atomic.Bool:
	// the read-write lock copies a Mutex for its two sides.
	queuing int32
}

// NewMutex returns a Mutex for key, with opts overriding the Client's
// defaults. It returns a *ConfigError for an empty key, an invalid option,
// or a key (prefix included) that names something redfence stores itself
// (docs/design.md, Keys).
func (e *Client) NewMutex(key string, opts ...Option) (*Mutex, error) {
	if key == "" {
		return nil, &ConfigError{Pkg: e.pkg, Field: "key", Msg: "empty"}
	}
	if newConfig(opts).replicaAcks != 0 {
		return nil, &ConfigError{Pkg: e.pkg, Field: "replica acks", Msg: "set for the whole Client (New), not per Mutex: WAIT covers every write on a connection"}
	}
	c := newConfig(e.opts, opts)
	c.replicaAcks, c.ackTimeout = e.cfg.replicaAcks, e.cfg.ackTimeout // a Mutex's WithReplicaAcks(0, d) is ignored
	cfg, err := c.resolve(e.pkg)
	if err != nil {
		return nil, err
	}
	if err := checkQuarantine(e.pkg, e.nodes, cfg); err != nil {
		return nil, err
	}
	if err := checkAcks(e.pkg, e.nodes, cfg); err != nil { // a Mutex's own node timeout lengthens the wait
		return nil, err
	}
	k := cfg.keyPrefix + key
	if why := reservedKey(k); why != "" {
		return nil, &ConfigError{Pkg: e.pkg, Field: "key", Msg: fmt.Sprintf("%q is %s", k, why)}
	}
	m := &Mutex{e: e, key: k, fenceKey: keys.Fence(k), cfg: cfg, need: e.need,
		keyAttrs: []trace.SpanStartOption{trace.WithAttributes(attribute.String("redfence.key", k))}}
	m.spanAttrs = m.acquireSpanAttrs()
	m.acquireTmpl = []any{"set", k, nil, "px", cfg.ttl.Milliseconds(), "nx"} // without fencing and quarantine
	if cfg.fenced || cfg.quarantine > 0 {
		m.acquireTmpl = m.voteTemplate(acquireScript, []string{k, m.fenceKey})
	}
	m.setProven(acquireQuarantineArg)
	if e.wait != nil {
		m.queueKey = keys.Queue(k)
	}
	// With the marker: a hand-over is an acquire for the waiter, whose node must be allowed to vote.
	m.releaseTmpl = m.scriptTemplate(releaseScript, true, []string{k}, m.queueKey, keys.ReleasedPrefix+k, cfg.quarantine.Milliseconds())
	m.extendTmpl = m.scriptTemplate(extendScript, false, []string{k}, cfg.ttl.Milliseconds())
	return m, nil
}

// reservedKey says why the full key k names something redfence keeps itself
// (docs/design.md, Keys), or "": a lock on it would break another.
func reservedKey(k string) string {
	switch {
	case k == keys.Marker:
		return "the restart quarantine's marker key"
	case strings.HasPrefix(k, keys.ReleasedPrefix):
		return "under " + keys.ReleasedPrefix + ", the prefix of redfence's release notices"
	}
	if base, what := keys.Owner(k); what != "" {
		return fmt.Sprintf("%s %q", what, base)
	}
	return ""
}

func (m *Mutex) acquireSpanAttrs(extra ...attribute.KeyValue) []trace.SpanStartOption {
	kv := append([]attribute.KeyValue{attribute.String("redfence.key", m.key)}, extra...)
	return []trace.SpanStartOption{trace.WithAttributes(append(kv, attribute.Int("redfence.nodes", len(m.e.nodes)),
		attribute.Int("redfence.quorum", m.need), attribute.Bool("redfence.fencing", m.cfg.fenced))...)}
}

// Key returns the lock's Redis key, prefix included (a multi-key lock's
// first key).
func (m *Mutex) Key() string { return m.key }

func newValue() string {
	b := make([]byte, valueBytes)
	_, _ = rand.Read(b) // never returns an error (crypto/rand, Go >= 1.24)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Lock acquires the lock, retrying under the retry policy (WithRetry)
// until it succeeds, the policy stops, or ctx ends; with wake-up on it
// waits in the key's queue of waiters (and joins it at once, without an
// attempt, when the Mutex's last Lock had to queue). A failure wraps
// ErrNotAcquired, the last attempt's *QuorumError, and ctx.Err() when ctx
// ended; nodes in restart quarantine refuse every attempt until it ends
// (the error says so). A failed attempt deletes its value from the nodes
// that answered. Once ctx ends, leaving the queue waits for the last join
// round's answers, up to the node timeout.
func (m *Mutex) Lock(ctx context.Context) (l *Lease, err error) {
	leave, err := m.e.enterAcquire(ctx)
	if err != nil {
		return nil, err
	}
	defer leave()
	start := time.Now()
	defer func() {
		if m.e.tel.metering {
			m.e.tel.waitDur.Record(ctx, time.Since(start).Seconds(), m.e.tel.byOutcome[classify(err)].rec...)
		}
		if err != nil && m.shape != nil && m.shape.gaveUp != nil {
			m.shape.gaveUp(context.WithoutCancel(ctx))
		}
	}()
	// The first attempt runs on ctx (Close waits for it); a Lock that has to
	// wait is one that Close interrupts.
	if atomic.LoadInt32(&m.queuing) == 1 && m.queues(ErrTaken) && ctx.Err() == nil { // contended lately: join at once
		ictx, done := m.e.interruptible(ctx)
		l, err = m.retry(ictx, fmt.Errorf("%w: %w", ErrNotAcquired, ErrTaken), true)
		return l, done(err)
	}
	if l, err = m.acquire(ctx, 1, ""); err == nil || ctx.Err() != nil {
		return l, err
	}
	ictx, done := m.e.interruptible(ctx)
	l, err = m.retry(ictx, err, false)
	return l, done(err)
}

// retry is Lock's retry loop after a first attempt that failed with last.
// Once an attempt found a plain key taken, it waits in the key's queue,
// each attempt a refresh of its entries (docs/design.md, Waiting). With
// joinFirst no attempt was made: its first join is the first attempt, made
// even if the policy stops at once.
func (m *Mutex) retry(ctx context.Context, last error, joinFirst bool) (*Lease, error) {
	b := m.cfg.retry()
	if nilcheck.IsNil(b) {
		return nil, &ConfigError{Pkg: m.e.pkg, Field: "retry", Msg: "the back-off factory returned nil"}
	}
	b.Reset()
	var (
		q      *waitState // the queue's state once queued, nil while polling
		polls  bool       // the queues were refused: poll from now on
		d      time.Duration
		redraw = true // draw the next delay; not after a refresh asked for by a poke
		stop   bool   // the policy stopped before the first join, which still went
	)
	defer func() { q.close(ctx) }()
	for attempt := 1; ; attempt++ {
		if redraw {
			if d = b.NextBackOff(); d == backoff.Stop {
				if !joinFirst || attempt > 1 {
					return nil, fmt.Errorf("%w (gave up after %d attempts)", last, attempt)
				}
				d, stop = 0, true // the first join still goes: it is the attempt
			}
		}
		redraw = true
		if q == nil && !polls && m.queues(last) {
			atomic.StoreInt32(&m.queuing, 1)
			q = m.queue()
			l, err := q.refresh(ctx, d, attempt)
			if l != nil && attempt == 1 { // the key was free: attempts again next time
				atomic.StoreInt32(&m.queuing, 0)
			}
			if l != nil || err != nil {
				return l, err
			}
			if joinFirst && q.r != nil { // the join was the attempt: its votes say why it failed
				last = fmt.Errorf("%w: %w", ErrNotAcquired, m.quorumError("acquire", q.r))
			}
			if stop {
				return nil, fmt.Errorf("%w (gave up after %d attempts)", last, attempt)
			}
			if q.denied {
				q.close(ctx)
				q, polls = nil, true
			}
		}
		m.e.tel.log.DebugContext(ctx, "redfence: lock attempt failed, retrying",
			"key", m.key, "attempt", attempt, "retry_in", d, "queued", q != nil, "err", last)
		if q == nil {
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("%w (after %d attempts): %w", last, attempt, ctx.Err())
			case <-time.After(d):
			}
			l, err := m.acquire(ctx, attempt+1, "")
			if ctx.Err() != nil && err != nil && !errors.As(err, new(*QuorumError)) {
				// ctx ended as the delay did, before the attempt began:
				// the last attempt is still the one before.
				return nil, fmt.Errorf("%w (after %d attempts): %w", last, attempt, ctx.Err())
			}
			if err == nil || ctx.Err() != nil {
				return l, err
			}
			last = err
			continue
		}
		l, claimErr, poked := q.wait(ctx, d, attempt)
		switch {
		case l != nil:
			return l, nil
		case claimErr != nil: // a claim of the grants failed: that was the attempt
			last = claimErr
			continue
		case poked: // asked to look again: not an attempt of the policy's
			attempt--
			redraw = false
		}
		if err := ctx.Err(); err != nil { // ended in the wait, or as a split's look came: no further join round
			return nil, fmt.Errorf("%w (after %d attempts): %w", last, attempt, err)
		}
		if l, err := q.refresh(ctx, d, attempt+1); l != nil || err != nil {
			return l, err
		}
		if !poked {
			last = fmt.Errorf("%w: %w", ErrNotAcquired, m.quorumError("acquire", q.r))
		}
		if q.denied {
			q.close(ctx)
			q, polls = nil, true
		}
	}
}

// TryLock makes exactly one attempt to acquire the lock; errors are as for
// Lock. It never queues.
func (m *Mutex) TryLock(ctx context.Context) (*Lease, error) {
	if m.try != nil {
		m = m.try
	}
	leave, err := m.e.enterAcquire(ctx)
	if err != nil {
		return nil, err
	}
	defer leave()
	return m.acquire(ctx, 1, "")
}

// acquire is one attempt, with value as the owner value ("": a new one; a
// waiter's value: its claim of its grants).
func (m *Mutex) acquire(ctx context.Context, attempt int, value string) (l *Lease, err error) {
	tel := m.e.tel
	began := time.Now()
	ctx, span := tel.start(ctx, "redfence.acquire", m.spanAttrs...)
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("redfence.attempt", attempt))
	}
	defer func() {
		if tel.metering {
			opts := tel.byOutcome[classify(err)]
			tel.acquireDur.Record(ctx, time.Since(began).Seconds(), opts.rec...)
			tel.acquisitions.Add(ctx, 1, opts.add...)
		}
		if !span.IsRecording() {
			span.End()
			return
		}
		span.SetAttributes(attribute.String("redfence.outcome", classify(err)))
		if l != nil {
			span.SetAttributes(attribute.Int64("redfence.validity_left_ms", time.Until(l.ValidUntil()).Milliseconds()),
				attribute.Int64("redfence.token", int64(l.token)))
		}
		endSpan(span, err)
	}()
	var mt *multiTokens // a fenced multi-key acquire's tokens
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotAcquired, err)
	}
	claim := value != ""
	if !claim {
		value = newValue()
	}
	start := m.e.now() // monotonic reading: elapsed time is immune to wall-clock jumps
	dec := m.acquireDecoder()
	if m.multi() && m.cfg.fenced && len(m.e.nodes) == 1 {
		mt = &multiTokens{fenced: true}
		dec = mt.decode
	}
	bv := any(value) // boxed once, for every command of the lease
	args, p := m.acquireArgs(bv), m.acquireProof(bv, dec)
	if claim && m.shape == nil && !m.multi() { // a waiter's claim of its grants
		switch {
		case m.acquireTmpl[0] == "set": // only the script grants a value that holds the key already
			args, dec = withValue(m.voteTemplate(acquireScript, []string{m.key, m.fenceKey}), bv), decodeAcquire
		case m.provenSet: // the proven form: the script with the quarantine off
			p = proof{args: unquarantined(args, acquireQuarantineArg), decode: decodeAcquire}
		}
	}
	r := m.e.run(ctx, afterRelease, m.need, m.cfg.roundTimeout(), args, dec, p)
	reached := r.Decide()
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("redfence.votes_for", r.OK()), attribute.Int("redfence.votes_against", len(r.Replies())-r.OK()))
	}
	if tel.log.Enabled(ctx, slog.LevelDebug) {
		tel.log.DebugContext(ctx, "redfence: acquire votes", "key", m.key, "for", r.OK(),
			"against", len(r.Replies())-r.OK(), "quorum", m.need, "attempt", attempt)
	}
	var (
		token int64
		cause error
	)
	switch {
	case !reached: // the cause waits for every node's reply, below
	case m.cfg.fenced && len(m.e.nodes) == 1:
		token = r.Replies()[0].Value
	case m.cfg.fenced:
		token, cause = m.fence(ctx, value, start, r.Replies())
	}
	elapsed := m.e.now().Sub(start)
	if reached && cause == nil && ctx.Err() == nil && m.cfg.validity(elapsed) > 0 {
		// Every key was set after start: each lives until start+TTL by its
		// node's clock, less the drift allowance for clock rates.
		l := newLease(m, value, bv, start.Add(m.cfg.ttl-m.cfg.driftAllowance()), r)
		l.token = fencing.Token(token)
		switch {
		case mt != nil:
			l.tokens = mt.v
		case m.multi() && token != 0: // fenced Redlock: every key's token is the one acknowledged
			l.tokens = slices.Repeat([]fencing.Token{l.token}, len(m.keys))
		}
		return l, nil
	}
	// Failed: any node may hold our value (a reply can be lost after the
	// write landed), so wait for every call, then release everywhere.
	r.Wait()
	tel.nodeReplies(ctx, span, "acquire", m.e.nodes, r.Replies())
	m.cleanup(context.WithoutCancel(ctx), bv, r.Replies())
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
		cause = fmt.Errorf("acquire took %v, leaving no validity of the %v TTL", elapsed, m.cfg.ttl)
	}
	return nil, fmt.Errorf("%w: %w", ErrNotAcquired, cause)
}

func (m *Mutex) quorumError(op string, r *quorum.Round[int64]) *QuorumError {
	return quorumError(op, m.e.nodes, r.Need(), r.OK(), r.Replies())
}

func quorumError[T any](op string, nodes []node, need, got int, replies []quorum.Reply[T]) *QuorumError {
	qe := &QuorumError{Op: op, Need: need, Got: got}
	for _, rep := range replies {
		if rep.Err != nil {
			err := rep.Err
			if h := nodes[rep.Index].conn.Info().Retries; h != "" && errors.Is(err, quorum.ErrTimeout) {
				err = fmt.Errorf("%w (%s)", err, h)
			}
			qe.Nodes = append(qe.Nodes, NodeError{Index: rep.Index, Addr: nodes[rep.Index].addr, Err: err})
		}
	}
	slices.SortFunc(qe.Nodes, func(a, b NodeError) int { return a.Index - b.Index })
	return qe
}

// decodeOne reads a compare-and-X script's reply: 0 is ErrNotHeld.
func decodeOne(cmd *redis.Cmd) (int64, error) {
	n, err := cmd.Int64()
	if err == nil && n != 1 {
		err = ErrNotHeld
	}
	return n, err
}

// releaseAll sends the release to every node and returns once a majority
// deleted the value; the other nodes' deletes go on, bounded by the node
// timeout (Close waits for them). When no majority can delete it, it
// returns with every node's answer.
func (m *Mutex) releaseAll(ctx context.Context, value any, ticket int64) *quorum.Round[int64] {
	var args []any
	if ticket != 0 {
		args = m.releaseArgs(value, "release", ticket, 0, 0)
	} else {
		args = withValue(m.releaseTmpl, value)
	}
	r := m.e.run(ctx, isRelease, m.need, m.cfg.roundTimeout(), args, decodeOne, proof{})
	if !r.Decide() {
		r.Wait() // every node's answer, to tell a lost lease from nodes that failed
	}
	return r
}

// cleanup deletes a failed acquire's value from every node, waiting only for
// the nodes that answered the acquire: one that hangs must not delay the
// return (what its delete misses expires; docs/design.md, Acquire). A plain
// lock that every node refused as taken wrote nothing: no clean-up.
func (m *Mutex) cleanup(ctx context.Context, value any, acquire []quorum.Reply[int64]) {
	if m.shape == nil && !m.multi() && !slices.ContainsFunc(acquire, func(rep quorum.Reply[int64]) bool { return !errors.Is(rep.Err, ErrTaken) }) {
		return // every node refused: another owner's key, none wrote ours
	}
	m.e.run(ctx, anyOrder, len(m.e.nodes), m.cfg.roundTimeout(), withValue(m.releaseTmpl, value), decodeOne, proof{}).WaitFor(answered(acquire))
}

// answered returns the nodes of replies that did not time out.
func answered(replies []quorum.Reply[int64]) []int {
	idx := make([]int, 0, len(replies))
	for _, rep := range replies {
		if !timedOut(rep.Err) {
			idx = append(idx, rep.Index)
		}
	}
	return idx
}

// ended returns ctx.Err(), or DeadlineExceeded once ctx's deadline has
// passed: a client's read deadline can end before the context's timer fires.
func ended(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, quorum.ErrTimeout) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.As(err, &ne) && ne.Timeout()
}

// lostOn reports whether r's ErrNotHeld replies alone rule out a quorum: too
// few nodes still hold the lease's value.
func (m *Mutex) lostOn(r *quorum.Round[int64]) bool {
	n := 0
	for _, rep := range r.Replies() {
		if errors.Is(rep.Err, ErrNotHeld) {
			n++
		}
	}
	return n > len(m.e.nodes)-m.need
}

// shape is what a lock other than the plain one-key lock brings of its own
// besides its templates; such a Mutex polls in Lock.
type shape struct {
	decode decoder // the acquire's replies
	// gaveUp, if set, runs on a detached context when Lock fails (a waiting
	// writer withdraws its intent marker).
	gaveUp func(ctx context.Context)
}
