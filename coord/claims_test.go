package coord_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/coord"
	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redisconn"
	"github.com/redfence/redfence/redlock"
)

// claim claims id and requires the state want.
func claim(t *testing.T, ctx context.Context, cs *coord.Claims, id string, want coord.ClaimState, msgAndArgs ...any) *coord.Claim {
	t.Helper()
	c, st, err := cs.Claim(ctx, id)
	require.NoError(t, err)
	require.Equal(t, want, st, msgAndArgs...)
	return c
}

// claimJob makes Claims on b with the given TTL and claims "job", which it
// requires to be owned.
func claimJob(t *testing.T, b backend, ttl time.Duration) (context.Context, *coord.Claims, *coord.Claim) {
	t.Helper()
	ctx := ctxT(t)
	cs := newClaims(t, b, coord.WithTTL(ttl))
	return ctx, cs, claim(t, ctx, cs, "job", coord.ClaimOwned)
}

func newClaims(t *testing.T, b backend, opts ...coord.ClaimsOption) *coord.Claims {
	t.Helper()
	cs, err := coord.NewClaims(b.locker, append([]coord.ClaimsOption{coord.WithKeyPrefix(redistest.Key(t) + ":")}, opts...)...)
	require.NoError(t, err)
	return cs
}

// ClaimState names its three states, and the number of any other value.
func TestClaimStateString(t *testing.T) {
	got := []string{coord.ClaimOwned.String(), coord.ClaimDone.String(), coord.ClaimBusy.String(), coord.ClaimState(4).String()}
	assert.Equal(t, []string{"owned", "done", "busy", "ClaimState(4)"}, got)
}

// TestClaimsAtMostOnce: 16 workers go through the same ids at once. Each id's
// work runs exactly once; every third id is abandoned by its first owner
// (before running the work) and then run by another worker; id 1's owner
// waits until another worker has found it busy; later claims of a finished
// id see it done, with the token of the run that finished it.
func TestClaimsAtMostOnce(t *testing.T) {
	loadedBackends(t, func(t *testing.T, b backend) {
		const workers, ids = 16, 24
		ctx := ctxT(t)
		cs := newClaims(t, b, coord.WithFencing(), coord.WithNodeTimeout(500*time.Millisecond))
		cs0Key := redistest.Key(t) + ":work:"
		var (
			runs      [ids]atomic.Int32
			abandoned [ids]atomic.Bool
			abandons  atomic.Int32
			busy      atomic.Int32
			runToken  [ids]atomic.Uint64
			owners    [ids][]fencing.Token // every owned claim's token, in order
			mu        sync.Mutex
		)
		errs := make(chan error, workers)
		busyOn1 := make(chan struct{})
		var sawBusy sync.Once
		var wg sync.WaitGroup
		start := make(chan struct{})
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				queue := make([]int, ids)
				for i := range queue {
					queue[i] = i
				}
				for len(queue) > 0 {
					id := queue[0]
					queue = queue[1:]
					c, st, err := cs.Claim(ctx, strconv.Itoa(id))
					if err != nil {
						errs <- fmt.Errorf("claim %d: %w", id, err)
						return
					}
					switch st {
					case coord.ClaimOwned:
						mu.Lock()
						owners[id] = append(owners[id], c.Token())
						mu.Unlock()
						if id%3 == 0 && abandoned[id].CompareAndSwap(false, true) {
							abandons.Add(1)
							if err := c.Abandon(ctx); err != nil {
								errs <- fmt.Errorf("abandon %d: %w", id, err)
								return
							}
							queue = append(queue, id)
							continue
						}
						if id == 1 { // hold id 1 until another worker found it busy
							select {
							case <-busyOn1:
							case <-ctx.Done():
							}
						}
						// The work: a write to Redis, counted here and there.
						runs[id].Add(1)
						if err := b.clients[0].Incr(ctx, cs0Key+strconv.Itoa(id)).Err(); err != nil {
							errs <- err
							return
						}
						runToken[id].Store(uint64(c.Token()))
						if err := c.Done(ctx); err != nil {
							errs <- fmt.Errorf("done %d: %w", id, err)
							return
						}
					case coord.ClaimBusy:
						busy.Add(1)
						if id == 1 {
							sawBusy.Do(func() { close(busyOn1) })
						}
						queue = append(queue, id)
					case coord.ClaimDone:
						if tok := uint64(c.Token()); tok != runToken[id].Load() {
							errs <- fmt.Errorf("id %d: done with token %d, the run had %d", id, tok, runToken[id].Load())
							return
						}
					}
				}
			}()
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		for id := range runs {
			assert.EqualValues(t, 1, runs[id].Load(), "id %d ran %d times", id, runs[id].Load())
			n, err := b.clients[0].Get(ctx, cs0Key+strconv.Itoa(id)).Int()
			require.NoError(t, err)
			assert.Equal(t, 1, n, "id %d: writes", id)
			want := 1
			if id%3 == 0 {
				want = 2 // abandoned once, then run
			}
			if assert.Len(t, owners[id], want, "owners of id %d", id) && want == 2 {
				assert.Less(t, owners[id][0], owners[id][1], "id %d: the second owner's token is higher", id)
			}
			assert.Positive(t, uint64(owners[id][0]))
		}
		assert.EqualValues(t, ids/3, abandons.Load())
		assert.Positive(t, busy.Load(), "workers met in-flight claims")
		t.Logf("%s: %d busy answers", b.name, busy.Load())
	})
}

