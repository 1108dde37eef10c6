package locktest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
)

func cancelledContext(t *testing.T, env Env) {
	clients := setupNodes(t, env)
	key := redistest.Key(t)
	m := env.NewMutex(t, clients, key, Setup{TTL: longTTL})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := m.TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	assert.ErrorIs(t, err, context.Canceled)
	_, err = m.Lock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, env.Nodes, count(holders(t, clients, key), ""))
}

func lockWaits(t *testing.T, env Env) {
	ctx, clients, key := fresh(t, env)
	a := take(ctx, t, env.NewMutex(t, clients, key, Setup{TTL: longTTL}))
	mb := env.NewMutex(t, clients, key, Setup{TTL: longTTL})
	type result struct {
		l   *redlock.Lease
		err error
	}
	got := make(chan result, 1)
	started := make(chan struct{})
	go func() {
		close(started)
		l, err := mb.Lock(ctx)
		got <- result{l, err}
	}()
	<-started
	require.NoError(t, a.Release(ctx))
	r := <-got
	require.NoError(t, r.err)
	assert.GreaterOrEqual(t, count(holders(t, clients, key), r.l.Value()), majority(env.Nodes), "B holds the lock after A released")
	require.NoError(t, r.l.Release(ctx))
}

// A Lock that runs out of time while another holds the key fails with the
// deadline and leaves the holder's keys as they were. TryLock returns at a
// majority, and a straggling SET may still land (or time out) meanwhile, so
// the check is that every node that held A before still does, none holds
// anything else, and A keeps a majority.
func lockDeadline(t *testing.T, env Env) {
	ctx, clients, key := fresh(t, env)
	a := take(ctx, t, env.NewMutex(t, clients, key, Setup{TTL: longTTL}))
	before := holders(t, clients, key)
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err := env.NewMutex(t, clients, key, Setup{TTL: longTTL}).Lock(short)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	var qe *redlock.QuorumError
	assert.ErrorAs(t, err, &qe, "the last attempt's node replies are kept")
	after := holders(t, clients, key)
	for i := range after {
		if before[i] == a.Value() {
			assert.Equal(t, a.Value(), after[i], "node %d held A before B's attempt", i)
		} else {
			assert.Contains(t, []string{"", a.Value()}, after[i], "node %d holds only A or nothing", i)
		}
	}
	assert.GreaterOrEqual(t, count(after, a.Value()), majority(env.Nodes), "A keeps a majority")
	require.NoError(t, a.Release(ctx))
}

// Several workers contend for one key. Under the lock each does a
// read-modify-write of a counter that is not atomic on its own (GET, then
// SET+1), and records the interval in which it believed it held the lock
// (acquire returned -> release called). No two intervals may overlap, no
// increment may be lost, and every worker must get the lock.
func contention(t *testing.T, env Env) {
	ctx, clients, key := fresh(t, env)
	counter := key + ":counter"
	const workers, rounds = 4, 8
	type span struct {
		worker     int
		start, end time.Time
	}
	var mu sync.Mutex
	var spans []span
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	work := func() error {
		v, err := clients[0].Get(ctx, counter).Int()
		if err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		return clients[0].Set(ctx, counter, v+1, 0).Err()
	}
	for w := 0; w < workers; w++ {
		m := env.NewMutex(t, clients, key, Setup{TTL: longTTL})
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				l, err := m.Lock(ctx)
				if err != nil {
					errs <- fmt.Errorf("worker %d: %w", w, err)
					return
				}
				s := span{worker: w, start: time.Now()}
				err = work()
				s.end = time.Now()
				if err == nil {
					err = l.Release(ctx)
				}
				if err != nil {
					errs <- fmt.Errorf("worker %d: %w", w, err)
					return
				}
				mu.Lock()
				spans = append(spans, s)
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Len(t, spans, workers*rounds)
	total, err := clients[0].Get(ctx, counter).Int()
	require.NoError(t, err)
	assert.Equal(t, workers*rounds, total, "no increment was lost")
	perWorker := map[int]int{}
	for i := range spans {
		perWorker[spans[i].worker]++
		for j := i + 1; j < len(spans); j++ {
			a, b := spans[i], spans[j]
			overlap := a.start.Before(b.end) && b.start.Before(a.end)
			assert.False(t, overlap, "workers %d and %d held the lock at once", a.worker, b.worker)
		}
	}
	assert.Len(t, perWorker, workers)
}

func releaseRacingExtend(t *testing.T, env Env) {
	ctx, clients, key := fresh(t, env)
	l := take(ctx, t, env.NewMutex(t, clients, key, Setup{TTL: longTTL}))
	var wg sync.WaitGroup
	extendErrs := make([]error, 8)
	for i := range extendErrs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			extendErrs[i] = l.Extend(ctx)
		}(i)
	}
	relErr := l.Release(ctx)
	wg.Wait()
	require.NoError(t, relErr)
	for _, err := range extendErrs {
		if err != nil {
			assert.ErrorIs(t, err, redlock.ErrReleased)
		}
	}
	landedEverywhere(t, clients, key, "", "no extend outlived the release")
	assert.ErrorIs(t, l.Err(), redlock.ErrReleased)
}
