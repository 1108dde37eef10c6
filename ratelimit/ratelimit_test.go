package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testclock"
	"github.com/redfence/redfence/ratelimit"
)

var algorithms = []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.FixedWindow, ratelimit.SlidingWindow}

// Algorithm names its three algorithms, and the number of any other value.
func TestAlgorithmString(t *testing.T) {
	assert.Equal(t, "[gcra fixed-window sliding-window Algorithm(0)]", fmt.Sprint(append(algorithms, 0)))
}

func newClient(t *testing.T) *redis.Client {
	t.Helper()
	return redistest.Client(t, redistest.Nodes(t, 1)[0].Addr())
}

func newLimiter(t *testing.T, c redis.Scripter, alg ratelimit.Algorithm) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.New(c, alg)
	require.NoError(t, err)
	return l
}

// serverNow returns the Redis server's clock.
func serverNow(t *testing.T, c *redis.Client) time.Time {
	t.Helper()
	now, err := c.Time(t.Context()).Result()
	require.NoError(t, err)
	return now
}

// pinned pins l's clock to at and returns it, for the test to move.
func pinned(t *testing.T, l *ratelimit.Limiter, at time.Time) *testclock.Clock {
	t.Helper()
	c := testclock.New(at)
	ratelimit.PinClock(l, c.Now)
	return c
}

// pinnedLimiter is a Limiter on a redis-server of its own with its clock
// pinned, and the key and limit a test calls it with.
type pinnedLimiter struct {
	t   *testing.T
	c   *redis.Client
	l   *ratelimit.Limiter
	clk *testclock.Clock
	key string
	lim ratelimit.Limit
}

// newPinned starts a redis-server and returns an alg limiter on it that
// calls with lim, its clock pinned to the server's clock until a call sets it.
func newPinned(t *testing.T, alg ratelimit.Algorithm, lim ratelimit.Limit) *pinnedLimiter {
	t.Helper()
	c := newClient(t)
	l := newLimiter(t, c, alg)
	return &pinnedLimiter{t: t, c: c, l: l, clk: pinned(t, l, serverNow(t, c)), key: redistest.Key(t), lim: lim}
}

// allowAt sets the clock to at and calls Allow, requiring no error.
func (p *pinnedLimiter) allowAt(at time.Time) ratelimit.Result {
	p.t.Helper()
	p.clk.Set(at)
	res, err := p.l.Allow(p.t.Context(), p.key, p.lim)
	require.NoError(p.t, err)
	return res
}

// allowNAt sets the clock to at and calls AllowN for n, requiring no error.
func (p *pinnedLimiter) allowNAt(at time.Time, n int) ratelimit.Result {
	p.t.Helper()
	p.clk.Set(at)
	res, err := p.l.AllowN(p.t.Context(), p.key, p.lim, n)
	require.NoError(p.t, err)
	return res
}

// boundary returns the next multiple of period after the server's clock: a
// fixed window starts there.
func boundary(t *testing.T, c *redis.Client, period time.Duration) time.Time {
	t.Helper()
	us := serverNow(t, c).UnixMicro()
	p := period.Microseconds()
	return time.UnixMicro((us/p + 1) * p)
}

func TestLimitValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit ratelimit.Limit
		alg   ratelimit.Algorithm
		bad   string // substring of the error; "" for valid
	}{
		{"per second", ratelimit.PerSecond(10), ratelimit.GCRA, ""},
		{"per minute", ratelimit.PerMinute(1), ratelimit.SlidingWindow, ""},
		{"per hour", ratelimit.PerHour(3), ratelimit.FixedWindow, ""},
		{"zero", ratelimit.Limit{}, ratelimit.GCRA, "rate 0"},
		{"zero rate", ratelimit.PerSecond(0), ratelimit.FixedWindow, "rate 0"},
		{"negative rate", ratelimit.PerMinute(-5), ratelimit.SlidingWindow, "rate -5"},
		{"zero period", ratelimit.Limit{Rate: 1, Burst: 1}, ratelimit.GCRA, "period 0s"},
		{"negative period", ratelimit.Limit{Rate: 1, Burst: 1, Period: -time.Second}, ratelimit.FixedWindow, "period -1s"},
		{"sub-microsecond period", ratelimit.Limit{Rate: 1, Burst: 1, Period: 999}, ratelimit.SlidingWindow, "at least 1µs"},
		{"no burst for GCRA", ratelimit.Limit{Rate: 5, Period: time.Second}, ratelimit.GCRA, "burst 0"},
		{"no burst for windows", ratelimit.Limit{Rate: 5, Period: time.Second}, ratelimit.FixedWindow, ""},
		{"negative burst", ratelimit.Limit{Rate: 5, Burst: -1, Period: time.Second}, ratelimit.SlidingWindow, "burst -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.limit.Validate(tc.alg)
			if tc.bad == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, ratelimit.ErrInvalid)
			var ie *ratelimit.InvalidError
			require.ErrorAs(t, err, &ie)
			assert.Equal(t, "limit", ie.Field)
			assert.Contains(t, err.Error(), tc.bad)
		})
	}
}

