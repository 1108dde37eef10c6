package ratelimit_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/ratelimit"
)

// gates holds a client's lone scripts (EVALSHA sent alone) at gate and its
// pipelines of scripts at pipeGate, and records the size of each.
type gates struct {
	entered, pipeEntered chan struct{}
	gate, pipeGate       chan struct{}

	mu    sync.Mutex
	sizes []int
}

func newGates() *gates {
	return &gates{entered: make(chan struct{}, 16), pipeEntered: make(chan struct{}, 16),
		gate: make(chan struct{}), pipeGate: make(chan struct{})}
}

func (g *gates) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *gates) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "evalsha" {
			signal(g.entered)
			<-g.gate
		}
		return next(ctx, cmd)
	}
}

func (g *gates) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if cmds[0].Name() != "evalsha" { // a new connection's handshake
			return next(ctx, cmds)
		}
		g.mu.Lock()
		g.sizes = append(g.sizes, len(cmds))
		g.mu.Unlock()
		signal(g.pipeEntered)
		<-g.pipeGate
		return next(ctx, cmds)
	}
}

// signal signals on ch if there is room: a test waits only for the first few.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// wait waits for a signal on ch, bounded.
func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// gated is a GCRA limiter over a client whose scripts g holds, with
// MaxBatches calls already held at g.gate (the batches a Limiter has in
// flight at most), so that the next calls queue.
type gated struct {
	t    *testing.T
	g    *gates
	c    *redis.Client
	l    *ratelimit.Limiter
	lim  ratelimit.Limit
	base string
	held sync.WaitGroup
}

func newGated(t *testing.T) *gated {
	t.Helper()
	g := newGates()
	c := newClient(t)
	c.AddHook(g)
	x := &gated{t: t, g: g, c: c, l: newLimiter(t, c, ratelimit.GCRA), base: redistest.Key(t),
		lim: ratelimit.Limit{Rate: 100, Burst: 100, Period: 24 * time.Hour}}
	for i := range ratelimit.MaxBatches {
		x.held.Add(1)
		go func() {
			defer x.held.Done()
			res, err := x.l.Allow(context.Background(), x.key(100+i), x.lim)
			assert.NoError(t, err)
			assert.Equal(t, 1, res.Allowed)
		}()
		wait(t, g.entered, "a held call")
	}
	return x
}

func (x *gated) key(i int) string { return fmt.Sprintf("%s:%d", x.base, i) }

// queue starts AllowN(ctx, key(i), i+1) and waits until it is queued as the
// n-th; its outcome comes on the returned channel.
func (x *gated) queue(ctx context.Context, i, n int) <-chan outcome {
	ch := make(chan outcome, 1)
	go func() {
		res, err := x.l.AllowN(ctx, x.key(i), x.lim, i+1)
		ch <- outcome{res, err}
	}()
	require.Eventually(x.t, func() bool { return ratelimit.Queued(x.l) == n }, 10*time.Second, time.Millisecond)
	return ch
}

type outcome struct {
	res ratelimit.Result
	err error
}

func (x *gated) result(ch <-chan outcome) outcome {
	x.t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(10 * time.Second):
		x.t.Fatal("timed out waiting for a call")
		return outcome{}
	}
}

// remaining peeks at key(i): what is left of the burst.
func (x *gated) remaining(i int) int {
	x.t.Helper()
	res, err := x.l.AllowN(context.Background(), x.key(i), x.lim, 0)
	require.NoError(x.t, err)
	return res.Remaining
}

// TestConcurrentCallsShareOnePipeline: while MaxBatches calls are on their
// way, the next ten queue and then go as one pipeline of ten scripts; each
// caller gets its own script's reply (each asked for a different n on its
// own key).
// The server forgot the script meanwhile (SCRIPT FLUSH): each goes again
// as EVAL.
func TestConcurrentCallsShareOnePipeline(t *testing.T) {
	x := newGated(t)
	var chs []<-chan outcome
	for i := range 10 {
		chs = append(chs, x.queue(context.Background(), i, i+1))
	}
	close(x.g.gate)
	wait(t, x.g.pipeEntered, "the batch of the queued calls")
	require.NoError(t, x.c.ScriptFlush(t.Context()).Err())
	close(x.g.pipeGate)
	for i, ch := range chs {
		o := x.result(ch)
		require.NoError(t, o.err)
		assert.Equal(t, i+1, o.res.Allowed, "call %d", i)
		assert.Equal(t, 100-(i+1), o.res.Remaining, "call %d", i)
	}
	x.held.Wait()
	x.g.mu.Lock()
	assert.Equal(t, []int{10}, x.g.sizes, "pipelines sent")
	x.g.mu.Unlock()
}

