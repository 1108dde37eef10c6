package locktest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
)

// aclShapeCase is a lock shape's ACL rule beyond redistest.LockACL, the user
// docs/topologies.md names for it, and a scenario that runs every operation
// of the shape as a user and checks, as the admin user, that each one that
// succeeds did what it says (so that a missing permission cannot pass for
// a success).
type aclShapeCase struct {
	user, rule string
	scenario   func(k Kind, ctx context.Context, clients []redis.UniversalClient, admins []*redis.Client, key string) error
	// waiting are the shape's waiting calls on key, with retry as their
	// retry policy.
	waiting func(c *redlock.Client, key string, retry redlock.Option) ([]waitingCall, error)
}

// waitingCall is a call that waits for a lease: Lock, RLock, Acquire.
type waitingCall = func(context.Context) (*redlock.Lease, error)

var (
	semACL = aclShapeCase{"redfence-sem", redistest.SemaphoreACL, Kind.aclSemScenario,
		func(c *redlock.Client, key string, retry redlock.Option) ([]waitingCall, error) {
			s, err := NewSem(c, key, 2, retry)
			if err != nil {
				return nil, err
			}
			return []waitingCall{s.Acquire}, nil
		}}
	rwACL = aclShapeCase{"redfence-rw", redistest.RWMutexACL, Kind.aclRWScenario,
		func(c *redlock.Client, key string, retry redlock.Option) ([]waitingCall, error) {
			rw, err := NewRW(c, key, retry)
			if err != nil {
				return nil, err
			}
			return []waitingCall{rw.RLock, rw.Lock}, nil
		}}
)

// aclShape: as a user created with exactly the documented rule (LockACL and
// the shape's), the shape's scenario runs through (restart quarantine on,
// Vouch first). With LockACL alone, and without any one part of the
// shape's rule, it fails with an ACL refusal, never with another error or a
// false success. Each run starts with an empty script cache, so that EVAL is
// needed as on a fresh or restarted node.
func (k Kind) aclShape(t *testing.T, env *redistest.TLSNodes, admins []*redis.Client, sc aclShapeCase) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	run := func(t *testing.T, user string) error {
		for _, a := range admins {
			require.NoError(t, a.ScriptFlush(ctx).Err())
		}
		return sc.scenario(k, ctx, env.Clients(t, user), admins, redistest.Key(t))
	}
	setUser(ctx, t, admins, sc.user, env.Password, redistest.LockACL+" "+sc.rule)
	require.NoError(t, run(t, sc.user), "as %s, with the documented rule", sc.user)
	err := run(t, "redfence")
	require.Error(t, err, "with LockACL alone")
	assert.True(t, aclDenied(err), "with LockACL alone: %v", err)
	assert.NotErrorIs(t, err, redlock.ErrTaken, "with LockACL alone: a refusal, not contention")
	t.Logf("with LockACL alone: %v", err)
	// A waiting call retries the refusal as any failed attempt, and
	// returns it once its policy stops (here after three attempts).
	three := redlock.WithRetry(func() backoff.BackOff { return backoff.WithMaxRetries(backoff.NewConstantBackOff(time.Millisecond), 2) })
	c := k.client(t, env.Clients(t, "redfence"), aclOpts(k.quarantineOn())...)
	calls, err := sc.waiting(c, redistest.Key(t), three)
	require.NoError(t, err)
	for i, call := range calls {
		_, err := call(ctx)
		require.ErrorIs(t, err, redlock.ErrNotAcquired, "waiting call %d", i)
		assert.True(t, aclDenied(err), "waiting call %d: %v", i, err)
		assert.NotErrorIs(t, err, redlock.ErrTaken, "waiting call %d", i)
		assert.Contains(t, err.Error(), "gave up after 3 attempts", "waiting call %d", i)
	}
	parts := strings.Fields(sc.rule)
	for i, part := range parts {
		t.Run(part, func(t *testing.T) {
			user := fmt.Sprintf("%s-without%d", sc.user, i)
			setUser(ctx, t, admins, user, env.Password, redistest.LockACL+" "+strings.Join(append(parts[:i:i], parts[i+1:]...), " "))
			err := run(t, user)
			require.Error(t, err, "the scenario runs without %s", part)
			assert.True(t, aclDenied(err), "without %s: %v", part, err)
			assert.NotErrorIs(t, err, redlock.ErrTaken, "without %s: a refusal, not contention", part)
			t.Logf("without %s: %v", part, err)
		})
	}
}

