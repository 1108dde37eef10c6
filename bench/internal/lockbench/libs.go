package lockbench

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/cenkalti/backoff/v4"
	"github.com/go-redsync/redsync/v4"
	redsyncpool "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/redlock"
	"github.com/redfence/redfence/single"
)

// TTL is the lock TTL for every library: redfence's and redsync's default;
// bsm/redislock has none and takes it per Obtain.
const TTL = 8 * time.Second

// ClientOptions returns the go-redis options used for every library, so that
// all of them talk to Redis the same way.
func ClientOptions(addr string, poolSize int) *redis.Options {
	return &redis.Options{
		Addr:                  addr,
		PoolSize:              poolSize,
		ContextTimeoutEnabled: true,
	}
}

// locker is one worker's handle on one key: Lock then Unlock, repeatedly, from
// one goroutine.
type locker interface {
	lock(ctx context.Context) error
	unlock(ctx context.Context) error
}

// impl is one configured library over a set of nodes. newLocker is called once
// per worker (outside the measurement) with the worker's key.
type impl interface {
	newLocker(key string) (locker, error)
	close() error
}

// lib describes how to build an impl over node addresses.
type lib struct {
	name  string // row label
	peer  bool   // a peer library (the denominator of ratios)
	build func(ctx context.Context, addrs []string, poolSize int) (impl, error)
	// retries counts the retry delays the library drew (retries.go); nil:
	// not counted.
	retries *atomic.Int64
}

func newClients(addrs []string, poolSize int) []*redis.Client {
	cs := make([]*redis.Client, len(addrs))
	for i, a := range addrs {
		cs[i] = redis.NewClient(ClientOptions(a, poolSize))
	}
	return cs
}

func closeClients(cs []*redis.Client) error {
	var err error
	for _, c := range cs {
		err = errors.Join(err, c.Close())
	}
	return err
}

func universal(cs []*redis.Client) []redis.UniversalClient {
	u := make([]redis.UniversalClient, len(cs))
	for i, c := range cs {
		u[i] = c
	}
	return u
}

// oneClient returns a client for the one node in addrs; what names the
// library in the error when addrs does not hold exactly one.
func oneClient(what string, addrs []string, poolSize int) (*redis.Client, error) {
	if len(addrs) != 1 {
		return nil, fmt.Errorf("%s needs 1 node, got %d", what, len(addrs))
	}
	return redis.NewClient(ClientOptions(addrs[0], poolSize)), nil
}

// --- redfence redlock and single (one Client type, package redlock's) ---

// rfImpl is redfence over any client: closeClients closes the Redis
// clients after the lock Client.
type rfImpl struct {
	c            *redlock.Client
	closeClients func() error
}

// redfenceRedlock builds a redfence redlock Client with opts; when vouch is
// set it calls Vouch once so that the default quarantine lets locks through.
func redfenceRedlock(name string, vouch bool, opts ...redlock.Option) lib {
	return lib{name: name, build: func(ctx context.Context, addrs []string, poolSize int) (impl, error) {
		cs := newClients(addrs, poolSize)
		c, err := redlock.New(universal(cs), opts...)
		if err != nil {
			_ = closeClients(cs)
			return nil, err
		}
		if vouch {
			if err := c.Vouch(ctx); err != nil {
				_ = closeClients(cs)
				return nil, fmt.Errorf("vouch: %w", err)
			}
		}
		return &rfImpl{c: c, closeClients: func() error { return closeClients(cs) }}, nil
	}}
}

func redfenceSingle(name string, opts ...redlock.Option) lib {
	return lib{name: name, build: func(ctx context.Context, addrs []string, poolSize int) (impl, error) {
		cl, err := oneClient("redfence single", addrs, poolSize)
		if err != nil {
			return nil, err
		}
		c, err := single.New(cl, opts...)
		if err != nil {
			_ = cl.Close()
			return nil, err
		}
		return &rfImpl{c: c, closeClients: cl.Close}, nil
	}}
}

func (r *rfImpl) newLocker(key string) (locker, error) {
	m, err := r.c.NewMutex(key)
	if err != nil {
		return nil, err
	}
	return &rfLocker{m: m}, nil
}

func (r *rfImpl) close() error {
	_ = r.c.Close()
	return r.closeClients()
}

type rfLocker struct {
	m *redlock.Mutex
	l *redlock.Lease
}

func (w *rfLocker) lock(ctx context.Context) (err error) {
	w.l, err = w.m.Lock(ctx)
	return err
}

func (w *rfLocker) unlock(ctx context.Context) error { return w.l.Release(ctx) }

