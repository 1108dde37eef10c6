package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/redfence/redfence/redlock"
)

// A read-write lock: two readers hold at once, a writer is refused until
// both have released, and then holds alone with a fencing token; readers
// get none. Each lease expires on its own if its holder dies
// (docs/shapes.md, Read-write lock).
func ExampleClient_NewRWMutex() {
	locks, stop := exampleLocks(redlock.WithFencing())
	defer stop()
	ctx := context.Background()

	writer, readers, err := locks.NewRWMutex("catalog")
	if err != nil {
		log.Fatal(err)
	}
	a, err := readers.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	b, err := readers.TryLock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("two readers, tokens:", a.Token(), b.Token())
	_, err = writer.TryLock(ctx)
	fmt.Println("a writer is refused:", errors.Is(err, redlock.ErrNotAcquired))
	fmt.Println("release the readers:", a.Release(ctx), b.Release(ctx))

	err = writer.Do(ctx, func(ctx context.Context, w *redlock.Lease) error {
		_, err := readers.TryLock(ctx)
		fmt.Println("the writer holds alone:", errors.Is(err, redlock.ErrNotAcquired), "token > 0:", w.Token() > 0)
		return nil
	})
	fmt.Println("Do:", err)
	// Output:
	// two readers, tokens: 0 0
	// a writer is refused: true
	// release the readers: <nil> <nil>
	// the writer holds alone: true token > 0: true
	// Do: <nil>
}
