package coord_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/coord"
	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/redlock"
	"github.com/redfence/redfence/single"
)

// Claims on one Redis: send each confirmation email at most once, whatever
// the number of workers and duplicate deliveries.
func ExampleClaims() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()
	locks, err := single.New(rdb, redlock.WithTTL(30*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close()
	locker, err := coord.New(locks)
	if err != nil {
		log.Fatal(err)
	}
	claims, err := coord.NewClaims(locker, coord.WithRetention(7*24*time.Hour))
	if err != nil {
		log.Fatal(err)
	}

	ctx := context.Background()
	c, state, err := claims.Claim(ctx, "order:42:confirmation")
	if err != nil {
		log.Fatal(err) // Redis unavailable: the state is unknown, retry later
	}
	switch state {
	case coord.ClaimDone:
		fmt.Println("already sent")
	case coord.ClaimBusy:
		fmt.Println("another worker is sending it; check again in", c.BusyFor())
	case coord.ClaimOwned:
		if err := sendEmail(ctx); err != nil {
			_ = c.Abandon(ctx) // let another worker try
			log.Print(err)
			return
		}
		if err := c.Done(ctx); err != nil {
			log.Print("sent, but not recorded as done: ", err)
		}
	}
}

// Claims.Do keeps the claim alive while the work runs, stops the work if the
// claim is lost, and marks it done (or abandons it on error).
func ExampleClaims_Do() {
	var claims *coord.Claims // from NewClaims
	state, err := claims.Do(context.Background(), "invoice:7:charge", func(ctx context.Context, c *coord.Claim) error {
		// ctx is cancelled if the claim is lost; c.Token() fences the
		// charge at the payment service when fencing is on.
		return charge(ctx, c.Token())
	})
	switch {
	case err != nil:
		log.Print(err)
	case state == coord.ClaimDone:
		fmt.Println("charged before")
	case state == coord.ClaimBusy:
		fmt.Println("being charged elsewhere")
	}
}

// Leader election over five independent Redis primaries.
func ExampleElection() {
	var clients []redis.UniversalClient
	for _, addr := range []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379", "10.0.0.4:6379", "10.0.0.5:6379"} {
		clients = append(clients, redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true}))
	}
	locks, err := redlock.New(clients, redlock.WithTTL(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close()
	locker, err := coord.New(locks)
	if err != nil {
		log.Fatal(err)
	}
	election, err := coord.NewElection(locker, "scheduler")
	if err != nil {
		log.Fatal(err)
	}

	ctx := context.Background()
	lead, err := election.Campaign(ctx, "host-a") // blocks until elected
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		if err := lead.Resign(context.Background()); err != nil {
			log.Print("resign: ", err)
		}
	}()

	// Work as leader until the leadership is lost; pass the epoch along so
	// that followers and resources refuse a deposed leader.
	lctx, cancel := lead.Context(ctx)
	defer cancel()
	for lctx.Err() == nil {
		if err := schedule(lctx, lead.Epoch()); err != nil {
			break
		}
	}
	if errors.Is(lead.Err(), coord.ErrLost) {
		log.Print("lost the leadership")
	}
}

// Followers watch the leader without campaigning.
func ExampleElection_Observe() {
	var election *coord.Election // from NewElection
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for info := range election.Observe(ctx) { // closed when ctx ends
		if info.Epoch == 0 {
			fmt.Println("no leader")
			continue
		}
		fmt.Printf("leader %s (epoch %d) since %v\n", info.Identity, info.Epoch, info.Since)
	}
}

func sendEmail(context.Context) error               { return nil }
func charge(context.Context, fencing.Token) error   { return nil }
func schedule(context.Context, fencing.Token) error { return nil }
