package main

import (
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/redlock"
	"github.com/redfence/redfence/single"
)

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
	retry         func() backoff.BackOff // Lock's retry policy; nil: library default
}

// locker is a lock client (single's over one node, or redlock's) and, when
// newLocker was given a key, its mutex for that key.
type locker struct {
	*redlock.Client
	m *redlock.Mutex
}

// newLocker returns a locker over clients: package single over the one
// client when useSingle (single.New reports more or fewer through its nil
// check), else redlock. With a non-empty key it also creates the mutex.
// Invalid settings return the library's *ConfigError.
func newLocker(clients []redis.UniversalClient, useSingle bool, s lockSettings, key string) (*locker, error) {
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
	switch {
	case s.quarantineSet:
		opts = append(opts, redlock.WithQuarantine(s.quarantine))
	case !useSingle:
		// Redlock's default, over one node too (the library's is off there).
		opts = append(opts, redlock.WithQuarantine(60*time.Second))
	}
	if s.retry != nil {
		opts = append(opts, redlock.WithRetry(s.retry))
	}
	var (
		c   *redlock.Client
		err error
	)
	if useSingle {
		var client redis.UniversalClient
		if len(clients) > 0 {
			client = clients[0]
		}
		c, err = single.New(client, opts...)
	} else {
		c, err = redlock.New(clients, opts...)
	}
	if err != nil {
		return nil, err
	}
	l := &locker{Client: c}
	if key == "" {
		return l, nil
	}
	if l.m, err = c.NewMutex(key); err != nil {
		c.Close()
		return nil, err
	}
	return l, nil
}
