package coord

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/internal/enum"
	"github.com/redfence/redfence/internal/nilcheck"
	"github.com/redfence/redfence/redlock"
)

// donePrefix starts every done marker: "!done:<token>:<lease value>". Lease
// values are base64url and never contain '!'.
const donePrefix = "!done:"

// releaseTimeout bounds the cleanup release after a claim was found done.
const releaseTimeout = 2 * time.Second

// ClaimState is the outcome of Claims.Claim.
type ClaimState int

const (
	// ClaimOwned means the caller owns the work and must finish it with Done,
	// or give it up with Abandon.
	ClaimOwned ClaimState = iota + 1
	// ClaimDone means the work was finished (a duplicate): do not run it.
	ClaimDone
	// ClaimBusy means another worker holds an in-flight claim; Claim.BusyFor
	// says how long it may still last unless it is kept alive.
	ClaimBusy
)

// String returns "owned", "done" or "busy".
func (s ClaimState) String() string { return enum.String([]string{"owned", "done", "busy"}, s) }

// Claims hands out at-most-once claims on work ids over a Locker. It holds
// no per-claim state and is safe for concurrent use.
type Claims struct {
	quorum
	locker Locker
	cfg    claimsConfig
	mopts  MutexOptions
}

// NewClaims returns Claims over locker. It returns an error wrapping
// ErrInvalid for a nil locker or an invalid option, and the lock client's
// *ConfigError for a TTL it refuses.
func NewClaims(locker Locker, opts ...ClaimsOption) (*Claims, error) {
	if nilcheck.IsNil(locker) {
		return nil, invalid("locker", "nil")
	}
	cfg := claimsConfig{retention: DefaultRetention}
	applyAll(&cfg, opts, ClaimsOption.applyClaims)
	q, err := cfg.settle(locker, DefaultClaimPrefix, "retention", cfg.retention)
	if err != nil {
		return nil, err
	}
	cs := &Claims{quorum: q, locker: locker, cfg: cfg, mopts: MutexOptions{TTL: cfg.ttl, Fencing: cfg.fencing}}
	if _, err := locker.NewMutex(cfg.prefix+"x", cs.mopts); err != nil { // validate TTL and prefix now
		return nil, err
	}
	return cs, nil
}

// Claim tries once, without waiting, to claim the work id. ClaimOwned comes
// with a Claim the caller owns for one TTL unless kept alive: run the work,
// then Done (or Abandon, to let another worker run it). ClaimDone: the work
// was marked done within the retention; skip it. ClaimBusy: another worker
// holds the claim (see Claim.BusyFor). A done marker on any node that
// answered refuses the claim (docs/coordination.md, Redlock node sets). The
// error is non-nil only when the state could not be told: the nodes failed,
// or ctx ended.
func (cs *Claims) Claim(ctx context.Context, id string) (*Claim, ClaimState, error) {
	if id == "" {
		return nil, 0, invalid("id", "empty")
	}
	m, err := cs.locker.NewMutex(cs.cfg.prefix+id, cs.mopts)
	if err != nil {
		return nil, 0, err
	}
	key := m.Key()
	const attempts = 3 // the holder may leave between our try and our look
	for attempt := 1; ; attempt++ {
		l, err := m.TryLock(ctx)
		if err == nil {
			if len(cs.nodes) > 1 {
				// A majority granted the lock; a minority may still hold a
				// done marker from a Done that did not reach a majority.
				if st := cs.inspect(ctx, key); st.done != "" {
					cs.repair(ctx, key, l, st)
					return cs.doneClaim(id, key, st.done), ClaimDone, nil
				}
			}
			return &Claim{cs: cs, id: id, key: key, state: ClaimOwned, lease: l}, ClaimOwned, nil
		}
		if ctx.Err() != nil {
			return nil, 0, err
		}
		st := cs.inspect(ctx, key)
		switch {
		case st.done != "":
			return cs.doneClaim(id, key, st.done), ClaimDone, nil
		case st.held:
			return &Claim{cs: cs, id: id, key: key, state: ClaimBusy, busyFor: st.busyFor}, ClaimBusy, nil
		case !errors.Is(err, ErrTaken) || st.answered < cs.need:
			return nil, 0, fmt.Errorf("coord: claim %q: %w", id, err)
		case attempt == attempts:
			// Contended, yet free whenever we look: report busy and let the
			// caller come back.
			return &Claim{cs: cs, id: id, key: key, state: ClaimBusy}, ClaimBusy, nil
		}
	}
}

