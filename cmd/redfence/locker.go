package main

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/redlock"
	"github.com/redfence/redfence/single"
)

// lockLease is what the commands need of a lease: *redlock.Lease and
// *single.Lease both have it.
type lockLease interface {
	Key() string
	Value() string
	Token() fencing.Token
	KeepAlive(ctx context.Context) error
	Release(ctx context.Context) error
}

// lockSettings are the lock options a command sets; zero values leave the
// library's defaults.
type lockSettings struct {
	ttl         time.Duration // 0: library default
	nodeTimeout time.Duration // 0: library default
	fencing     bool
	prefix      string
	// quarantine is applied only when quarantineSet, so that each package
	// keeps its own default (60s for redlock, off for single).
	quarantine    time.Duration
	quarantineSet bool
}

// locker is a redlock or single client, seen through the methods the
// commands use, with an optional mutex for one key.
type locker struct {
	vouch      func(context.Context) error
	checkNodes func(context.Context) []redlock.NodeCheck
	close      func() error

	// Set when newLocker was given a key.
	key     string // the full Redis key, prefix included
	lock    func(context.Context) (lockLease, error)
	tryLock func(context.Context) (lockLease, error)
}

// newLocker returns a locker over clients: package single over the one
// client when useSingle, else redlock. With a non-empty key it also creates
// the mutex. Invalid settings return the library's *ConfigError.
func newLocker(clients []redis.UniversalClient, useSingle bool, s lockSettings, key string) (*locker, error) {
	if useSingle {
		return newSingleLocker(clients, s, key)
	}
	var opts []redlock.Option
	if s.ttl > 0 {
		opts = append(opts, redlock.WithTTL(s.ttl))
	}
	if s.nodeTimeout > 0 {
		opts = append(opts, redlock.WithNodeTimeout(s.nodeTimeout))
	}
	if s.fencing {
		opts = append(opts, redlock.WithFencing())
	}
	if s.prefix != "" {
		opts = append(opts, redlock.WithKeyPrefix(s.prefix))
	}
	if s.quarantineSet {
		opts = append(opts, redlock.WithQuarantine(s.quarantine))
	}
	c, err := redlock.New(clients, opts...)
	if err != nil {
		return nil, err
	}
	l := &locker{vouch: c.Vouch, checkNodes: c.CheckNodes, close: c.Close}
	if key == "" {
		return l, nil
	}
	m, err := c.NewMutex(key)
	if err != nil {
		c.Close()
		return nil, err
	}
	l.key = m.Key()
	l.lock = func(ctx context.Context) (lockLease, error) { return asLease(m.Lock(ctx)) }
	l.tryLock = func(ctx context.Context) (lockLease, error) { return asLease(m.TryLock(ctx)) }
	return l, nil
}

// newSingleLocker is newLocker for package single; clients must hold one
// client (single.New reports anything else through its nil check).
func newSingleLocker(clients []redis.UniversalClient, s lockSettings, key string) (*locker, error) {
	var client redis.UniversalClient
	if len(clients) > 0 {
		client = clients[0]
	}
	var opts []single.Option
	if s.ttl > 0 {
		opts = append(opts, single.WithTTL(s.ttl))
	}
	if s.nodeTimeout > 0 {
		opts = append(opts, single.WithNodeTimeout(s.nodeTimeout))
	}
	if s.fencing {
		opts = append(opts, single.WithFencing())
	}
	if s.prefix != "" {
		opts = append(opts, single.WithKeyPrefix(s.prefix))
	}
	if s.quarantineSet {
		opts = append(opts, single.WithQuarantine(s.quarantine))
	}
	c, err := single.New(client, opts...)
	if err != nil {
		return nil, err
	}
	l := &locker{vouch: c.Vouch, checkNodes: c.CheckNodes, close: c.Close}
	if key == "" {
		return l, nil
	}
	m, err := c.NewMutex(key)
	if err != nil {
		c.Close()
		return nil, err
	}
	l.key = m.Key()
	l.lock = func(ctx context.Context) (lockLease, error) { return asLease(m.Lock(ctx)) }
	l.tryLock = func(ctx context.Context) (lockLease, error) { return asLease(m.TryLock(ctx)) }
	return l, nil
}

// asLease converts a package's (lease, error) pair, keeping a nil lease an
// untyped nil.
func asLease[L lockLease](l L, err error) (lockLease, error) {
	if err != nil {
		return nil, err
	}
	return l, nil
}
