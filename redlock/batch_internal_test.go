package redlock

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
)

// gate is a go-redis hook that holds every command and pipeline until opened,
// and records what reaches the node: every command once, and the size of
// every pipeline.
type gate struct {
	open    chan struct{}
	once    sync.Once
	mu      sync.Mutex
	held    int                  // commands and pipelines that reached the gate
	sent    map[redis.Cmder]bool // every command sent, alone or in a pipeline
	batches [][]string           // the pipelines sent: each command's name (evalsha:<sha> for scripts)
}

func newGate(t *testing.T) *gate {
	g := &gate{open: make(chan struct{}), sent: map[redis.Cmder]bool{}}
	t.Cleanup(g.release) // before the engine's Wait, also when the test fails
	return g
}

func (g *gate) release() { g.once.Do(func() { close(g.open) }) }

func (g *gate) pass(cmds []redis.Cmder, pipeline bool) {
	g.mu.Lock()
	g.held++
	for _, c := range cmds {
		g.sent[c] = true
	}
	if pipeline {
		var names []string
		for _, c := range cmds {
			a := c.Args()
			name := fmt.Sprint(a[0])
			if name == "evalsha" {
				name += ":" + fmt.Sprint(a[1])
			}
			names = append(names, name)
		}
		g.batches = append(g.batches, names)
	}
	g.mu.Unlock()
	<-g.open
}

func (g *gate) waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held
}

// sentArgs returns the arguments of every command sent, as strings.
func (g *gate) sentArgs() [][]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out [][]string
	for c := range g.sent {
		var a []string
		for _, v := range c.Args() {
			a = append(a, fmt.Sprint(v))
		}
		out = append(out, a)
	}
	return out
}

func (g *gate) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (g *gate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		g.pass([]redis.Cmder{cmd}, false)
		return next(ctx, cmd)
	}
}

func (g *gate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		g.pass(cmds, true)
		return next(ctx, cmds)
	}
}

// occupy takes the senders of every node of e with locks on keys of their
// own, held at the gates, and returns a func that waits for those locks
// and releases them.
func occupy(t *testing.T, ctx context.Context, e *Client, gates []*gate, key string) (join func()) {
	var wg sync.WaitGroup
	for i := 0; i < e.nodes[0].batch.max; i++ {
		m, err := e.NewMutex(fmt.Sprintf("%s:busy%d", key, i))
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := m.TryLock(ctx)
			if assert.NoError(t, err) {
				assert.NoError(t, l.Release(ctx))
			}
		}()
		for j, g := range gates {
			require.Eventually(t, func() bool { return g.waiting() == i+1 }, 10*time.Second, time.Millisecond, "node %d", j)
		}
	}
	return wg.Wait
}

// gatedConfig has a TTL and node timeout long enough that only the gates
// hold commands back.
func gatedConfig() []Option {
	return []Option{WithTTL(20 * time.Second), WithNodeTimeout(5 * time.Second)}
}

func queued(b *batcher) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

// Commands that queue while the node's senders are busy go out together as
// one pipeline, and every round gets its own reply: each of the concurrent
// lock calls on distinct keys holds its key, with its own value, on every
// node.
func TestBatcherCoalescesAndRoutesReplies(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e, clients := testEngine(t, "redlock", 3, gatedConfig()...)
	gates := make([]*gate, len(clients)) // after NewEngine: its probe passes freely
	for i, c := range clients {
		gates[i] = newGate(t)
		c.AddHook(gates[i])
	}

	join := occupy(t, ctx, e, gates, redistest.Key(t))
	const n = 40
	type result struct {
		l   *Lease
		err error
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		m, err := e.NewMutex(fmt.Sprintf("%s:%d", redistest.Key(t), i))
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := m.TryLock(ctx)
			results[i] = result{l, err}
		}()
	}
	// Every node: its senders are held at the gate; the n commands queue.
	for i := range clients {
		b := e.nodes[i].batch
		require.Eventually(t, func() bool { return queued(b) == n }, 10*time.Second, time.Millisecond, "node %d", i)
	}
	for _, g := range gates {
		g.release()
	}
	wg.Wait()
	join()
	e.waitIdle() // the commands still on their way after each round's quorum
	for i, g := range gates {
		g.mu.Lock()
		assert.True(t, slices.ContainsFunc(g.batches, func(b []string) bool { return len(b) == n }),
			"node %d: the queued commands went out as one pipeline", i)
		g.mu.Unlock()
	}
	for i, r := range results {
		require.NoError(t, r.err, "lock %d", i)
		for j, c := range clients {
			v, err := c.Get(ctx, r.l.Key()).Result()
			require.NoError(t, err)
			assert.Equal(t, r.l.Value(), v, "lock %d node %d", i, j)
		}
	}
	for _, r := range results {
		require.NoError(t, r.l.Release(ctx))
	}
}

// A command whose round gave up while it queued is never sent: the round
// counts it as timed out, and the node never sees the key.
func TestBatcherDropsExpiredCommands(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e, clients := testEngine(t, "single", 1, gatedConfig()...)
	g := newGate(t) // after NewEngine: its probe passes freely
	clients[0].AddHook(g)
	key := redistest.Key(t)

	join := occupy(t, ctx, e, []*gate{g}, key)
	m, err := e.NewMutex(key)
	require.NoError(t, err)
	short, cancelShort := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := m.TryLock(short)
		done <- err
	}()
	require.Eventually(t, func() bool { return queued(e.nodes[0].batch) == 1 }, 10*time.Second, time.Millisecond)
	cancelShort()
	g.release()
	err = <-done
	require.ErrorIs(t, err, ErrNotAcquired)
	require.ErrorIs(t, err, context.Canceled)
	join()
	for _, a := range g.sentArgs() {
		assert.False(t, a[0] == "set" && a[1] == key, "the abandoned SET was sent: %v", a)
	}
}

// A node that forgot the scripts (restart, SCRIPT FLUSH) still runs them:
// the EVALSHA that fails with NOSCRIPT is re-sent as EVAL, for commands sent
// alone and in a pipeline.
func TestBatcherReloadsScripts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e, clients := testEngine(t, "redlock", 3, WithTTL(20*time.Second),
		WithQuarantine(time.Minute), // the acquire is a script
		// 16 workers' first requests dial and load scripts at once: the default
		// 100ms per node is too short for that on a loaded 2-core machine.
		WithNodeTimeout(time.Second))
	require.NoError(t, e.Vouch(ctx))
	for _, workers := range []int{1, 16} {
		for _, c := range clients {
			require.NoError(t, c.ScriptFlush(ctx).Err())
		}
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := 0; w < workers; w++ {
			m, err := e.NewMutex(fmt.Sprintf("%s:%d:%d", redistest.Key(t), workers, w))
			require.NoError(t, err)
			wg.Add(1)
			go func() {
				defer wg.Done()
				l, err := m.TryLock(ctx)
				if err == nil {
					err = l.Release(ctx)
				}
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
	}
}
