package redlock_test

import (
	"context"
	"fmt"
	"log"

	"github.com/redfence/redfence/redlock"
)

// Inspect shows who holds a key on each node, without touching it: a
// tool's view of a lock, as "redfence status" prints it.
func ExampleClient_Inspect() {
	var locks *redlock.Client // from redlock.New
	ins, err := locks.Inspect(context.Background(), "report:daily")
	if err != nil {
		log.Fatal(err) // an invalid key, or the context ended
	}
	for _, n := range ins.Nodes {
		switch {
		case n.Err != nil:
			fmt.Printf("%s: unreachable: %v\n", n.Addr, n.Err)
		case n.Holder == "":
			fmt.Printf("%s: free (last token %d)\n", n.Addr, n.Token)
		default:
			fmt.Printf("%s: held by %s for %v more (token %d); quarantine %v left\n",
				n.Addr, n.Holder, n.TTL, n.Token, n.Quarantine.Left)
		}
	}
}