// onNodes counts the nodes where has holds, as the admin user sees them.
func onNodes(ctx context.Context, admins []*redis.Client, has func(ctx context.Context, a *redis.Client) (bool, error)) (int, error) {
	n := 0
	for i, a := range admins {
		ok, err := has(ctx, a)
		if err != nil {
			return 0, fmt.Errorf("node %d, as admin: %w", i, err)
		}
		if ok {
			n++
		}
	}
	return n, nil
}

// member says whether the sorted set key records v.
func member(key, v string) func(ctx context.Context, a *redis.Client) (bool, error) {
	return func(ctx context.Context, a *redis.Client) (bool, error) {
		err := a.ZScore(ctx, key, v).Err()
		if errors.Is(err, redis.Nil) {
			return false, nil
		}
		return err == nil, err
	}
}

// exists says whether key exists.
func exists(key string) func(ctx context.Context, a *redis.Client) (bool, error) {
	return func(ctx context.Context, a *redis.Client) (bool, error) {
		n, err := a.Exists(ctx, key).Result()
		return n == 1, err
	}
}

// holds says whether key holds v.
func holds(key, v string) func(ctx context.Context, a *redis.Client) (bool, error) {
	return func(ctx context.Context, a *redis.Client) (bool, error) {
		got, err := a.Get(ctx, key).Result()
		if errors.Is(err, redis.Nil) {
			return false, nil
		}
		return got == v, err
	}
}

// expectOn returns an error unless has holds on at least least and at most
// most nodes.
func expectOn(ctx context.Context, admins []*redis.Client, what string, least, most int, has func(ctx context.Context, a *redis.Client) (bool, error)) error {
	n, err := onNodes(ctx, admins, has)
	switch {
	case err != nil:
		return err
	case n < least || n > most:
		return fmt.Errorf("%s on %d of %d nodes, want %d to %d", what, n, len(admins), least, most)
	}
	return nil
}

// aclSemScenario: a semaphore of two permits takes one permit with
// TryAcquire and one with Acquire (each recorded on a quorum of nodes), a
// third holder is refused with ErrTaken, a waiting Acquire is refused once
// and gets the permit a holder releases (the released member gone from a
// quorum), and every lease extends and releases.
func (k Kind) aclSemScenario(ctx context.Context, clients []redis.UniversalClient, admins []*redis.Client, key string) error {
	c, err := k.vouched(ctx, clients)
	if err != nil {
		return err
	}
	defer c.Close()
	s, err := NewSem(c, key, 2)
	if err != nil {
		return err
	}
	full, q, n := s.Key(), semQuorum(len(admins), 2), len(admins)
	l1, err := s.TryAcquire(ctx)
	if err != nil {
		return fmt.Errorf("semaphore TryAcquire: %w", err)
	}
	l2, err := s.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("semaphore acquire: %w", err)
	}
	for _, l := range []*redlock.Lease{l1, l2} {
		if err := expectOn(ctx, admins, "a holder", q, n, member(full, l.Value())); err != nil {
			return err
		}
	}
	if _, err := s.TryAcquire(ctx); !errors.Is(err, redlock.ErrTaken) {
		return fmt.Errorf("a third holder of two permits, want ErrTaken: %w", err)
	}
	w := newWaiter(ctx)
	defer w.stop()
	ws, err := NewSem(c, key, 2, w.retry())
	if err != nil {
		return err
	}
	w.start(ws.Acquire)
	if err := w.refused(); err != nil {
		return fmt.Errorf("semaphore acquire while every permit is held: %w", err)
	}
	if err := l1.Release(ctx); err != nil {
		return fmt.Errorf("semaphore release: %w", err)
	}
	if err := expectOn(ctx, admins, "a released holder", 0, n-q, member(full, l1.Value())); err != nil {
		return err
	}
	l3, err := w.next()
	if err != nil {
		return fmt.Errorf("semaphore Acquire once a permit was released: %w", err)
	}
	for _, l := range []*redlock.Lease{l2, l3} {
		if err := l.Extend(ctx); err != nil {
			return fmt.Errorf("semaphore Extend: %w", err)
		}
		if err := l.Release(ctx); err != nil {
			return fmt.Errorf("semaphore release: %w", err)
		}
		if err := expectOn(ctx, admins, "a released holder", 0, n-q, member(full, l.Value())); err != nil {
			return err
		}
	}
	return nil
}

