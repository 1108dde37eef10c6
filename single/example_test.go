package single_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/single"
)

func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
	defer rdb.Close()

	locks, err := single.New(rdb, single.WithTTL(30*time.Second), single.WithKeyPrefix("lock:"))
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
		if err := lease.Release(context.Background()); errors.Is(err, single.ErrLost) {
			log.Print("the lease had expired before release: the work may have overlapped another holder")
		}
	}()
	fmt.Println("holding", lease.Key(), "until", lease.ValidUntil())
}
