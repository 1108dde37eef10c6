package locktest

import (
	"sync"

	"github.com/redis/go-redis/v9"
)

// The tests that watch or hold back a node's lock commands add a go-redis
// hook to the client they give the lock (addHook). A kind whose lock
// commands go through another Redis client to the same server (the rueidis
// adapter's tests) finds the hooks with HooksOf and runs its commands
// through them too.

var (
	hooksMu sync.Mutex
	hooks   = map[redis.UniversalClient][]redis.Hook{}
)

// addHook adds h to c and records it for HooksOf.
func addHook(c redis.UniversalClient, h redis.Hook) {
	c.AddHook(h)
	hooksMu.Lock()
	defer hooksMu.Unlock()
	hooks[c] = append(hooks[c], h)
}

// HooksOf returns the hooks the tests added to c, in the order added.
func HooksOf(c redis.UniversalClient) []redis.Hook {
	hooksMu.Lock()
	defer hooksMu.Unlock()
	return append([]redis.Hook(nil), hooks[c]...)
}