func TestNewRejectsBadArguments(t *testing.T) {
	var typedNil *redis.Client
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer c.Close()
	for _, tc := range []struct {
		name   string
		client redis.Scripter
		alg    ratelimit.Algorithm
		opts   []ratelimit.Option
		field  string
	}{
		{"nil client", nil, ratelimit.GCRA, nil, "client"},
		{"typed nil client", typedNil, ratelimit.GCRA, nil, "client"},
		{"zero algorithm", c, 0, nil, "algorithm"},
		{"unknown algorithm", c, 42, nil, "algorithm"},
		{"prefix with a brace", c, ratelimit.GCRA, []ratelimit.Option{ratelimit.WithKeyPrefix("rl:{x}:")}, "key prefix"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := ratelimit.New(tc.client, tc.alg, tc.opts...)
			assert.Nil(t, l)
			var ie *ratelimit.InvalidError
			require.ErrorAs(t, err, &ie)
			assert.Equal(t, tc.field, ie.Field)
			assert.ErrorIs(t, err, ratelimit.ErrInvalid)
		})
	}
}

func TestBadCallArguments(t *testing.T) {
	c := newClient(t)
	ctx := t.Context()
	for _, alg := range algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			l := newLimiter(t, c, alg)
			key := redistest.Key(t)
			lim := ratelimit.PerMinute(5)
			for _, tc := range []struct {
				name  string
				call  func() (ratelimit.Result, error)
				field string
			}{
				{"empty key", func() (ratelimit.Result, error) { return l.Allow(ctx, "", lim) }, "key"},
				{"zero limit", func() (ratelimit.Result, error) { return l.Allow(ctx, key, ratelimit.Limit{}) }, "limit"},
				{"negative n", func() (ratelimit.Result, error) { return l.AllowN(ctx, key, lim, -1) }, "n"},
				{"negative n at most", func() (ratelimit.Result, error) { return l.AllowAtMost(ctx, key, lim, -1) }, "n"},
				{"n above the limit", func() (ratelimit.Result, error) { return l.AllowN(ctx, key, lim, 6) }, "n"},
			} {
				res, err := tc.call()
				var ie *ratelimit.InvalidError
				if assert.ErrorAs(t, err, &ie, tc.name) {
					assert.Equal(t, tc.field, ie.Field, tc.name)
				}
				assert.Equal(t, ratelimit.Result{}, res, tc.name)
			}
			assert.ErrorIs(t, l.Reset(ctx, ""), ratelimit.ErrInvalid)
			// Nothing was recorded by the refused calls.
			res, err := l.AllowN(ctx, key, lim, 0)
			require.NoError(t, err)
			assert.Equal(t, 5, res.Remaining)
			// AllowAtMost takes what fits of a request larger than the limit.
			res, err = l.AllowAtMost(ctx, key, lim, 6)
			require.NoError(t, err)
			assert.Equal(t, 5, res.Allowed)
		})
	}
}

