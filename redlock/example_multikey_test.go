package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/internal/redisnode"
	"github.com/redfence/redfence/redlock"
	"github.com/redfence/redfence/single"
)

// A transfer locks both accounts at once: all keys or none, so two transfers
// over overlapping accounts never both hold and never deadlock, and a plain
// lock on one account waits for the transfer. With fencing, each account's
// key has its own token (docs/shapes.md).
func ExampleClient_NewMultiMutex() {
	locks, stop := exampleLocks(redlock.WithFencing())
	defer stop()
	ctx := context.Background()

	transfer, err := locks.NewMultiMutex([]string{"account:alice", "account:bob"})
	if err != nil {
		log.Fatal(err)
	}
	err = transfer.Do(ctx, func(ctx context.Context, lease *redlock.Lease) error {
		fmt.Println("holding", transfer.Keys(), "with", len(lease.Tokens()), "tokens")
		bob, err := locks.NewMutex("account:bob")
		if err != nil {
			return err
		}
		_, err = bob.TryLock(ctx)
		fmt.Println("bob alone is taken:", errors.Is(err, redlock.ErrTaken))
		return nil
	})
	fmt.Println("transfer done:", err)

	_, err = locks.NewMultiMutex([]string{"account:alice", "account:alice"})
	var ce *redlock.ConfigError
	fmt.Println("a repeated key is refused:", errors.As(err, &ce))
	// Output:
	// holding [lock:account:alice lock:account:bob] with 2 tokens
	// bob alone is taken: true
	// transfer done: <nil>
	// a repeated key is refused: true
}

// exampleLocks starts a redis-server for the example to run against and
// returns a Client over it (the redis client set up as in Example) with a
// 10s TTL, the key prefix "lock:" and opts, and how to stop it all.
func exampleLocks(opts ...redlock.Option) (locks *redlock.Client, stop func()) {
	n, err := redisnode.Start(context.Background(), redisnode.Options{})
	if err != nil {
		log.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: n.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
	locks, err = single.New(rdb, append([]redlock.Option{redlock.WithTTL(10 * time.Second), redlock.WithKeyPrefix("lock:")}, opts...)...)
	if err != nil {
		log.Fatal(err)
	}
	return locks, func() {
		_ = locks.Close()
		_ = rdb.Close()
		_ = n.Close()
	}
}