// aclRWScenario: a fenced read-write lock takes a reader with TryRLock and
// one with RLock (each recorded on a majority, with no token); a TryLock is
// refused with ErrTaken; a waiting Lock is refused once, leaving its intent
// marker on every node, which holds a new reader back ("a writer waits");
// once the readers release (gone from a majority) the Lock gets in with a
// token, its value on a majority; a TryLock after it gets a larger token;
// every lease extends and releases.
func (k Kind) aclRWScenario(ctx context.Context, clients []redis.UniversalClient, admins []*redis.Client, key string) error {
	c, err := k.vouched(ctx, clients, withFencing...)
	if err != nil {
		return err
	}
	defer c.Close()
	rw, err := NewRW(c, key)
	if err != nil {
		return err
	}
	full, n := rw.Key(), len(admins)
	need := majority(n)
	readers, intent := ReadersKey(full), IntentKey(full)
	r1, err := rw.TryRLock(ctx)
	if err != nil {
		return fmt.Errorf("rw TryRLock: %w", err)
	}
	r2, err := rw.RLock(ctx)
	if err != nil {
		return fmt.Errorf("rw RLock: %w", err)
	}
	for _, r := range []*redlock.Lease{r1, r2} {
		if r.Token() != 0 {
			return fmt.Errorf("a reader with token %d", r.Token())
		}
		if err := expectOn(ctx, admins, "a reader", need, n, member(readers, r.Value())); err != nil {
			return err
		}
	}
	if err := r1.Extend(ctx); err != nil {
		return fmt.Errorf("reader Extend: %w", err)
	}
	if _, err := rw.TryLock(ctx); !errors.Is(err, redlock.ErrTaken) {
		return fmt.Errorf("rw TryLock while readers hold, want ErrTaken: %w", err)
	}
	w := newWaiter(ctx)
	defer w.stop()
	wrw, err := NewRW(c, key, w.retry())
	if err != nil {
		return err
	}
	w.start(wrw.Lock)
	if err := w.refused(); err != nil {
		return fmt.Errorf("rw Lock while readers hold: %w", err)
	}
	if err := expectOn(ctx, admins, "the intent marker", n, n, exists(intent)); err != nil {
		return err
	}
	if _, err := rw.TryRLock(ctx); !errors.Is(err, redlock.ErrTaken) || !strings.Contains(err.Error(), "a writer waits") {
		return fmt.Errorf("rw TryRLock while a writer waits, want ErrTaken (a writer waits): %w", err)
	}
	for _, r := range []*redlock.Lease{r1, r2} {
		if err := r.Release(ctx); err != nil {
			return fmt.Errorf("reader Release: %w", err)
		}
		if err := expectOn(ctx, admins, "a released reader", 0, n-need, member(readers, r.Value())); err != nil {
			return err
		}
	}
	wl, err := w.next()
	if err != nil {
		return fmt.Errorf("rw Lock once the readers left: %w", err)
	}
	if err := expectOn(ctx, admins, "the writer", need, n, holds(full, wl.Value())); err != nil {
		return err
	}
	end := func(l *redlock.Lease) error {
		if err := l.Extend(ctx); err != nil {
			return fmt.Errorf("writer Extend: %w", err)
		}
		if err := l.Release(ctx); err != nil {
			return fmt.Errorf("writer Release: %w", err)
		}
		return expectOn(ctx, admins, "a released writer", 0, n-need, holds(full, l.Value()))
	}
	if wl.Token() == 0 {
		return errors.New("a fenced writer without a token")
	}
	if err := end(wl); err != nil {
		return err
	}
	wl2, err := rw.TryLock(ctx)
	if err != nil {
		return fmt.Errorf("rw TryLock: %w", err)
	}
	if wl2.Token() <= wl.Token() {
		return fmt.Errorf("writer tokens %d, then %d", wl.Token(), wl2.Token())
	}
	return end(wl2)
}