// TestNoOverAdmission has 64 callers race for one key: exactly the limit is
// admitted, never more, whatever the interleaving. The period is a day, so
// nothing refills (GCRA, sliding) during the test; the fixed window would
// only see a second window if the test straddled midnight UTC.
func TestNoOverAdmission(t *testing.T) {
	const callers, calls, limit = 64, 3, 50
	c := newClient(t)
	lim := ratelimit.Limit{Rate: limit, Burst: limit, Period: 24 * time.Hour}
	for _, alg := range algorithms {
		for _, atMost := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/atMost=%v", alg, atMost), func(t *testing.T) {
				l := newLimiter(t, c, alg)
				key := redistest.Key(t)
				var allowed, refused atomic.Int64
				errs := make(chan error, callers*calls)
				start := make(chan struct{})
				var wg sync.WaitGroup
				for i := 0; i < callers; i++ {
					wg.Add(1)
					go func(i int) {
						defer wg.Done()
						<-start
						for j := 0; j < calls; j++ {
							var res ratelimit.Result
							var err error
							if atMost {
								res, err = l.AllowAtMost(context.Background(), key, lim, 1+(i+j)%3)
							} else {
								res, err = l.Allow(context.Background(), key, lim)
							}
							if err != nil {
								errs <- err
								return
							}
							allowed.Add(int64(res.Allowed))
							if res.Allowed == 0 {
								refused.Add(1)
								if res.RetryAfter <= 0 {
									errs <- fmt.Errorf("refused with RetryAfter %v", res.RetryAfter)
								}
							}
						}
					}(i)
				}
				close(start)
				wg.Wait()
				close(errs)
				for err := range errs {
					t.Error(err)
				}
				assert.EqualValues(t, limit, allowed.Load(), "admitted")
				assert.Positive(t, refused.Load())
				res, err := l.AllowN(t.Context(), key, lim, 0)
				require.NoError(t, err)
				assert.Equal(t, 0, res.Remaining)
			})
		}
	}
}

// TestFixedWindowBoundary: the window resets exactly at the boundary, and a
// client can get twice the limit through in 2ms around it.
func TestFixedWindowBoundary(t *testing.T) {
	p := newPinned(t, ratelimit.FixedWindow, ratelimit.PerMinute(10))
	b := boundary(t, p.c, time.Minute)
	t0 := b.Add(-time.Millisecond)

	assert.Equal(t, ratelimit.Result{Allowed: 10, Remaining: 0, ResetAfter: time.Millisecond}, p.allowNAt(t0, 10))
	assert.Equal(t, ratelimit.Result{Allowed: 0, Remaining: 0, RetryAfter: time.Millisecond, ResetAfter: time.Millisecond}, p.allowAt(t0))

	res := p.allowAt(b.Add(-time.Microsecond))
	assert.Equal(t, 0, res.Allowed, "1µs before the boundary")
	assert.Equal(t, time.Microsecond, res.RetryAfter)

	assert.Equal(t, ratelimit.Result{Allowed: 10, Remaining: 0, ResetAfter: time.Minute}, p.allowNAt(b, 10), "at the boundary: a new window")
}

// TestSlidingWindowNoBoundaryBurst: the burst that the fixed window lets
// through around a boundary is refused; requests are admitted again exactly
// one period after the ones they replace.
func TestSlidingWindowNoBoundaryBurst(t *testing.T) {
	p := newPinned(t, ratelimit.SlidingWindow, ratelimit.PerMinute(10))
	b := boundary(t, p.c, time.Minute)
	t0 := b.Add(-time.Millisecond)

	assert.Equal(t, ratelimit.Result{Allowed: 10, Remaining: 0, ResetAfter: time.Minute}, p.allowNAt(t0, 10))

	res := p.allowAt(b.Add(time.Millisecond))
	assert.Equal(t, 0, res.Allowed, "just after the fixed boundary: still 10 in the last minute")
	assert.Equal(t, time.Minute-2*time.Millisecond, res.RetryAfter)

	res = p.allowAt(t0.Add(time.Minute - time.Microsecond))
	assert.Equal(t, 0, res.Allowed, "1µs before the first requests leave the window")
	assert.Equal(t, time.Microsecond, res.RetryAfter)

	assert.Equal(t, ratelimit.Result{Allowed: 10, Remaining: 0, ResetAfter: time.Minute}, p.allowNAt(t0.Add(time.Minute), 10), "a period later: all 10 back")
}

