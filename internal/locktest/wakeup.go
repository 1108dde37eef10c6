package locktest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
)

// The wake-up tests give waiters an hour's back-off wherever the point is
// that something other than the poll woke them: within the test's deadline
// only a wake-up can end such a wait.
func runWakeup(t *testing.T, env Env) {
	if env.NewClient == nil {
		return
	}
	t.Run("Wakeup", func(t *testing.T) { runTests(t, env, wakeupTests) })
}

// wakeupTests are the tests of the wake-up queue and its notices.
var wakeupTests = []test[Env]{
	{"FIFOWithinClient", wakeFIFO},
	{"LeavingWaitersDoNotStrandOthers", wakeLeave},
	{"LostLeasePassesTurn", wakeLost},
	{"ExpiredLeasePassesTurn", wakeExpired},
	{"RetryPolicyStillEndsLock", wakePolicy},
	{"TryLockDoesNotQueue", wakeTryLock},
	{"NoticeWakesOtherClient", wakeNotice},
	{"NoNoticeWithWakeupOff", wakeOff},
	{"KilledSubscriptionsRecover", wakeKilled},
	{"PollsWithoutChannelPermission", wakeDenied},
	{"CloseEndsSubscriptions", wakeClose},
}

// hourly is a retry policy of one hour between attempts that counts its
// NextBackOff calls (one per failed attempt) and closes first on the first.
type hourly struct {
	calls atomic.Int32
	first chan struct{}
	once  sync.Once
}

func newHourly() *hourly { return &hourly{first: make(chan struct{})} }

func (h *hourly) NextBackOff() time.Duration {
	h.calls.Add(1)
	h.once.Do(func() { close(h.first) })
	return time.Hour
}

func (h *hourly) Reset() {}

// policy returns h for every Lock: use it for one Lock at a time.
func (h *hourly) policy() func() backoff.BackOff { return func() backoff.BackOff { return h } }

// hour is a stateless hourly back-off for several Lock calls at once.
func hour() backoff.BackOff { return backoff.NewConstantBackOff(time.Hour) }

// poll is a short back-off, for tests where polling must get the lock.
func poll() backoff.BackOff { return backoff.NewConstantBackOff(20 * time.Millisecond) }

// waitCtx returns a context for waiting Lock calls, cancelled when the test
// ends, before the clients and nodes are closed (call it after creating
// them).
func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

type result struct {
	l   *redlock.Lease
	err error
}

// lockAsync runs lock(ctx) (a Lock or RLock) in a goroutine and delivers
// its result.
func lockAsync(ctx context.Context, lock attempt) <-chan result {
	ch := make(chan result, 1)
	go func() {
		l, err := lock(ctx)
		ch <- result{l, err}
	}()
	return ch
}

func waiting(c Client, key string) int {
	w, _ := c.WakeState(key)
	return w
}

func subscribed(c Client, key string) int {
	_, s := c.WakeState(key)
	return s
}

// waitersAfterGrant checks that n Lock calls of c wait for key once one was
// granted: at once in the Client's own count; eventually where the count is
// the nodes' queues, as a node whose release has not landed yet (Release
// returns at a majority) still queues the grantee.
func waitersAfterGrant(t *testing.T, env Env, c Client, key string, n int, msg string) {
	t.Helper()
	if env.SharedWakeState {
		landed(t, func() bool { return waiting(c, key) == n }, msg)
		return
	}
	assert.Equal(t, n, waiting(c, key), msg)
}

// queued waits until c has n Lock calls waiting for key.
func queued(t *testing.T, c Client, key string, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return waiting(c, key) == n }, 10*time.Second, time.Millisecond,
		"%d Lock calls waiting for %s", n, key)
}

// held is a key held by a lease of a fresh Client, with (heldWithWaiter)
// one Lock call of that Client queued behind it.
type held struct {
	clients []redis.UniversalClient
	c       Client
	ctx     context.Context // waitCtx
	key     string
	m       Mutex
	holder  *redlock.Lease
	waiter  <-chan result // heldWithWaiter only
}

// heldByClient sets up a held without a waiter, on a Client with setup s.
func heldByClient(t *testing.T, env Env, s Setup) held {
	t.Helper()
	h := held{clients: setupNodes(t, env)}
	h.c = env.NewClient(t, h.clients, s)
	h.ctx = waitCtx(t)
	h.key = redistest.Key(t)
	h.m = h.c.NewMutex(t, h.key)
	h.holder = take(h.ctx, t, h.m)
	return h
}

// heldWithWaiter sets up a held, on a Client with setup s.
func heldWithWaiter(t *testing.T, env Env, s Setup) held {
	t.Helper()
	h := heldByClient(t, env, s)
	h.waiter = lockAsync(h.ctx, h.m.Lock)
	queued(t, h.c, h.key, 1)
	return h
}