// Do claims id and, if this caller owns it, runs fn while keeping the claim
// alive, then marks it done if fn returns nil, or abandons it if fn fails or
// panics, so that another worker may retry. fn's context is cancelled when
// the claim is lost. Do joins the goroutine it starts. It returns ClaimDone
// or ClaimBusy without running fn; otherwise ClaimOwned with fn's error,
// Done's error or an error wrapping ErrLost.
func (cs *Claims) Do(ctx context.Context, id string, fn func(ctx context.Context, c *Claim) error) (st ClaimState, err error) {
	c, st, err := cs.Claim(ctx, id)
	if err != nil || st != ClaimOwned {
		return st, err
	}
	fctx, cancelFn := c.Context(ctx)
	kctx, stopKeepAlive := context.WithCancel(context.WithoutCancel(ctx))
	kept := make(chan error, 1)
	go func() { kept <- c.KeepAlive(kctx) }()
	finished := false
	defer func() {
		stopKeepAlive()
		keepErr := <-kept
		cancelFn()
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		switch {
		case !finished: // fn panicked: let another worker retry
			_ = c.Abandon(cctx)
		case err != nil:
			_ = c.Abandon(cctx)
			if errors.Is(keepErr, ErrLost) {
				err = errors.Join(err, keepErr)
			}
		default:
			// fn succeeded: record it, even if the lease was declared lost
			// meanwhile (the key may still hold our value).
			err = c.Done(cctx)
		}
	}()
	err = fn(fctx, c)
	finished = true
	return ClaimOwned, err
}

// inspection is what the nodes said about a claim key.
type inspection struct {
	answered int
	done     string // a done marker any node holds ("" if none)
	doneTTL  time.Duration
	held     bool          // some node holds an in-flight lease
	busyFor  time.Duration // the longest remaining TTL of in-flight values
}

func (cs *Claims) inspect(ctx context.Context, key string) inspection {
	rs := fanOut(ctx, cs.nodes, cs.cfg.nodeTimeout, func(ctx context.Context, c redis.UniversalClient) ([]any, error) {
		return inspectScript.Run(ctx, c, []string{key}, donePrefix).Slice()
	})
	var st inspection
	for _, r := range rs {
		if r.err != nil || len(r.val) != 3 {
			continue
		}
		st.answered++
		kind, _ := r.val[0].(int64)
		pttl, _ := r.val[1].(int64)
		v, _ := r.val[2].(string)
		switch kind {
		case 2:
			if st.done == "" || time.Duration(pttl)*time.Millisecond > st.doneTTL {
				st.done, st.doneTTL = v, time.Duration(pttl)*time.Millisecond
			}
		case 1:
			st.held = true
			st.busyFor = max(st.busyFor, time.Duration(pttl)*time.Millisecond)
		}
	}
	return st
}

// repair copies a done marker found on some nodes onto the nodes where the
// caller's fresh lease stands, then releases the lease: the id is done, and
// more nodes now say so. Best effort: failures only leave things as they
// were.
func (cs *Claims) repair(ctx context.Context, key string, l Lease, st inspection) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if ms := st.doneTTL.Milliseconds(); ms > 0 {
		fanOut(rctx, cs.nodes, cs.cfg.nodeTimeout, func(ctx context.Context, c redis.UniversalClient) (int64, error) {
			return doneScript.Run(ctx, c, []string{key}, l.Value(), st.done, ms).Int64()
		})
	}
	_ = l.Release(rctx) // deletes our value wherever the marker did not land
}

func (cs *Claims) doneClaim(id, key, marker string) *Claim {
	var token fencing.Token
	if rest, ok := strings.CutPrefix(marker, donePrefix); ok {
		if t, _, ok := strings.Cut(rest, ":"); ok {
			n, _ := strconv.ParseUint(t, 10, 64)
			token = fencing.Token(n)
		}
	}
	return &Claim{cs: cs, id: id, key: key, state: ClaimDone, doneToken: token}
}

// Claim is the outcome of Claims.Claim for one id. Only an owned claim
// (State() == ClaimOwned) can be kept alive, marked done or abandoned; the
// others describe the work's state. Its methods are safe for concurrent use.
type Claim struct {
	cs        *Claims
	id, key   string
	state     ClaimState
	lease     Lease         // owned only
	busyFor   time.Duration // busy only
	doneToken fencing.Token // done only

	mu     sync.Mutex
	marked bool // Done succeeded
	gaveUp bool // Abandon called
}

// ID returns the work id.
func (c *Claim) ID() string { return c.id }

// Key returns the Redis key of the claim's lock.
func (c *Claim) Key() string { return c.key }

// State returns what Claims.Claim found.
func (c *Claim) State() ClaimState { return c.state }

// BusyFor returns, for a ClaimBusy outcome, how long the in-flight claim
// may still last if its holder does not extend it: the longest remaining
// TTL of its lock key on the nodes that answered (0 if it was just left).
// It returns 0 for the other states.
func (c *Claim) BusyFor() time.Duration { return c.busyFor }

// Token returns the fencing token: of this caller's claim when owned (0 with
// fencing off), and of the worker that marked the work done for ClaimDone
// (0 if it had none). It returns 0 for ClaimBusy.
func (c *Claim) Token() fencing.Token {
	switch c.state {
	case ClaimOwned:
		return c.lease.Token()
	case ClaimDone:
		return c.doneToken
	}
	return 0
}

// ValidUntil returns when an owned claim's lease validity ends (see the lock
// packages); the zero time for a claim not owned.
func (c *Claim) ValidUntil() time.Time {
	if c.state != ClaimOwned {
		return time.Time{}
	}
	return c.lease.ValidUntil()
}

