package single_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/redlock"
	"github.com/redfence/redfence/single"
)

func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
	defer rdb.Close()

	locks, err := single.New(rdb, redlock.WithTTL(30*time.Second), redlock.WithKeyPrefix("lock:"))
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close()
	mu, err := locks.NewMutex("invoice:42")
	if err != nil {
		log.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lease, err := mu.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		if err := lease.Release(context.Background()); errors.Is(err, redlock.ErrLost) {
			log.Print("the lease had expired before release: the work may have overlapped another holder")
		}
	}()
	fmt.Println("holding", lease.Key(), "until", lease.ValidUntil())
}

// A lock over a Sentinel-managed primary whose acquisitions a replica must
// acknowledge: a failover to that replica keeps the lock.
func ExampleWithReplicaAcks() {
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:            "mymaster",
		SentinelAddrs:         []string{"sentinel-1:26379", "sentinel-2:26379", "sentinel-3:26379"},
		ContextTimeoutEnabled: true, // the per-request bounds also end WAIT
		MaxRetries:            -1,
		DialerRetries:         1,
	})
	defer rdb.Close()

	locks, err := single.New(rdb, redlock.WithReplicaAcks(1, 50*time.Millisecond), redlock.WithFencing())
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close()
	mu, err := locks.NewMutex("report:daily")
	if err != nil {
		log.Fatal(err)
	}
	lease, err := mu.TryLock(context.Background())
	switch {
	case errors.Is(err, redlock.ErrReplicaAcks):
		log.Printf("not acquired: too few replicas acknowledged it: %v", err)
		return
	case err != nil:
		log.Fatal(err)
	}
	defer func() { _ = lease.Release(context.Background()) }()
	fmt.Println("holding with token", lease.Token())
}