// otherHeld is a key held by a lease of one fresh Client over fresh nodes,
// with a Lock call of another fresh Client (its own go-redis clients:
// another process, as far as Redis can tell) started behind it.
type otherHeld struct {
	admin  []redis.UniversalClient // the test's own clients of the nodes
	b      Client                  // the waiting Client
	ctx    context.Context         // waitCtx
	key    string
	holder *redlock.Lease
	waiter <-chan result
}

// heldByOther sets up an otherHeld whose waiting Client has setup s.
func heldByOther(t *testing.T, env Env, s Setup) otherHeld {
	t.Helper()
	nodes := redistest.Nodes(t, env.Nodes)
	admin := redistest.Clients(t, nodes)
	a := env.NewClient(t, redistest.Clients(t, nodes), Setup{TTL: longTTL})
	h := otherHeld{admin: admin, b: env.NewClient(t, redistest.Clients(t, nodes), s)}
	h.ctx = waitCtx(t)
	h.key = redistest.Key(t)
	var err error
	h.holder, err = a.NewMutex(t, h.key).TryLock(h.ctx)
	require.NoError(t, err)
	h.waiter = lockAsync(h.ctx, h.b.NewMutex(t, h.key).Lock)
	return h
}

// subscribedEverywhere waits until c has key's release channel subscribed on
// every node.
func subscribedEverywhere(t *testing.T, env Env, c Client, key string, msgAndArgs ...any) {
	t.Helper()
	require.Eventually(t, func() bool { return subscribed(c, key) == env.Nodes }, 10*time.Second, time.Millisecond, msgAndArgs...)
}

// first waits until h's Lock made its first attempt and is in its hour-long
// wait.
func first(t *testing.T, ctx context.Context, h *hourly) {
	t.Helper()
	select {
	case <-h.first:
	case <-ctx.Done():
		t.Fatal("the Lock call never failed its first attempt")
	}
}

// Waiters of one Client get the lock in the order they asked for it.
func wakeFIFO(t *testing.T, env Env) {
	h := heldByClient(t, env, Setup{TTL: longTTL, Retry: hour})
	clients, c, ctx, key, m, holder := h.clients, h.c, h.ctx, h.key, h.m, h.holder
	type grant struct {
		i   int
		l   *redlock.Lease
		err error
	}
	const n = 5
	grants := make(chan grant, n)
	for i := range n {
		go func() {
			l, err := m.Lock(ctx)
			grants <- grant{i, l, err}
		}()
		queued(t, c, key, i+1)
	}
	require.NoError(t, holder.Release(ctx))
	for want := range n {
		g := <-grants
		require.NoError(t, g.err)
		assert.Equal(t, want, g.i, "grant %d went to waiter %d", want, g.i)
		waitersAfterGrant(t, env, c, key, n-1-want, "the others still wait")
		assert.GreaterOrEqual(t, count(holders(t, clients, key), g.l.Value()), majority(env.Nodes))
		require.NoError(t, g.l.Release(ctx))
	}
}

// A waiter whose context ends leaves the queue, the head as well as one
// behind it, and the rest still get the lock.
func wakeLeave(t *testing.T, env Env) {
	h := heldByClient(t, env, Setup{TTL: longTTL, Retry: hour})
	c, ctx, key, m, holder := h.c, h.ctx, h.key, h.m, h.holder
	var res [3]<-chan result
	var cancels [3]context.CancelFunc
	for i := range res {
		wctx, cancel := context.WithCancel(ctx)
		cancels[i] = cancel
		res[i] = lockAsync(wctx, m.Lock)
		queued(t, c, key, i+1)
	}
	cancels[1]() // behind the head
	r := <-res[1]
	require.ErrorIs(t, r.err, redlock.ErrNotAcquired)
	assert.ErrorIs(t, r.err, context.Canceled)
	assert.ErrorIs(t, r.err, redlock.ErrTaken, "it waited behind a lease of its own client")
	assert.Equal(t, 2, waiting(c, key))
	cancels[0]() // the head
	r = <-res[0]
	require.ErrorIs(t, r.err, redlock.ErrNotAcquired)
	assert.ErrorIs(t, r.err, context.Canceled)
	assert.Equal(t, 1, waiting(c, key))
	require.NoError(t, holder.Release(ctx))
	r = <-res[2]
	cancels[2]()
	require.NoError(t, r.err, "the last waiter got the lock")
	waitersAfterGrant(t, env, c, key, 0, "the grantee left the queue")
	require.NoError(t, r.l.Release(ctx))
}

