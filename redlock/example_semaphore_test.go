package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/redfence/redfence/redlock"
)

// A semaphore of two permits: two workers hold one each, a third is refused
// until one of them releases. Each lease expires on its own if its holder
// dies (docs/shapes.md, Semaphore).
func ExampleClient_NewSemaphore() {
	locks, stop := exampleLocks()
	defer stop()
	ctx := context.Background()

	exports, err := locks.NewSemaphore("exports", 2)
	if err != nil {
		log.Fatal(err)
	}
	a, errA := exports.TryLock(ctx)
	b, errB := exports.TryLock(ctx)
	fmt.Println("two holders get a permit each:", errA, errB)
	_, err = exports.TryLock(ctx)
	fmt.Println("a third holder is refused:", errors.Is(err, redlock.ErrNotAcquired))
	fmt.Println("release a:", a.Release(ctx))
	c, err := exports.TryLock(ctx)
	fmt.Println("then it gets a permit:", err)
	fmt.Println("release b and c:", b.Release(ctx), c.Release(ctx))

	_, err = locks.NewSemaphore("exports", 2, redlock.WithFencing())
	var ce *redlock.ConfigError
	fmt.Println("fencing is refused:", errors.As(err, &ce))
	// Output:
	// two holders get a permit each: <nil> <nil>
	// a third holder is refused: true
	// release a: <nil>
	// then it gets a permit: <nil>
	// release b and c: <nil> <nil>
	// fencing is refused: true
}
