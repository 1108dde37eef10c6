package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/internal/redisnode"
	"github.com/redfence/redfence/redlock"
)

// Keys the demo uses on its own fresh nodes.
const (
	demoLockKey    = "redfence:demo:lock"
	demoCounterKey = "redfence:demo:counter" // on node 0 only
)

// Timeouts of the demo's Redis clients and bounded operations.
const (
	clientTimeout   = 500 * time.Millisecond // dial, read and write
	opTimeout       = time.Second            // counter update, Release, final read
	otherErrorPause = 10 * time.Millisecond  // pause after an unexpected Lock error
)

// demoRetry is the demo's Lock retry policy: short jittered waits, so that
// workers waiting for a 5ms critical section notice the release soon.
func demoRetry() backoff.BackOff {
	return backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(2*time.Millisecond),
		backoff.WithRandomizationFactor(0.5),
		backoff.WithMultiplier(1.5),
		backoff.WithMaxInterval(20*time.Millisecond),
		backoff.WithMaxElapsedTime(0), // the Lock context bounds the attempts
	)
}

// demo is one run in progress. Its methods take the run's two contexts:
// root, runDemo's ctx, cancelled on interrupt; and run, which ends after
// cfg.duration or on interrupt.
type demo struct {
	cfg     demoConfig
	t0      time.Time // start of the run, with a monotonic reading
	mutex   *redlock.Mutex
	counter redis.UniversalClient // node 0
}

// runDemo starts the nodes, runs the workers and the node killer, and
// collects the result. Progress lines go to out. Everything it starts is
// stopped before it returns, also when ctx is cancelled; a cancelled run
// returns a partial result with Interrupted set.
func runDemo(ctx context.Context, cfg demoConfig, redisServer string, out io.Writer) (res *demoResult, err error) {
	fmt.Fprintf(out, "redfence-chaos demo: %d redis-server nodes, %d workers, %v run, ttl %v, node timeout %v, hold %v\n",
		cfg.nodes, cfg.workers, cfg.duration, cfg.ttl, cfg.nodeTimeout(), cfg.hold)

	nodes, err := redisnode.StartN(ctx, cfg.nodes, redisnode.Options{Binary: redisServer})
	if err != nil {
		return nil, fmt.Errorf("starting %d redis-server nodes: %w", cfg.nodes, err)
	}
	defer func() {
		for _, n := range nodes {
			if cErr := n.Close(); cErr != nil {
				err = errors.Join(err, fmt.Errorf("stopping redis-server %s: %w", n.Addr(), cErr))
			}
		}
	}()

	clients := make([]redis.UniversalClient, len(nodes))
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr()
		clients[i] = redis.NewClient(&redis.Options{
			Addr:                  n.Addr(),
			ContextTimeoutEnabled: true,
			MaxRetries:            -1,
			DialTimeout:           clientTimeout,
			ReadTimeout:           clientTimeout,
			WriteTimeout:          clientTimeout,
			DialerRetries:         1,
		})
	}
	defer func() {
		for i, c := range clients {
			if cErr := c.Close(); cErr != nil {
				err = errors.Join(err, fmt.Errorf("closing client for %s: %w", addrs[i], cErr))
			}
		}
	}()

	opts := []redlock.Option{redlock.WithTTL(cfg.ttl), redlock.WithNodeTimeout(cfg.nodeTimeout()), redlock.WithRetry(demoRetry)}
	if cfg.metricsAddr != "" {
		ms, err := startMetrics(cfg.metricsAddr)
		if err != nil {
			return nil, err
		}
		defer func() {
			if cErr := ms.close(context.WithoutCancel(ctx)); cErr != nil {
				err = errors.Join(err, fmt.Errorf("stopping the metrics server: %w", cErr))
			}
		}()
		fprintMetricsURL(out, ms)
		opts = append(opts, redlock.WithTelemetry(nil, ms.provider))
		if cfg.onMetrics != nil {
			cfg.onMetrics(ms.addr())
		}
	}
	rl, err := redlock.New(clients, opts...)
	if err != nil {
		return nil, fmt.Errorf("creating the Redlock client: %w", err)
	}
	defer rl.Close() // wait for straggling node requests before the clients close
	// The nodes are brand new, so none can have forgotten a lock: vouch for
	// them, the operator step the docs give for a new cluster, so the restart
	// quarantine does not hold them back.
	if err := rl.Vouch(ctx); err != nil {
		return nil, fmt.Errorf("vouching for the new nodes: %w", err)
	}
	mutex, err := rl.NewMutex(demoLockKey)
	if err != nil {
		return nil, fmt.Errorf("creating the mutex: %w", err)
	}

	for i, a := range addrs {
		fmt.Fprintf(out, "  node %d  %s\n", i, a)
	}
	fmt.Fprintf(out, "quorum %d of %d; counter on node 0; node %d will be killed at %v\n",
		len(nodes)/2+1, len(nodes), cfg.killedNode(), cfg.killAfter)

	runCtx, stop := context.WithTimeout(ctx, cfg.duration)
	defer stop()
	d := &demo{cfg: cfg, t0: time.Now(), mutex: mutex, counter: clients[0]}
	res = &demoResult{Addrs: addrs, Quorum: len(nodes)/2 + 1, KilledNode: cfg.killedNode(), Workers: make([]workerResult, cfg.workers)}

	var wg sync.WaitGroup
	for i := range res.Workers {
		wg.Go(func() { res.Workers[i] = d.worker(ctx, runCtx, i) })
	}
	wg.Go(func() { d.killer(runCtx, nodes[cfg.killedNode()], res, out) })
	wg.Wait()

	res.Interrupted = ctx.Err() != nil
	res.Counter, err = d.readCounter(ctx)
	if err != nil {
		return nil, err
	}
	res.aggregate()
	return res, nil
}