// A lease found lost by Extend ends without Release: its end passes the turn.
func wakeLost(t *testing.T, env Env) {
	h := heldWithWaiter(t, env, Setup{TTL: longTTL, Retry: hour})
	clients, ctx, key, holder, res := h.clients, h.ctx, h.key, h.holder, h.waiter
	for _, cl := range clients {
		require.NoError(t, cl.Del(ctx, key).Err())
	}
	require.ErrorIs(t, holder.Extend(ctx), redlock.ErrLost)
	r := <-res
	require.NoError(t, r.err, "the waiter got the lock once the lease was found lost")
	require.NoError(t, r.l.Release(ctx))
}

// A lease whose validity runs out without Release passes the turn too:
// nothing hands the key over, so the lease's end wakes the client's waiters,
// once when it ends and once more when its keys have expired on the nodes
// (the waiter's own poll is an hour).
func wakeExpired(t *testing.T, env Env) {
	h := heldWithWaiter(t, env, Setup{TTL: time.Second, NodeTimeout: 100 * time.Millisecond, Retry: hour})
	ctx, holder, res := h.ctx, h.holder, h.waiter
	r := <-res
	require.NoError(t, r.err, "the waiter got the lock once the lease expired")
	assert.ErrorIs(t, holder.Err(), redlock.ErrLost, "the holder's lease had expired")
	_ = r.l.Release(ctx) // may have expired itself under a slow test run
}

// The retry policy still counts a queued Lock's attempts, and its Stop still
// ends Lock, even when the queue answered without asking the nodes.
func wakePolicy(t *testing.T, env Env) {
	h := heldByClient(t, env, Setup{TTL: longTTL, NoRetry: true})
	clients, c, ctx, key, m, holder := h.clients, h.c, h.ctx, h.key, h.m, h.holder
	_, err := m.Lock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	assert.ErrorIs(t, err, redlock.ErrTaken)
	assert.Contains(t, err.Error(), "gave up after 1 attempts")
	assert.Equal(t, 0, waiting(c, key), "it left the queue")

	limited := env.NewClient(t, clients, Setup{TTL: longTTL, Retry: func() backoff.BackOff {
		return backoff.WithMaxRetries(backoff.NewConstantBackOff(time.Millisecond), 3)
	}})
	lm := limited.NewMutex(t, key)
	_, err = lm.TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired, "another client holds it")
	require.NoError(t, holder.Release(ctx))
	lh, err := lm.TryLock(ctx)
	require.NoError(t, err)
	_, err = lm.Lock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	assert.Contains(t, err.Error(), "gave up after 4 attempts")
	require.NoError(t, lh.Release(ctx))
}

// TryLock makes its one attempt even while Lock calls wait, and does not
// join their queue.
func wakeTryLock(t *testing.T, env Env) {
	h := heldWithWaiter(t, env, Setup{TTL: longTTL, Retry: hour})
	c, ctx, key, m, holder, res := h.c, h.ctx, h.key, h.m, h.holder, h.waiter
	_, err := m.TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	var qe *redlock.QuorumError
	assert.ErrorAs(t, err, &qe, "TryLock asked the nodes")
	assert.Equal(t, 1, waiting(c, key))
	require.NoError(t, holder.Release(ctx))
	r := <-res
	require.NoError(t, r.err)
	require.NoError(t, r.l.Release(ctx))
}

// A client waiting for a key held by another client (its own go-redis
// clients: another process, as far as Redis can tell) is woken by the
// release notice: with an hour's back-off nothing else could wake it.
func wakeNotice(t *testing.T, env Env) {
	h := newHourly()
	w := heldByOther(t, env, Setup{TTL: longTTL, Retry: h.policy()})
	b, ctx, key, holder, res := w.b, w.ctx, w.key, w.holder, w.waiter
	first(t, ctx, h)
	subscribedEverywhere(t, env, b, key, "B subscribes to the key's release channel on every node")
	require.NoError(t, holder.Release(ctx))
	r := <-res
	require.NoError(t, r.err, "B was woken by the release notice")
	require.NoError(t, r.l.Release(ctx))
	require.Eventually(t, func() bool { return subscribed(b, key) == 0 }, 10*time.Second, 5*time.Millisecond,
		"B unsubscribes once nobody waits")
}