// Extend extends an owned claim's lease by one TTL (see Lease.Extend of the
// lock packages). It returns ErrNotOwned for a claim not owned.
func (c *Claim) Extend(ctx context.Context) error {
	if c.state != ClaimOwned {
		return ErrNotOwned
	}
	return c.lease.Extend(ctx)
}

// KeepAlive keeps an owned claim alive, as Lease.KeepAlive of the lock
// packages does, until ctx ends, the claim is lost (an error wrapping
// ErrLost, early enough to stop the work before another worker can claim
// it), or it is marked done or abandoned (ErrReleased). Run it in a
// goroutine of your own, or use Claims.Do. It returns ErrNotOwned for a
// claim not owned.
func (c *Claim) KeepAlive(ctx context.Context) error {
	if c.state != ClaimOwned {
		return ErrNotOwned
	}
	return c.lease.KeepAlive(ctx)
}

// Context returns a context derived from parent that is cancelled when an
// owned claim ends: lost (cause wrapping ErrLost), or marked done or
// abandoned (cause ErrReleased). Call the CancelFunc when done with it. For
// a claim not owned the context is cancelled already, with cause
// ErrNotOwned. It starts no goroutine.
func (c *Claim) Context(parent context.Context) (context.Context, context.CancelFunc) {
	if c.state != ClaimOwned {
		ctx, cancel := context.WithCancelCause(parent)
		cancel(ErrNotOwned)
		return ctx, func() {}
	}
	return c.lease.Context(parent)
}

// Err returns nil while an owned claim is held, ErrReleased once it was
// marked done or abandoned, an error wrapping ErrLost if it was lost first,
// and ErrNotOwned for a claim not owned.
func (c *Claim) Err() error {
	if c.state != ClaimOwned {
		return ErrNotOwned
	}
	return c.lease.Err()
}

// Done records that the work is finished, with a done marker that refuses
// later claims of the id as ClaimDone for the retention, and ends the claim
// (Err then returns ErrReleased). It returns nil once a majority of nodes
// recorded it, and again on later calls; an error wrapping ErrLost, ending
// the claim, when too many nodes no longer hold it; a *QuorumError, leaving
// the claim held for a retry, on other failures; ErrNotOwned for a claim not
// owned; ErrReleased after Abandon. See docs/coordination.md, Outcomes of
// Done.
func (c *Claim) Done(ctx context.Context) error {
	if c.state != ClaimOwned {
		return ErrNotOwned
	}
	c.mu.Lock()
	marked, gaveUp := c.marked, c.gaveUp
	c.mu.Unlock()
	switch {
	case marked:
		return nil
	case gaveUp:
		return ErrReleased
	}
	cs := c.cs
	marker := donePrefix + strconv.FormatUint(uint64(c.lease.Token()), 10) + ":" + c.lease.Value()
	ret := cs.cfg.retention.Milliseconds()
	rs := fanOut(ctx, cs.nodes, cs.cfg.nodeTimeout, func(ctx context.Context, cl redis.UniversalClient) (int64, error) {
		n, err := doneScript.Run(ctx, cl, []string{c.key}, c.lease.Value(), marker, ret).Int64()
		if err == nil && n != 1 {
			err = errNotHeld
		}
		return n, err
	})
	ok, notHeld := 0, 0
	for _, r := range rs {
		switch {
		case r.err == nil:
			ok++
		case errors.Is(r.err, errNotHeld):
			notHeld++
		}
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	switch {
	case ok >= cs.need:
		c.mu.Lock()
		c.marked = true
		c.mu.Unlock()
		_ = c.lease.Release(rctx) // ends the lease; deletes our value where no marker landed
		return nil
	case notHeld > len(cs.nodes)-cs.need:
		c.mu.Lock()
		c.gaveUp = true
		c.mu.Unlock()
		_ = c.lease.Release(rctx)
		return fmt.Errorf("%w: done %q: %w", ErrLost, c.id, quorumError("done", cs.nodes, cs.need, ok, rs))
	}
	return fmt.Errorf("coord: done %q: %w; the claim stays held", c.id, quorumError("done", cs.nodes, cs.need, ok, rs))
}

// errNotHeld is a node's error when the claim key no longer holds the
// claim's lease value there.
var errNotHeld = redlock.ErrNotHeld

// Abandon gives the claim up without marking it done, so that another
// worker may claim the id and run the work: it releases the lease (see
// Lease.Release of the lock packages, whose errors it returns). It returns
// ErrNotOwned for a claim not owned and ErrReleased after Done or a first
// Abandon.
func (c *Claim) Abandon(ctx context.Context) error {
	if c.state != ClaimOwned {
		return ErrNotOwned
	}
	c.mu.Lock()
	if c.marked || c.gaveUp {
		c.mu.Unlock()
		return ErrReleased
	}
	c.gaveUp = true
	c.mu.Unlock()
	return c.lease.Release(ctx)
}
