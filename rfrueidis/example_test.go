package rfrueidis_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redis/rueidis"

	"github.com/redfence/redfence/redlock"
	"github.com/redfence/redfence/rfrueidis"
)

// A single-instance lock over a rueidis client: the same Client, Mutex and
// Lease as over go-redis.
func ExampleNewSingle() {
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"localhost:6379"}, DisableCache: true})
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close() // after the lock Client's Close

	locks, err := rfrueidis.NewSingle(rc, redlock.WithTTL(30*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close()
	mu, err := locks.NewMutex("invoice:42")
	if err != nil {
		log.Fatal(err)
	}
	lease, err := mu.Lock(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = lease.Release(context.Background()) }()
	fmt.Println("holding", lease.Key())
}

// Redlock over three independent primaries, one rueidis client each.
func ExampleNew() {
	var clients []rueidis.Client
	for _, addr := range []string{"redis-1:6379", "redis-2:6379", "redis-3:6379"} {
		rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
		if err != nil {
			log.Fatal(err) // rueidis dials at once: every node must answer now
		}
		defer rc.Close()
		clients = append(clients, rc)
	}
	locks, err := rfrueidis.New(clients, redlock.WithFencing())
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close()
	// Brand-new nodes sit out the restart quarantine until vouched for.
	if err := locks.Vouch(context.Background()); err != nil {
		log.Fatal(err)
	}
}