// The control: with wake-up off a waiter is not woken by the notice. C (on)
// and D (off) wait for A's key; once C has the lock, the notice has been
// delivered and acted on, and D must still be in its first wait.
func wakeOff(t *testing.T, env Env) {
	nodes := redistest.Nodes(t, env.Nodes)
	a := env.NewClient(t, redistest.Clients(t, nodes), Setup{TTL: longTTL})
	hc, hd := newHourly(), newHourly()
	c := env.NewClient(t, redistest.Clients(t, nodes), Setup{TTL: longTTL, Retry: hc.policy()})
	d := env.NewClient(t, redistest.Clients(t, nodes), Setup{TTL: longTTL, Retry: hd.policy(), NoWakeup: true})
	ctx := waitCtx(t)
	key := redistest.Key(t)
	holder, err := a.NewMutex(t, key).TryLock(ctx)
	require.NoError(t, err)
	dctx, cancelD := context.WithCancel(ctx)
	defer cancelD()
	resD := lockAsync(dctx, d.NewMutex(t, key).Lock)
	resC := lockAsync(ctx, c.NewMutex(t, key).Lock)
	first(t, ctx, hd)
	first(t, ctx, hc)
	subscribedEverywhere(t, env, c, key)
	if env.SharedWakeState {
		assert.Equal(t, 1, waiting(d, key), "C waits in the queue, D, with wake-up off, not")
	} else {
		assert.Equal(t, 0, waiting(d, key), "no queue with wake-up off")
	}
	require.NoError(t, holder.Release(ctx))
	rc := <-resC
	require.NoError(t, rc.err, "C was woken")
	select {
	case r := <-resD:
		t.Fatalf("D, with wake-up off and an hour's back-off, returned: %v", r.err)
	default:
	}
	require.NoError(t, rc.l.Release(ctx))
	cancelD()
	rd := <-resD
	require.ErrorIs(t, rd.err, redlock.ErrNotAcquired)
	assert.ErrorIs(t, rd.err, context.Canceled)
	assert.Equal(t, int32(1), hd.calls.Load(), "D made one attempt: no notice woke it")
	assert.Contains(t, rd.err.Error(), "after 1 attempts")
}

// Subscriptions killed on every node (CLIENT KILL TYPE pubsub) come back: the
// waiter still gets the lock with an hour's back-off, whether the release
// notice came before or after it resubscribed (a resubscription wakes it, as
// a notice may have been missed).
func wakeKilled(t *testing.T, env Env) {
	h := newHourly()
	w := heldByOther(t, env, Setup{TTL: longTTL, Retry: h.policy()})
	admin, b, ctx, key, holder, res := w.admin, w.b, w.ctx, w.key, w.holder, w.waiter
	first(t, ctx, h)
	subscribedEverywhere(t, env, b, key)
	for i, cl := range admin {
		n, err := cl.ClientKillByFilter(ctx, "TYPE", "pubsub").Result()
		require.NoError(t, err)
		assert.Equal(t, int64(1), n, "node %d: B's subscription connection killed", i)
	}
	require.NoError(t, holder.Release(ctx))
	r := <-res
	require.NoError(t, r.err, "B got the lock after its subscriptions were killed")
	require.NoError(t, r.l.Release(ctx))
}

// A node that refuses the channel (here: the default user loses its channel
// permissions, which also kills existing subscriptions) cannot deliver
// notices: the waiter polls, and the release, whose PUBLISH is refused, still
// succeeds.
func wakeDenied(t *testing.T, env Env) {
	w := heldByOther(t, env, Setup{TTL: longTTL, Retry: poll})
	admin, b, ctx, key, holder, res := w.admin, w.b, w.ctx, w.key, w.holder, w.waiter
	subscribedEverywhere(t, env, b, key)
	for _, cl := range admin {
		require.NoError(t, cl.Do(ctx, "ACL", "SETUSER", "default", "resetchannels").Err())
	}
	require.Eventually(t, func() bool { return subscribed(b, key) == 0 }, 10*time.Second, time.Millisecond,
		"B's subscriptions are gone")
	require.NoError(t, holder.Release(ctx), "a release whose notice is refused still succeeds")
	landed(t, func() bool { return count(holders(t, admin, key), holder.Value()) == 0 }, "and deleted the key everywhere")
	r := <-res
	require.NoError(t, r.err, "B got the lock by polling")
	assert.Equal(t, 0, subscribed(b, key), "B did not resubscribe")
	require.NoError(t, r.l.Release(ctx))
}

// Close ends the subscriptions that outlive the last waiter for a while (so
// that a client locking the key again soon need not subscribe anew).
func wakeClose(t *testing.T, env Env) {
	w := heldByOther(t, env, Setup{TTL: longTTL, Retry: hour})
	admin, b, ctx, key, holder, res := w.admin, w.b, w.ctx, w.key, w.holder, w.waiter
	subscribedEverywhere(t, env, b, key)
	require.NoError(t, holder.Release(ctx))
	r := <-res
	require.NoError(t, r.err)
	require.NoError(t, r.l.Release(ctx))
	b.Close()
	assert.Equal(t, 0, subscribed(b, key), "Close ended the subscriptions")
	ch := releasedChannel(key)
	for i, cl := range admin {
		// The node notices the closed connection on its own schedule.
		assert.Eventually(t, func() bool {
			n, err := cl.(*redis.Client).PubSubNumSub(ctx, ch).Result()
			return err == nil && n[ch] == 0
		}, 10*time.Second, time.Millisecond, "node %d: no subscriber left", i)
	}
}