// TestAbandonLetsAnotherRun: a busy claim says for how long; after Abandon
// another worker owns it; after Done everybody sees it done.
func TestAbandonLetsAnotherRun(t *testing.T) {
	backends(t, func(t *testing.T, b backend) {
		const ttl = 5 * time.Second
		ctx, cs, a := claimJob(t, b, ttl)
		assert.Equal(t, "job", a.ID())
		assert.Zero(t, a.Token(), "fencing off")
		assert.True(t, a.ValidUntil().After(time.Now().Add(ttl/2)))

		busy := claim(t, ctx, cs, "job", coord.ClaimBusy)
		assert.Equal(t, coord.ClaimBusy, busy.State())
		assert.Greater(t, busy.BusyFor(), ttl/2)
		assert.LessOrEqual(t, busy.BusyFor(), ttl)
		for _, err := range []error{busy.Done(ctx), busy.Abandon(ctx), busy.Extend(ctx), busy.KeepAlive(ctx), busy.Err()} {
			assert.ErrorIs(t, err, coord.ErrNotOwned)
		}
		bctx, cancel := busy.Context(ctx)
		cancel()
		assert.ErrorIs(t, context.Cause(bctx), coord.ErrNotOwned)

		require.NoError(t, a.Abandon(ctx))
		assert.ErrorIs(t, a.Abandon(ctx), coord.ErrReleased)
		assert.ErrorIs(t, a.Done(ctx), coord.ErrReleased, "an abandoned claim cannot be marked done")
		assert.ErrorIs(t, a.Err(), coord.ErrReleased)

		c := claim(t, ctx, cs, "job", coord.ClaimOwned, "free again after Abandon")
		require.NoError(t, c.Done(ctx))
		require.NoError(t, c.Done(ctx), "Done twice is a no-op")
		assert.ErrorIs(t, c.Abandon(ctx), coord.ErrReleased)

		d := claim(t, ctx, cs, "job", coord.ClaimDone)
		assert.Equal(t, coord.ClaimDone, d.State())
		assert.Zero(t, d.BusyFor())
	})
}

// TestDoneOutlivesTheClaimTTL: a done id is refused after the claim's TTL
// has long passed (the marker lives for the retention), while an id whose
// claim simply expired can be claimed again.
func TestDoneOutlivesTheClaimTTL(t *testing.T) {
	backends(t, func(t *testing.T, b backend) {
		ctx := ctxT(t)
		const ttl = 100 * time.Millisecond
		cs := newClaims(t, b, coord.WithTTL(ttl), coord.WithRetention(time.Hour))
		done := claim(t, ctx, cs, "done", coord.ClaimOwned)
		require.NoError(t, done.Done(ctx))
		expired := claim(t, ctx, cs, "expired", coord.ClaimOwned)

		// Let both claims' TTL pass on the Redis clock.
		<-time.After(time.Until(expired.ValidUntil()) + 2*ttl)

		marked := 0 // Done needs a majority; a loaded node may miss it
		for _, c := range b.clients {
			pttl, err := c.PTTL(ctx, done.Key()).Result()
			require.NoError(t, err)
			if pttl > 59*time.Minute { // the marker lives for the retention
				marked++
			}
			n, err := c.Exists(ctx, expired.Key()).Result()
			require.NoError(t, err)
			assert.Zero(t, n, "the expired claim's key is gone")
		}
		assert.GreaterOrEqual(t, marked, len(b.clients)/2+1, "nodes holding the marker")
		claim(t, ctx, cs, "done", coord.ClaimDone, "done stays done after the TTL")
		again := claim(t, ctx, cs, "expired", coord.ClaimOwned, "an expired claim is free again")
		require.NoError(t, again.Abandon(ctx))
		assert.ErrorIs(t, expired.Err(), coord.ErrLost)
	})
}

