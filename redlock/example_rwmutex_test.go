package redlock_test

import (
	"context"
	"log"

	"github.com/redfence/redfence/redlock"
)

// Readers of a catalog share the lock with RDo; a writer takes it alone with
// Do, holding new readers back while it waits. Each fn's context ends if its
// lease is lost.
func ExampleClient_NewRWMutex() {
	var locks *redlock.Client // from redlock.New, over five primaries
	catalog, err := locks.NewRWMutex("catalog")
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	err = catalog.RDo(ctx, func(ctx context.Context, _ *redlock.Lease) error {
		return nil // read the catalog: other readers may hold too, no writer does
	})
	if err != nil {
		log.Print(err)
	}
	err = catalog.Do(ctx, func(ctx context.Context, w *redlock.Lease) error {
		_ = w.Token() // with WithFencing: pass it to the store, which refuses older ones
		return nil    // write the catalog: no reader or other writer holds
	})
	if err != nil {
		log.Print(err)
	}
}