// --- redsync ---

type rsImpl struct {
	clients []*redis.Client
	rs      *redsync.Redsync
	opts    []redsync.Option
}

// redsyncLib builds redsync with one goredis pool per node and opts on every
// mutex (none: its defaults).
func redsyncLib(name string, opts ...redsync.Option) lib {
	return lib{name: name, peer: true, build: func(ctx context.Context, addrs []string, poolSize int) (impl, error) {
		cs := newClients(addrs, poolSize)
		pools := make([]redsyncpool.Pool, len(cs))
		for i, c := range cs {
			pools[i] = goredis.NewPool(c)
		}
		return &rsImpl{clients: cs, rs: redsync.New(pools...), opts: opts}, nil
	}}
}

func (r *rsImpl) newLocker(key string) (locker, error) {
	return &rsLocker{m: r.rs.NewMutex(key, r.opts...)}, nil
}

func (r *rsImpl) close() error { return closeClients(r.clients) }

type rsLocker struct{ m *redsync.Mutex }

var errNotUnlocked = errors.New("redsync: unlock reported false")

func (w *rsLocker) lock(ctx context.Context) error { return w.m.LockContext(ctx) }

func (w *rsLocker) unlock(ctx context.Context) error {
	ok, err := w.m.UnlockContext(ctx)
	if err == nil && !ok {
		err = errNotUnlocked
	}
	return err
}

// --- bsm/redislock ---

type bsmImpl struct {
	client *redis.Client
	c      *redislock.Client
}

// bsmLib builds bsm/redislock with its defaults (no retry).
func bsmLib(name string) lib {
	return lib{name: name, peer: true, build: func(ctx context.Context, addrs []string, poolSize int) (impl, error) {
		cl, err := oneClient("bsm/redislock", addrs, poolSize)
		if err != nil {
			return nil, err
		}
		return &bsmImpl{client: cl, c: redislock.New(cl)}, nil
	}}
}

func (b *bsmImpl) newLocker(key string) (locker, error) {
	return &bsmLocker{c: b.c, key: key}, nil
}

func (b *bsmImpl) close() error { return b.client.Close() }

type bsmLocker struct {
	c   *redislock.Client
	key string
	l   *redislock.Lock
}

func (w *bsmLocker) lock(ctx context.Context) (err error) {
	w.l, err = w.c.Obtain(ctx, w.key, TTL, nil)
	return err
}

func (w *bsmLocker) unlock(ctx context.Context) error { return w.l.Release(ctx) }

// redfenceJitter is redfence's retry policy with delays uniform in [lo, hi]
// and no attempt limit, the counterpart of rsCounted's.
func redfenceJitter(lo, hi time.Duration) func() backoff.BackOff {
	return func() backoff.BackOff {
		b := backoff.NewExponentialBackOff()
		mid := (lo + hi) / 2
		b.InitialInterval = mid
		b.MaxInterval = mid
		b.Multiplier = 1
		b.RandomizationFactor = float64(hi-lo) / float64(hi+lo)
		b.MaxElapsedTime = 0
		return b
	}
}

// --- one instance per worker ---

// perWorkerPool is the go-redis PoolSize of each per-worker instance: one
// worker needs a connection or two per node.
const perWorkerPool = 4

// perWorker gives every worker its own instance of base, over its own
// go-redis clients with PoolSize pool: n separate processes, as far as Redis
// and the library can tell. The n instances are built on first use and
// reused by later rounds (worker k of a round gets instance k).
func perWorker(name string, base lib, n, pool int) lib {
	return lib{name: name, peer: base.peer, retries: base.retries, build: func(ctx context.Context, addrs []string, _ int) (impl, error) {
		return &perWorkerImpl{ctx: ctx, base: base, addrs: addrs, n: n, pool: pool}, nil
	}}
}

type perWorkerImpl struct {
	ctx   context.Context // the build context, for instances built lazily by newLocker
	base  lib
	addrs []string
	n     int
	pool  int
	impls []impl
	next  int
}

func (p *perWorkerImpl) newLocker(key string) (locker, error) {
	k := p.next % p.n
	p.next++
	if k == len(p.impls) {
		im, err := p.base.build(p.ctx, p.addrs, p.pool)
		if err != nil {
			return nil, err
		}
		p.impls = append(p.impls, im)
	}
	return p.impls[k].newLocker(key)
}

func (p *perWorkerImpl) close() error {
	var err error
	for _, im := range p.impls {
		err = errors.Join(err, im.close())
	}
	return err
}
