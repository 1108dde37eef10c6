package chaos_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/chaos"
	"github.com/redfence/redfence/fencing"
)

// myLock is a user's own lock, the kind the harness is for: SET NX PX on one
// Redis, with a fencing token from INCR in the same script.
type myLock struct {
	rdb *redis.Client
	key string
	ttl time.Duration
}

var (
	acquireScript = redis.NewScript(`
if redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then
	return redis.call("INCR", KEYS[2])
end
return 0`)
	releaseScript = redis.NewScript(`
if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end
return 0`)
)

// myLease is one acquisition of myLock.
type myLease struct {
	l     *myLock
	value string
	token fencing.Token
	until time.Time
}

func (l *myLease) Token() fencing.Token  { return l.token }
func (l *myLease) ValidUntil() time.Time { return l.until }
func (l *myLease) Release(ctx context.Context) error {
	return releaseScript.Run(ctx, l.l.rdb, []string{l.l.key}, l.value).Err()
}

// Acquire makes one attempt. Its signature is chaos.LockerFunc's; a lock
// with a TryLock method returning its lease type plugs in with chaos.Adapt
// instead.
func (l *myLock) Acquire(ctx context.Context) (chaos.Lease, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	value := hex.EncodeToString(b[:])
	start := time.Now()
	t, err := acquireScript.Run(ctx, l.rdb, []string{l.key, l.key + ":token"}, value, l.ttl.Milliseconds()).Int64()
	if err != nil {
		return nil, err
	}
	if t == 0 {
		return nil, errors.New("mylock: taken")
	}
	return &myLease{l: l, value: value, token: fencing.Token(t), until: start.Add(l.ttl - 10*time.Millisecond)}, nil
}

// Drive your own lock with the workload while one client's link to Redis
// is slowed down, then check the history: no two clients may believe they
// hold the lock at once, and the fenced resource must never accept a stale
// token.
func Example_ownLock() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	backend := chaos.NewProcessBackend() // or docker.NewBackend(ctx)
	defer backend.Close()
	nodes, err := backend.StartNodes(ctx, 1, chaos.NodeSpec{})
	if err != nil {
		log.Fatal(err)
	}
	const clients = 3
	nw, err := chaos.NewNetwork(nodes, clients) // a proxy per client, for faults
	if err != nil {
		log.Fatal(err)
	}
	defer nw.Close()

	lockers := make([]chaos.Locker, clients)
	for c := range lockers {
		rdb := redis.NewClient(&redis.Options{Addr: nw.Addr(c, 0), ContextTimeoutEnabled: true, MaxRetries: -1})
		defer rdb.Close()
		lockers[c] = chaos.LockerFunc((&myLock{rdb: rdb, key: "my-lock", ttl: time.Second}).Acquire)
	}
	if err := nw.Latency(2, 0, 20*time.Millisecond); err != nil { // client 2 is slow
		log.Fatal(err)
	}

	h := chaos.NewHistory()
	runCtx, stop := context.WithTimeout(ctx, time.Second)
	defer stop()
	w := chaos.Workload{Lockers: lockers}
	st, err := w.Run(runCtx, h)
	if err != nil {
		log.Fatal(err)
	}
	ops := h.Ops()
	res := chaos.NewResult(ops, st, 10*time.Second)
	fmt.Println("granted:", st.Grants > 0)
	fmt.Println("double grants:", len(chaos.Overlaps(ops)))
	fmt.Println("fenced violations:", len(chaos.FencedViolations(ops)))
	fmt.Println("lost updates:", st.LostUpdates)
	fmt.Println("safe:", res.Pass)
	// Output:
	// granted: true
	// double grants: 0
	// fenced violations: 0
	// lost updates: 0
	// safe: true
}

// Run one scenario of the suite against redfence's own Redlock.
func ExampleRun() {
	ctx := context.Background()
	backend := chaos.NewProcessBackend()
	defer backend.Close()
	scs, err := chaos.FindScenarios("8") // clock jump on one node
	if err != nil {
		log.Fatal(err)
	}
	res, err := chaos.Run(ctx, backend, scs[0], chaos.LockRedlock, chaos.RunOptions{Seed: 1, ArtifactsDir: "chaos-artifacts"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("double grants %d (expected), stale writes rejected %d, met expectation: %v\n", res.DoubleGrants, res.FencedRejected, res.Pass)
}
