package redlock_test

import (
	"context"

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