// killer SIGKILLs node at cfg.killAfter unless the run ends first, and
// records the kill in res. It is the only writer of res's kill fields until
// runDemo's wait returns.
func (d *demo) killer(run context.Context, node *redisnode.Node, res *demoResult, out io.Writer) {
	t := time.NewTimer(time.Until(d.t0.Add(d.cfg.killAfter)))
	defer t.Stop()
	select {
	case <-run.Done():
		return
	case <-t.C:
	}
	if err := node.Kill(); err != nil {
		res.KillErr = err
		fmt.Fprintf(out, "could not kill node %d (%s): %v\n", res.KilledNode, node.Addr(), err)
		return
	}
	res.Killed, res.KilledAt = true, time.Since(d.t0)
	fmt.Fprintf(out, "killed node %d (%s) at %v\n", res.KilledNode, node.Addr(), res.KilledAt.Round(time.Millisecond))
}

// note counts err by kind and keeps the first "other" error for the report.
func (w *workerResult) note(err error) {
	before := w.Failures.Other
	w.Failures.add(err)
	if w.Failures.Other > before && w.FirstOther == nil {
		w.FirstOther = err
	}
}

// worker takes the lock repeatedly until the run ends.
func (d *demo) worker(root, run context.Context, id int) workerResult {
	var w workerResult
	for run.Err() == nil {
		lockCtx, cancel := context.WithTimeout(run, d.cfg.lockTimeout())
		called := time.Now()
		lease, err := d.mutex.Lock(lockCtx)
		acquired := time.Now()
		cancel()
		if err != nil {
			if run.Err() != nil {
				break // the run ended while waiting: not a failure of the lock
			}
			w.note(err)
			if !errors.Is(err, redlock.ErrNotAcquired) {
				sleepCtx(run, otherErrorPause) // do not spin on an unexpected error
			}
			continue
		}
		w.Acquisitions++
		w.latencies = append(w.latencies, acquired.Sub(called))
		if err := d.critical(root); err != nil {
			w.CounterErrors++
		}
		w.intervals = append(w.intervals, interval{worker: id, start: acquired.Sub(d.t0), end: time.Since(d.t0)})
		// Release even if the run was interrupted, so no key is left behind.
		relCtx, cancel := context.WithTimeout(context.WithoutCancel(root), opTimeout)
		w.note(lease.Release(relCtx))
		cancel()
	}
	return w
}

// critical is the critical section: a deliberately non-atomic increment of
// the counter on node 0 (GET, then SET to the value plus one), which loses
// updates if two holders interleave, then cfg.hold of simulated work. The
// update is bounded by opTimeout but not cut short by an interrupt, so that
// an interrupted run still counts correctly; the hold is.
func (d *demo) critical(root context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(root), opTimeout)
	defer cancel()
	n, err := d.counter.Get(ctx, demoCounterKey).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("reading the counter: %w", err)
	}
	if err := d.counter.Set(ctx, demoCounterKey, strconv.FormatInt(n+1, 10), 0).Err(); err != nil {
		return fmt.Errorf("writing the counter: %w", err)
	}
	sleepCtx(root, d.cfg.hold)
	return nil
}

// readCounter returns the counter's final value, 0 if it was never set.
func (d *demo) readCounter(root context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(root), opTimeout)
	defer cancel()
	n, err := d.counter.Get(ctx, demoCounterKey).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading the final counter on node 0: %w", err)
	}
	return n, nil
}

// sleepCtx waits for d or until ctx ends, whichever comes first.
func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