// TestQueuedCallLeavesWhenItsContextEnds: a queued call whose context ends
// returns at once with the context's error, and its script never runs; the
// call queued behind it still goes.
func TestQueuedCallLeavesWhenItsContextEnds(t *testing.T) {
	x := newGated(t)
	ctx, cancel := context.WithCancel(context.Background())
	a := x.queue(ctx, 0, 1)
	b := x.queue(context.Background(), 1, 2)
	cancel()
	o := x.result(a) // while the held calls still wait at the gate
	require.ErrorIs(t, o.err, context.Canceled)
	assert.Contains(t, o.err.Error(), `ratelimit: gcra "`)
	assert.Equal(t, 1, ratelimit.Queued(x.l))
	close(x.g.pipeGate)
	close(x.g.gate)
	o = x.result(b)
	require.NoError(t, o.err)
	assert.Equal(t, 2, o.res.Allowed)
	x.held.Wait()
	assert.Equal(t, 100, x.remaining(0), "the call that left never ran")
}

// TestBatchedCallReturnsWhenItsContextEnds: a call whose batch is on its
// way returns when its context ends, without waiting for the batch; the
// batch's sender still gets its reply. The script of the call that left
// ran: a call cut short may have been counted, as with any client.
func TestBatchedCallReturnsWhenItsContextEnds(t *testing.T) {
	x := newGated(t)
	ctx, cancel := context.WithCancel(context.Background())
	a := x.queue(context.Background(), 0, 1) // sends the batch
	b := x.queue(ctx, 1, 2)
	close(x.g.gate)
	wait(t, x.g.pipeEntered, "the batch of the queued calls")
	cancel()
	o := x.result(b) // while the batch is still held
	require.ErrorIs(t, o.err, context.Canceled)
	close(x.g.pipeGate)
	o = x.result(a)
	require.NoError(t, o.err)
	assert.Equal(t, 1, o.res.Allowed)
	x.held.Wait()
	assert.Equal(t, 98, x.remaining(1), "the batch ran the script of the call that left")
}

// TestCallsCutShortStrandNoOne: 64 callers whose contexts end at random
// moments (before the call, while it is queued, while its batch is on its
// way) all return, and the limiter still serves callers after them: no
// batch is left unsent and no slot stays taken. Cut-short calls may have
// been counted, so only an upper bound holds for what they admitted.
func TestCallsCutShortStrandNoOne(t *testing.T) {
	const callers, calls = 64, 30
	c := newClient(t)
	l := newLimiter(t, c, ratelimit.GCRA)
	key := redistest.Key(t)
	lim := ratelimit.Limit{Rate: 1000, Burst: callers * calls, Period: 24 * time.Hour}
	var wg sync.WaitGroup
	var admitted atomic.Int64
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range calls {
				ctx, cancel := context.WithCancel(context.Background())
				switch (i + j) % 3 {
				case 0:
					cancel()
				case 1:
					go cancel()
				}
				res, err := l.Allow(ctx, key, lim)
				cancel()
				if err != nil {
					assert.ErrorIs(t, err, context.Canceled)
					continue
				}
				admitted.Add(int64(res.Allowed))
			}
		}()
	}
	waitAll(t, &wg, "every caller")
	// Every slot is free again: as many concurrent calls as there are
	// slots, and more, complete, and each is admitted.
	var after sync.WaitGroup
	for range 8 {
		after.Add(1)
		go func() {
			defer after.Done()
			res, err := l.Allow(context.Background(), key, lim)
			if assert.NoError(t, err) {
				assert.Equal(t, 1, res.Allowed)
			}
		}()
	}
	waitAll(t, &after, "the calls after")
	res, err := l.AllowN(t.Context(), key, lim, 0)
	require.NoError(t, err)
	used := callers*calls - res.Remaining
	assert.GreaterOrEqual(t, int64(used), admitted.Load()+8, "every admission seen is counted")
}

// waitAll waits for wg, bounded.
func waitAll(t *testing.T, wg *sync.WaitGroup, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	wait(t, done, what)
}

// scripterOnly hides a client's Pipeline: a Scripter that cannot pipeline.
type scripterOnly struct{ redis.Scripter }

// TestScripterWithoutPipeline: over a client that cannot send a pipeline,
// every call goes alone, and 64 concurrent callers are admitted exactly up
// to the limit.
func TestScripterWithoutPipeline(t *testing.T) {
	g := newGates()
	close(g.gate)
	c := newClient(t)
	c.AddHook(g)
	l := newLimiter(t, scripterOnly{c}, ratelimit.GCRA)
	key := redistest.Key(t)
	lim := ratelimit.Limit{Rate: 10, Burst: 50, Period: 24 * time.Hour}
	var wg sync.WaitGroup
	var admitted atomic.Int64
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := l.Allow(context.Background(), key, lim)
			assert.NoError(t, err)
			admitted.Add(int64(res.Allowed))
		}()
	}
	waitAll(t, &wg, "every caller")
	assert.EqualValues(t, 50, admitted.Load())
	g.mu.Lock()
	assert.Empty(t, g.sizes, "no pipeline")
	g.mu.Unlock()
}