// TestSlidingWindowRetryAfterCountsOut: a refused AllowN must wait until
// enough of the oldest requests have left the window for all n to fit.
func TestSlidingWindowRetryAfterCountsOut(t *testing.T) {
	p := newPinned(t, ratelimit.SlidingWindow, ratelimit.Limit{Rate: 10, Period: 10 * time.Second})
	t0 := serverNow(t, p.c)
	for i := 0; i < 7; i++ { // one request a second
		require.Equal(t, 1, p.allowAt(t0.Add(time.Duration(i)*time.Second)).Allowed)
	}
	// 7 in the window, 5 more need 2 to leave
	assert.Equal(t, ratelimit.Result{Allowed: 0, Remaining: 3, RetryAfter: 4 * time.Second, ResetAfter: 9 * time.Second}, p.allowNAt(t0.Add(7*time.Second), 5))
	// requests at t0 and t0+1s have left
	assert.Equal(t, ratelimit.Result{Allowed: 5, Remaining: 0, ResetAfter: 10 * time.Second}, p.allowNAt(t0.Add(11*time.Second), 5))
	// full again: AllowAtMost waits only for the oldest (t0+2s) to leave
	res, err := p.l.AllowAtMost(t.Context(), p.key, p.lim, 5)
	require.NoError(t, err)
	assert.Equal(t, ratelimit.Result{Allowed: 0, Remaining: 0, RetryAfter: time.Second, ResetAfter: 10 * time.Second}, res)
}

// TestGCRASpacing: after a burst, one request is admitted every
// Period/Rate, to the microsecond, also when that interval is not a whole
// number of microseconds.
func TestGCRASpacing(t *testing.T) {
	p := newPinned(t, ratelimit.GCRA, ratelimit.PerSecond(3)) // 333333.33µs apart
	t0 := serverNow(t, p.c).Truncate(time.Second)
	for i := 0; i < 3; i++ {
		res := p.allowAt(t0)
		require.Equal(t, 1, res.Allowed, "burst request %d", i)
		assert.Equal(t, 2-i, res.Remaining)
	}
	assert.Equal(t, ratelimit.Result{Allowed: 0, Remaining: 0, RetryAfter: 333334 * time.Microsecond, ResetAfter: time.Second}, p.allowAt(t0))

	res := p.allowAt(t0.Add(333333 * time.Microsecond))
	assert.Equal(t, 0, res.Allowed, "a fraction of a µs early")
	assert.Equal(t, time.Microsecond, res.RetryAfter)

	res = p.allowAt(t0.Add(333334 * time.Microsecond))
	assert.Equal(t, 1, res.Allowed, "one interval later")
	assert.Equal(t, 0, res.Remaining)

	// A full period of quiet refills the whole burst.
	assert.Equal(t, ratelimit.Result{Allowed: 3, Remaining: 0, ResetAfter: time.Second}, p.allowNAt(t0.Add(2*time.Second), 3))
}

// TestGCRALargeBurstExact: a burst of 1000 single requests at one instant
// is admitted whole (rounding must not lose the last one), the 1001st not.
func TestGCRALargeBurstExact(t *testing.T) {
	p := newPinned(t, ratelimit.GCRA, ratelimit.Limit{Rate: 1000, Burst: 1000, Period: 7 * time.Second})
	t0 := serverNow(t, p.c)
	for i := 0; i < 1000; i++ {
		res := p.allowAt(t0)
		require.Equal(t, 1, res.Allowed, "request %d", i)
		require.Equal(t, 999-i, res.Remaining, "request %d", i)
	}
	assert.Equal(t, ratelimit.Result{Allowed: 0, Remaining: 0, RetryAfter: 7 * time.Millisecond, ResetAfter: 7 * time.Second}, p.allowAt(t0))
}

// TestGCRAFractionalIntervalExact: with an interval of 1000.0625µs
// (16001µs / 16), a burst of 1000 at one instant moves the TAT by exactly
// 1000062.5µs, so the 1001st request waits 1001µs. A TAT rounded to 1/4µs
// (one double of µs since 1970) or to whole µs would drift by up to 62.5µs
// over the burst.
func TestGCRAFractionalIntervalExact(t *testing.T) {
	p := newPinned(t, ratelimit.GCRA, ratelimit.Limit{Rate: 16, Burst: 1000, Period: 16001 * time.Microsecond})
	t0 := serverNow(t, p.c)
	for i := 0; i < 1000; i++ {
		require.Equal(t, 1, p.allowAt(t0).Allowed, "request %d", i)
	}
	assert.Equal(t, ratelimit.Result{Allowed: 0, Remaining: 0, RetryAfter: 1001 * time.Microsecond, ResetAfter: 1000063 * time.Microsecond}, p.allowAt(t0))
}

