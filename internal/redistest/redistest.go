package redistest

import (
	"crypto/rand"
	"encoding/hex"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/internal/redisnode"
)

// ClientTimeout is the dial, read and write timeout of clients made by Client.
const ClientTimeout = 2 * time.Second

// Nodes starts n redis-server nodes, each on its own free loopback port with
// its own temporary directory, and closes them when the test ends. Each opt
// may adjust the shared options (Port and Dir must stay zero when n > 1). If
// the nodes cannot be started, for example because redis-server is not
// installed, the test fails with the reason.
func Nodes(t testing.TB, n int, opts ...func(*redisnode.Options)) []*redisnode.Node {
	t.Helper()
	var o redisnode.Options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	nodes, err := redisnode.StartN(t.Context(), n, o)
	if err != nil {
		t.Fatalf("redistest: starting %d redis-server node(s): %v", n, err)
	}
	t.Cleanup(func() {
		for _, node := range nodes {
			if err := node.Close(); err != nil {
				t.Errorf("redistest: closing redis-server node %s: %v", node.Addr(), err)
			}
		}
	})
	return nodes
}

// Client returns a go-redis client for addr that honours context deadlines,
// uses ClientTimeout for dialing, reading and writing, and never retries
// commands or dials, so faults injected by a test surface immediately. It is
// closed when the test ends.
func Client(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(ClientOptions(addr))
	closeAtEnd(t, c, "client for "+addr)
	return c
}

// ClientOptions are the options of Client for addr.
func ClientOptions(addr string) *redis.Options { return universalOptions(addr).Simple() }

// universalOptions are the settings of every client the rig hands out, over
// addrs: ClientTimeout for dialing, reading and writing, context deadlines
// honoured, no command retries and one dial attempt.
func universalOptions(addrs ...string) *redis.UniversalOptions {
	return &redis.UniversalOptions{
		Addrs:                 addrs,
		ContextTimeoutEnabled: true,
		DialTimeout:           ClientTimeout,
		ReadTimeout:           ClientTimeout,
		WriteTimeout:          ClientTimeout,
		MaxRetries:            -1,
		DialerRetries:         1,
	}
}

// closeAtEnd closes c when the test ends; a failure to close fails the test.
func closeAtEnd(t testing.TB, c io.Closer, what string) {
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("redistest: closing %s: %v", what, err)
		}
	})
}

// Clients returns one Client per node, in the same order.
func Clients(t testing.TB, nodes []*redisnode.Node) []redis.UniversalClient {
	t.Helper()
	clients := make([]redis.UniversalClient, 0, len(nodes))
	for i, node := range nodes {
		if node == nil {
			t.Fatalf("redistest: Clients: node %d is nil", i)
		}
		clients = append(clients, Client(t, node.Addr()))
	}
	return clients
}

// Key returns a Redis key unique to this test and call: the test name with
// characters other than letters, digits, '-', '_' and '.' replaced by '_',
// then "-" and 8 random hex digits.
func Key(t testing.TB) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error
	return sanitize(t.Name()) + "-" + hex.EncodeToString(b[:])
}

func sanitize(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		default:
			return '_'
		}
	}, name)
}
