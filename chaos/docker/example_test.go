package docker_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redfence/redfence/chaos"
	"github.com/redfence/redfence/chaos/docker"
)

// Start three Redis containers, crash one and bring it back empty, and make
// another one's clock run 30 seconds fast.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	b, err := docker.NewBackend(ctx) // builds redfence/redis-scratch:<hash> once
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close() // removes every container

	nodes, err := b.StartNodes(ctx, 3, chaos.NodeSpec{Clock: true})
	if err != nil {
		log.Print(err)
		return
	}
	for _, n := range nodes {
		fmt.Println(n.Name(), n.Addr())
	}
	if err := nodes[0].Kill(ctx); err != nil {
		log.Print(err)
		return
	}
	if err := nodes[0].Start(ctx); err != nil { // same address, no data
		log.Print(err)
		return
	}
	if err := nodes[1].SetClockOffset(ctx, 30*time.Second); err != nil {
		log.Print(err)
		return
	}
}
