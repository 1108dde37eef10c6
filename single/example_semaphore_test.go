package single_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/redfence/redfence/single"
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
	a, errA := exports.TryAcquire(ctx)
	b, errB := exports.TryAcquire(ctx)
	fmt.Println("two holders get a permit each:", errA, errB)
	_, err = exports.TryAcquire(ctx)
	fmt.Println("a third holder is refused:", errors.Is(err, single.ErrNotAcquired))
	fmt.Println("release a:", a.Release(ctx))
	c, err := exports.TryAcquire(ctx)
	fmt.Println("then it gets a permit:", err)
	fmt.Println("release b and c:", b.Release(ctx), c.Release(ctx))

	_, err = locks.NewSemaphore("exports", 2, single.WithFencing())
	var ce *single.ConfigError
	fmt.Println("fencing is refused:", errors.As(err, &ce))
	// Output:
	// two holders get a permit each: <nil> <nil>
	// a third holder is refused: true
	// release a: <nil>
	// then it gets a permit: <nil>
	// release b and c: <nil> <nil>
	// fencing is refused: true
}
