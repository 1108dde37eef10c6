package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/redlock"
)

// Five independent Redis primaries; a majority of three must agree.
func Example() {
	var clients []redis.UniversalClient
	for _, addr := range []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379", "10.0.0.4:6379", "10.0.0.5:6379"} {
		clients = append(clients, redis.NewClient(&redis.Options{
			Addr:                  addr,
			ContextTimeoutEnabled: true, // let the per-node timeout end abandoned requests
		}))
	}
	locks, err := redlock.New(clients, redlock.WithTTL(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close()

	mu, err := locks.NewMutex("report:daily")
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lease, err := mu.Lock(ctx)
	if err != nil {
		var qe *redlock.QuorumError
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			log.Print("gave up waiting: ", err)
		case errors.As(err, &qe) && !errors.Is(err, redlock.ErrTaken):
			log.Print("nodes unavailable: ", err)
		default:
			log.Print(err)
		}
		return
	}
	defer func() { _ = lease.Release(context.Background()) }()

	// Act only while the lease is valid, and check again before each step:
	// a lease is a promise bounded by time.
	if time.Until(lease.ValidUntil()) > time.Second {
		fmt.Println("generating the report")
	}
}

// TryLock makes one attempt and reports contention apart from outages.
func ExampleMutex_TryLock() {
	var mu *redlock.Mutex // from Client.NewMutex
	lease, err := mu.TryLock(context.Background())
	switch {
	case errors.Is(err, redlock.ErrTaken):
		fmt.Println("someone else holds it")
	case err != nil:
		fmt.Println("could not reach enough nodes:", err)
	default:
		defer func() { _ = lease.Release(context.Background()) }()
		fmt.Println("acquired until", lease.ValidUntil())
	}
}

// A long task extends its lease and stops as soon as the lease is lost.
func ExampleLease_Extend() {
	var lease *redlock.Lease                  // from Mutex.Lock
	ticker := time.NewTicker(3 * time.Second) // about TTL/3
	defer ticker.Stop()
	for step := 0; step < 10; step++ {
		select {
		case <-lease.Done():
			log.Print("lease ended: ", lease.Err())
			return
		case <-ticker.C:
			if err := lease.Extend(context.Background()); errors.Is(err, redlock.ErrLost) {
				log.Print("lost the lock: ", err)
				return
			}
		}
	}
}

// Do holds the lock while fn runs, keeps it alive, and cancels fn's context
// the moment the lease is lost, leaving fn time to stop before another client
// can acquire.
func ExampleMutex_Do() {
	var mu *redlock.Mutex // from Client.NewMutex, with WithFencing()
	err := mu.Do(context.Background(), func(ctx context.Context, lease *redlock.Lease) error {
		for batch := 0; batch < 100; batch++ {
			if err := ctx.Err(); err != nil {
				return err // the lease was lost: stop writing
			}
			// Pass lease.Token() with every write so the storage can reject a
			// stale holder (see package fencing).
			_ = lease.Token()
		}
		return nil
	})
	switch {
	case errors.Is(err, redlock.ErrNotAcquired):
		log.Print("another worker has it: ", err)
	case errors.Is(err, redlock.ErrLost):
		log.Print("lost the lock part-way; the work must be resumable: ", err)
	case err != nil:
		log.Print(err)
	}
}

// A brand-new set of nodes starts in restart quarantine; the operator vouches
// for them once (or waits one quarantine period).
func ExampleClient_Vouch() {
	var locks *redlock.Client // from redlock.New
	if err := locks.Vouch(context.Background()); err != nil {
		log.Print("some nodes could not be vouched for: ", err)
	}
}