// TestAllowNAllOrNothing: AllowN with n above what remains admits nothing
// and records nothing; AllowAtMost takes what fits.
func TestAllowNAllOrNothing(t *testing.T) {
	c := newClient(t)
	ctx := t.Context()
	lim := ratelimit.Limit{Rate: 10, Burst: 10, Period: 10 * time.Second}
	for _, tc := range []struct {
		alg                   ratelimit.Algorithm
		offset                time.Duration // of t0 from a 10s boundary
		retryN, retry1, reset time.Duration // expected RetryAfter for 5, for 1 when full; ResetAfter when full
	}{
		// GCRA: one request per second; 7 taken leave 3, 5 need 2 more seconds.
		{ratelimit.GCRA, 0, 2 * time.Second, time.Second, 10 * time.Second},
		// Fixed: 4s into a window; everything waits for the window's end.
		{ratelimit.FixedWindow, 4 * time.Second, 6 * time.Second, 6 * time.Second, 6 * time.Second},
		// Sliding: all 7 at t0, so 5 more wait until they leave.
		{ratelimit.SlidingWindow, 4 * time.Second, 10 * time.Second, 10 * time.Second, 10 * time.Second},
	} {
		t.Run(tc.alg.String(), func(t *testing.T) {
			l := newLimiter(t, c, tc.alg)
			key := redistest.Key(t)
			t0 := boundary(t, c, 10*time.Second).Add(tc.offset)
			pinned(t, l, t0)

			res, err := l.AllowN(ctx, key, lim, 7)
			require.NoError(t, err)
			assert.Equal(t, 7, res.Allowed)
			assert.Equal(t, 3, res.Remaining)

			res, err = l.AllowN(ctx, key, lim, 5)
			require.NoError(t, err)
			assert.Equal(t, 0, res.Allowed)
			assert.Equal(t, 3, res.Remaining, "refused: nothing recorded")
			assert.Equal(t, tc.retryN, res.RetryAfter)

			res, err = l.AllowAtMost(ctx, key, lim, 5)
			require.NoError(t, err)
			assert.Equal(t, ratelimit.Result{Allowed: 3, Remaining: 0, ResetAfter: tc.reset}, res)

			res, err = l.AllowAtMost(ctx, key, lim, 5)
			require.NoError(t, err)
			assert.Equal(t, ratelimit.Result{Allowed: 0, Remaining: 0, RetryAfter: tc.retry1, ResetAfter: tc.reset}, res)
		})
	}
}

// TestRetryAfterOnServerClock uses the real server clock and long periods:
// RetryAfter is what the rate says, less only the time the test took.
func TestRetryAfterOnServerClock(t *testing.T) {
	c := newClient(t)
	ctx := t.Context()
	lim := ratelimit.PerHour(10) // GCRA: one every 6 minutes
	for _, tc := range []struct {
		alg  ratelimit.Algorithm
		want func(start time.Time) time.Duration // RetryAfter when refused right after start
	}{
		{ratelimit.GCRA, func(time.Time) time.Duration { return 6 * time.Minute }},
		{ratelimit.SlidingWindow, func(time.Time) time.Duration { return time.Hour }},
		{ratelimit.FixedWindow, func(start time.Time) time.Duration { return start.Truncate(time.Hour).Add(time.Hour).Sub(start) }},
	} {
		t.Run(tc.alg.String(), func(t *testing.T) {
			l := newLimiter(t, c, tc.alg)
			key := redistest.Key(t)
			start := serverNow(t, c)
			res, err := l.AllowN(ctx, key, lim, 10)
			require.NoError(t, err)
			require.Equal(t, 10, res.Allowed)
			res, err = l.Allow(ctx, key, lim)
			require.NoError(t, err)
			elapsed := serverNow(t, c).Sub(start)
			require.Equal(t, 0, res.Allowed)
			want := tc.want(start)
			assert.LessOrEqual(t, res.RetryAfter, want)
			assert.Greater(t, res.RetryAfter, want-elapsed-time.Millisecond, "elapsed %v", elapsed)
			assert.Greater(t, res.ResetAfter, time.Duration(0))
		})
	}
}

