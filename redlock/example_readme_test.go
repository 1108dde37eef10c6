package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/redlock"
)

// writeBatch stands for a storage write that checks the fencing token.
func writeBatch(context.Context, fencing.Token, string) error { return nil }

// The README's Do example, compiled.
func Example_readmeDo() {
	var clients []redis.UniversalClient // one per independent Redis primary
	ctx := context.Background()
	batches := []string{"a", "b"}

	locks, _ := redlock.New(clients, redlock.WithFencing())
	mu, _ := locks.NewMutex("orders:compaction")
	err := mu.Do(ctx, func(ctx context.Context, lease *redlock.Lease) error {
		for _, batch := range batches {
			if err := ctx.Err(); err != nil {
				return err // the lease was lost: stop
			}
			// The database accepts the write only if lease.Token() is not older
			// than the newest token it has seen (fencing.SQLGuard.CheckTx).
			if err := writeBatch(ctx, lease.Token(), batch); err != nil {
				return err
			}
		}
		return nil
	})
	// err wraps redlock.ErrNotAcquired, redlock.ErrLost, or fn's error.
	_ = err
}

// The README's first redlock example, compiled.
func Example_readmeNew() {
	// One client per independent Redis primary. ContextTimeoutEnabled ends a
	// request at the per-node timeout; no go-redis retries, so that a node's
	// own error (refused, read-only) is reported (README, Lock clients).
	var clients []redis.UniversalClient
	for _, addr := range []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"} {
		clients = append(clients, redis.NewClient(&redis.Options{
			Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1,
		}))
	}
	locks, err := redlock.New(clients, redlock.WithTTL(30*time.Second), redlock.WithKeyPrefix("lock:"))
	if err != nil {
		log.Fatal(err) // a *redlock.ConfigError: also one server listed under two addresses
	}
	defer locks.Close()
	mu, err := locks.NewMutex("invoice:42")
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lease, err := mu.Lock(ctx)
	if errors.Is(err, redlock.ErrQuarantined) {
		// Brand-new nodes sit out the restart quarantine (60s, WithQuarantine);
		// the error says "... 3 node(s) in restart quarantine for up to 50s
		// more: ... on brand-new nodes call Vouch once (redfence nodes vouch),
		// or see WithQuarantine ...". Vouch for new nodes only, never after a
		// restart or a flush: locks.Vouch(ctx).
		log.Fatal(err)
	}
	if err != nil {
		log.Fatal(err) // wraps redlock.ErrNotAcquired, and ctx.Err() if the wait timed out
	}
	defer func() { _ = lease.Release(context.Background()) }()
	fmt.Println("holding", lease.Key(), "until", lease.ValidUntil())
}