// TestDoneAfterLoss: a claim whose TTL ran out and was taken by another
// worker cannot be marked done by its first owner.
func TestDoneAfterLoss(t *testing.T) {
	backends(t, func(t *testing.T, b backend) {
		const ttl = 100 * time.Millisecond
		ctx, cs, a := claimJob(t, b, ttl)
		actx := contextOf(t, ctx, a)
		<-actx.Done()                                    // the claim's validity ran out (nobody kept it alive)
		<-time.After(time.Until(a.ValidUntil()) + 2*ttl) // the key expires on the nodes too
		c := claim(t, ctx, cs, "job", coord.ClaimOwned)
		err := a.Done(ctx)
		require.ErrorIs(t, err, coord.ErrLost)
		var qe *coord.QuorumError
		assert.ErrorAs(t, err, &qe)
		require.NoError(t, c.Done(ctx))
		claim(t, ctx, cs, "job", coord.ClaimDone)
	})
}

// TestPartialDoneMarkerRefuses: a done marker on a single node of three (a
// Done that reached a minority) refuses the id even though a majority is
// free, and is copied onto the others; a marker on a majority refuses too.
func TestPartialDoneMarkerRefuses(t *testing.T) {
	ctx := ctxT(t)
	b := newRedlock(t, 3)
	cs := newClaims(t, b)
	probe := claim(t, ctx, cs, "probe", coord.ClaimOwned)
	require.NoError(t, probe.Abandon(ctx))
	prefix := probe.Key()[:len(probe.Key())-len("probe")]

	minority := prefix + "minority"
	require.NoError(t, b.clients[2].Set(ctx, minority, "!done:7:someone", time.Hour).Err())
	c := claim(t, ctx, cs, "minority", coord.ClaimDone)
	assert.EqualValues(t, 7, c.Token(), "the finisher's token, read from the marker")
	for i, cl := range b.clients {
		v, err := cl.Get(ctx, minority).Result()
		require.NoError(t, err, "node %d", i)
		assert.Equal(t, "!done:7:someone", v, "node %d holds the marker after the repair", i)
		pttl, err := cl.PTTL(ctx, minority).Result()
		require.NoError(t, err)
		assert.Greater(t, pttl, 59*time.Minute, "node %d: the marker keeps its retention", i)
	}

	majority := prefix + "majority"
	for _, cl := range b.clients[:2] {
		require.NoError(t, cl.Set(ctx, majority, "!done:0:someone", time.Hour).Err())
	}
	claim(t, ctx, cs, "majority", coord.ClaimDone)
}

// TestDoneNeedsMajority: with a majority of nodes paused, Done fails with a
// QuorumError and the claim stays held; once they are back, Done succeeds.
func TestDoneNeedsMajority(t *testing.T) {
	ctx := ctxT(t)
	b := newRedlock(t, 3)
	cs := newClaims(t, b, coord.WithNodeTimeout(50*time.Millisecond))
	c := claim(t, ctx, cs, "job", coord.ClaimOwned)
	pause(t, b.nodes[1:]...)
	err := c.Done(ctx)
	var qe *coord.QuorumError
	require.ErrorAs(t, err, &qe)
	assert.Equal(t, "done", qe.Op)
	assert.Equal(t, 1, qe.Got)
	assert.NotErrorIs(t, err, coord.ErrLost, "a timeout is not a loss")
	assert.NoError(t, c.Err(), "still held")
	resume(t, b.nodes[1:]...)
	require.NoError(t, c.Done(ctx))
	claim(t, ctx, cs, "job", coord.ClaimDone)
}