func TestPeekAndReset(t *testing.T) {
	c := newClient(t)
	ctx := t.Context()
	lim := ratelimit.PerMinute(4)
	for _, alg := range algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			l := newLimiter(t, c, alg)
			key := redistest.Key(t)
			res, err := l.AllowN(ctx, key, lim, 0)
			require.NoError(t, err)
			assert.Equal(t, ratelimit.Result{Remaining: 4}, res, "fresh key")

			_, err = l.AllowN(ctx, key, lim, 3)
			require.NoError(t, err)
			for i := 0; i < 2; i++ {
				res, err = l.AllowN(ctx, key, lim, 0)
				require.NoError(t, err)
				assert.Equal(t, 0, res.Allowed)
				assert.Equal(t, 1, res.Remaining, "peeking consumes nothing")
				assert.Zero(t, res.RetryAfter)
				assert.Positive(t, res.ResetAfter)
			}
			require.NoError(t, l.Reset(ctx, key))
			n, err := c.Exists(ctx, ratelimit.Keys(l, key)...).Result()
			require.NoError(t, err)
			assert.Zero(t, n, "no keys left")
			res, err = l.AllowN(ctx, key, lim, 4)
			require.NoError(t, err)
			assert.Equal(t, 4, res.Allowed, "reset restores the limit")
		})
	}
}

func TestKeyNames(t *testing.T) {
	c := newClient(t)
	ctx := t.Context()
	gcra := newLimiter(t, c, ratelimit.GCRA)
	custom, err := ratelimit.New(c, ratelimit.SlidingWindow, ratelimit.WithKeyPrefix("rl:"))
	require.NoError(t, err)
	fixed := newLimiter(t, c, ratelimit.FixedWindow)
	for _, tc := range []struct {
		l    *ratelimit.Limiter
		key  string
		want []string
	}{
		{gcra, "user:1", []string{"ratelimit:{user:1}:tat"}},
		{gcra, "{tenant}:user:1", []string{"ratelimit:{tenant}:user:1:tat"}},
		{gcra, "}odd", []string{"ratelimit:{~}odd}:tat"}},
		{fixed, "ip:10.0.0.1", []string{"ratelimit:{ip:10.0.0.1}:fw"}},
		{custom, "user:1", []string{"rl:{user:1}:sw", "rl:{user:1}:sw:seq"}},
	} {
		_, err := tc.l.Allow(ctx, tc.key, ratelimit.PerMinute(5))
		require.NoError(t, err)
		assert.Equal(t, tc.want, ratelimit.Keys(tc.l, tc.key))
		for _, k := range tc.want {
			ttl, err := c.PTTL(ctx, k).Result()
			require.NoError(t, err)
			assert.Positive(t, ttl, "key %s exists with a TTL", k)
			assert.LessOrEqual(t, ttl, time.Minute, "key %s", k)
		}
	}
}

// TestCluster runs every algorithm through a Redis Cluster client: the keys
// of one limiter key share a hash slot, so the scripts are accepted.
func TestCluster(t *testing.T) {
	cc := redistest.Cluster(t, 3)
	ctx := t.Context()
	for _, alg := range algorithms {
		l := newLimiter(t, cc, alg)
		for i := 0; i < 20; i++ { // keys land on every primary
			key := fmt.Sprintf("%s-%d", redistest.Key(t), i)
			res, err := l.AllowN(ctx, key, ratelimit.PerMinute(2), 2)
			require.NoError(t, err, "%v", alg)
			assert.Equal(t, 2, res.Allowed)
			res, err = l.Allow(ctx, key, ratelimit.PerMinute(2))
			require.NoError(t, err, "%v", alg)
			assert.Equal(t, 0, res.Allowed)
			require.NoError(t, l.Reset(ctx, key))
		}
	}
}

func TestRedisErrorsAreWrapped(t *testing.T) {
	c := newClient(t)
	l := newLimiter(t, c, ratelimit.GCRA)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := l.Allow(ctx, "k", ratelimit.PerSecond(1))
	require.Error(t, err)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Contains(t, err.Error(), `ratelimit: gcra "k"`)
	assert.False(t, errors.Is(err, ratelimit.ErrInvalid))
}