// TestClaimKeepAlive: a claim kept alive outlasts its TTL many times; Done
// ends KeepAlive (ErrReleased) and the claim's context.
func TestClaimKeepAlive(t *testing.T) {
	backends(t, func(t *testing.T, b backend) {
		const ttl = 150 * time.Millisecond
		ctx, cs, c := claimJob(t, b, ttl)
		wctx := contextOf(t, ctx, c)
		kept := make(chan error, 1)
		go func() { kept <- c.KeepAlive(ctx) }()
		<-time.After(4 * ttl)
		require.NoError(t, c.Err(), "kept alive")
		claim(t, ctx, cs, "job", coord.ClaimBusy)
		require.NoError(t, c.Done(ctx))
		assert.ErrorIs(t, within(t, 5*time.Second, kept, "KeepAlive"), coord.ErrReleased)
		<-wctx.Done()
		assert.ErrorIs(t, context.Cause(wctx), coord.ErrReleased)
	})
}

// TestClaimsDo: of many concurrent Do calls, one runs fn; an fn error
// abandons the claim so that the next Do runs it again.
func TestClaimsDo(t *testing.T) {
	loadedBackends(t, func(t *testing.T, b backend) { // eight Do calls at once
		ctx := ctxT(t)
		cs := newClaims(t, b)
		boom := errors.New("boom")
		st, err := cs.Do(ctx, "job", func(ctx context.Context, c *coord.Claim) error { return boom })
		assert.Equal(t, coord.ClaimOwned, st)
		require.ErrorIs(t, err, boom)

		var ran atomic.Int32
		var wg sync.WaitGroup
		states := make(chan coord.ClaimState, 8)
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				st, err := cs.Do(ctx, "job", func(ctx context.Context, c *coord.Claim) error {
					ran.Add(1)
					return ctx.Err()
				})
				assert.NoError(t, err)
				states <- st
			}()
		}
		wg.Wait()
		close(states)
		owned := 0
		for st := range states {
			if st == coord.ClaimOwned {
				owned++
			}
		}
		assert.EqualValues(t, 1, ran.Load(), "fn ran once after the failure")
		assert.Equal(t, 1, owned)
		st, err = cs.Do(ctx, "job", func(context.Context, *coord.Claim) error {
			t.Error("ran a finished job")
			return nil
		})
		require.NoError(t, err)
		assert.Equal(t, coord.ClaimDone, st)

		assert.Panics(t, func() {
			_, _ = cs.Do(ctx, "panics", func(context.Context, *coord.Claim) error { panic("oops") })
		})
		c := claim(t, ctx, cs, "panics", coord.ClaimOwned, "a panicking fn abandons the claim")
		require.NoError(t, c.Abandon(ctx))
	})
}

func TestClaimsBadArguments(t *testing.T) {
	b := newSingle(t)
	other, err := redlock.NewFromConns([]redisconn.Conn{notGoRedis{redisconn.GoRedis(b.clients[0])}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.Close() })

	invalid := func(err error, field string) {
		t.Helper()
		var ie *coord.InvalidError
		if assert.ErrorAs(t, err, &ie) {
			assert.Equal(t, field, ie.Field)
		}
		assert.ErrorIs(t, err, coord.ErrInvalid)
	}
	_, err = coord.New(nil)
	invalid(err, "lock client")
	_, err = coord.New(other)
	invalid(err, "lock client") // its nodes are not go-redis clients

	_, err = coord.NewClaims(nil)
	invalid(err, "locker")
	_, err = coord.NewClaims(b.locker, coord.WithRetention(0))
	invalid(err, "retention")
	_, err = coord.NewClaims(b.locker, nil, coord.WithFencing())
	assert.NoError(t, err, "a nil option is skipped")
	_, err = coord.NewClaims(b.locker, coord.WithNodeTimeout(-time.Second))
	invalid(err, "node timeout")
	_, err = coord.NewClaims(b.locker, coord.WithTTL(time.Millisecond))
	var ce *redlock.ConfigError
	assert.ErrorAs(t, err, &ce, "the lock client refuses a 1ms TTL")

	cs := newClaims(t, b)
	c, st, err := cs.Claim(t.Context(), "")
	invalid(err, "id")
	assert.Nil(t, c)
	assert.Zero(t, st)
}

// notGoRedis is a Conn that does not say which go-redis client carries it,
// as another client's adapter would not.
type notGoRedis struct{ redisconn.Conn }

func (c notGoRedis) Info() redisconn.Info {
	i := c.Conn.Info()
	i.Client = nil
	return i
}
