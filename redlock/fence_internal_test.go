package redlock

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/keys"
	"github.com/redfence/redfence/internal/quorum"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redisconn"
)

// The counter-examples of docs/fencing.md, replayed step by step on five real
// nodes: first with the unsafe variant of the protocol, which must show the
// duplicate or regressing token the counter-example predicts (so the test
// can tell the difference), then with redfence's scripts under the same
// interleaving, which must not. The rig turns the clock floor off: these
// replays check the strict acceptor rule on its own (with the floor, tokens
// are clock readings and would hide the interleavings); floor_internal_test.go
// checks the floor.

type rig struct {
	t       *testing.T
	ctx     context.Context
	clients []redis.UniversalClient
	m       *Mutex
}

func newRig(t *testing.T) *rig {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	e, clients := testEngine(t, "redlock", 5, WithTTL(10*time.Second), WithNodeTimeout(time.Second), WithFencing(), WithoutClockFloor())
	m, err := e.NewMutex(redistest.Key(t))
	require.NoError(t, err)
	return &rig{t: t, ctx: ctx, clients: clients, m: m}
}

// phase1 runs redfence's phase-1 script on the given nodes only (the others
// are unreachable for this client) and returns the replies it received.
func (r *rig) phase1(value string, nodes ...int) []quorum.Reply[int64] {
	var out []quorum.Reply[int64]
	args, decode := r.m.acquireArgs(value), r.m.acquireDecoder()
	for _, i := range nodes {
		cmd := redis.NewCmd(r.ctx, args...)
		_ = r.clients[i].Process(r.ctx, cmd)
		retryScript(r.ctx, redisconn.GoRedis(r.clients[i]), cmd)
		c, err := decode(cmd)
		out = append(out, quorum.Reply[int64]{Index: i, Value: c, Err: err})
	}
	return out
}

func (r *rig) keys() []string { return []string{r.m.key, r.m.fenceKey} }

func (r *rig) del(node int) {
	require.NoError(r.t, r.clients[node].Del(r.ctx, r.m.key).Err())
}

func (r *rig) releaseAll() {
	for i := range r.clients {
		r.del(i)
	}
}

// Unsafe variant (a): every node INCRs its own counter when its SET NX
// succeeds; the token is the maximum over the acquired nodes.
var incrEach = redis.NewScript(`
if redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then
	return redis.call("HINCRBY", KEYS[2], "t", 1)
end
return -1`)

func (r *rig) acquireIncrEach(nodes ...int) int64 {
	v := newValue()
	var token int64
	for _, i := range nodes {
		n, err := incrEach.Run(r.ctx, r.clients[i], r.keys(), v, 10000).Int64()
		require.NoError(r.t, err)
		require.Positive(r.t, n, "node %d is free", i)
		token = max(token, n)
	}
	r.releaseAll()
	return token
}

// acquireOurs runs redfence's two phases with only the given nodes answering
// phase 1; phase 2 goes to every node, as in Mutex.TryLock.
func (r *rig) acquireOurs(nodes ...int) int64 {
	v := newValue()
	p1 := r.phase1(v, nodes...)
	for _, rep := range p1 {
		require.NoError(r.t, rep.Err)
	}
	token, err := r.m.fence(r.ctx, v, r.m.e.now(), p1)
	require.NoError(r.t, err)
	r.releaseAll()
	return token
}

// Counter-example (a): 10 holders lock {0,1,2}, 5 hold {0,3,4}, the next
// locks {1,2,3}. Per-node counters with token = max give it 11 after 15.
func TestCounterExampleARegression(t *testing.T) {
	run := func(acquire func(nodes ...int) int64) []int64 {
		var tokens []int64
		for i := 0; i < 10; i++ {
			tokens = append(tokens, acquire(0, 1, 2))
		}
		for i := 0; i < 5; i++ {
			tokens = append(tokens, acquire(0, 3, 4))
		}
		return append(tokens, acquire(1, 2, 3))
	}
	unsafe := newRig(t)
	tokens := run(unsafe.acquireIncrEach)
	assert.Equal(t, int64(15), tokens[14])
	assert.Equal(t, int64(11), tokens[15], "the unsafe variant regresses, as the counter-example says")

	ours := newRig(t)
	tokens = run(ours.acquireOurs)
	for i := 1; i < len(tokens); i++ {
		assert.Greater(t, tokens[i], tokens[i-1], "acquisition %d", i)
	}
}

// Counter-example (a), duplicates: from counters (10,10,10,0,0), X locks
// {0,3,4} and releases, then Y locks {2,3,4}: per-node counters give both 11.
func TestCounterExampleADuplicate(t *testing.T) {
	run := func(acquire func(nodes ...int) int64) (x, y int64) {
		for i := 0; i < 10; i++ {
			acquire(0, 1, 2)
		}
		return acquire(0, 3, 4), acquire(2, 3, 4)
	}
	unsafe := newRig(t)
	x, y := run(unsafe.acquireIncrEach)
	assert.Equal(t, x, y, "the unsafe variant issues a duplicate")

	ours := newRig(t)
	x, y = run(ours.acquireOurs)
	assert.Greater(t, y, x)
}

// Unsafe variant (b): phase 2 with counter = max(counter, t), acknowledging
// whenever counter <= t.
var maxWriteBack = redis.NewScript(`
if redis.call("GET", KEYS[1]) ~= ARGV[1] then return -1 end
local cur = tonumber(redis.call("HGET", KEYS[2], "t") or "0")
local t = tonumber(ARGV[2])
if cur <= t then
	redis.call("HSET", KEYS[2], "t", ARGV[2])
	return 1
end
return 0`)

// fenceMaxWriteBack is phase 2 of the unsafe variant on every node.
func (r *rig) fenceMaxWriteBack(value string, p1 []quorum.Reply[int64]) (int64, int) {
	var hi int64
	for _, rep := range p1 {
		hi = max(hi, rep.Value)
	}
	t := hi + 1
	acks := 0
	for i := range r.clients {
		n, err := maxWriteBack.Run(r.ctx, r.clients[i], r.keys(), value, t).Int64()
		require.NoError(r.t, err)
		if n == 1 {
			acks++
		}
	}
	return t, acks
}

// Counter-example (b), step by step:
//  1. Y's SET NX lands on node 2 (reads 0); Y's key there then expires.
//  2. X locks {0,1,2}, reads 0s, proposes 1: acknowledged by 0, 1, 2.
//  3. X's key on node 0 expires; Y's delayed SET NX lands there, its reply
//     (with node 0's counter, now 1) is lost.
//  4. Y locks nodes 3 and 4 (read 0): Y has seen only zeros, proposes 1.
//  5. Y's phase 2 reaches nodes 0, 3, 4, where it holds the lock.
//
// With max write-back, node 0 acknowledges 1 again (1 <= 1): X and Y both
// hold token 1. With the strict rule node 0 refuses, and Y retries higher.
func TestCounterExampleBDuplicate(t *testing.T) {
	type fenceFn func(r *rig, value string, p1 []quorum.Reply[int64]) (token int64, ok bool)
	run := func(r *rig, fence fenceFn) (x, y int64, yOK bool) {
		vx, vy := newValue(), newValue()
		p1y := r.phase1(vy, 2) // step 1
		r.del(2)
		p1x := r.phase1(vx, 0, 1, 2) // step 2
		x, ok := fence(r, vx, p1x)
		require.True(t, ok, "X holds {0,1,2}")
		r.del(0) // step 3: X's key on node 0 expires
		_ = r.phase1(vy, 0)
		p1y = append(p1y, r.phase1(vy, 3, 4)...) // step 4: the reply from node 0 was lost
		y, yOK = fence(r, vy, p1y)               // step 5
		return x, y, yOK
	}

	unsafe := newRig(t)
	x, y, ok := run(unsafe, func(r *rig, v string, p1 []quorum.Reply[int64]) (int64, bool) {
		t, acks := r.fenceMaxWriteBack(v, p1)
		return t, acks >= 3
	})
	require.True(t, ok)
	assert.Equal(t, int64(1), x)
	assert.Equal(t, x, y, "max write-back issues a duplicate, as the counter-example says")

	ours := newRig(t)
	x, y, ok = run(ours, func(r *rig, v string, p1 []quorum.Reply[int64]) (int64, bool) {
		t, err := r.m.fence(r.ctx, v, r.m.e.now(), p1)
		return t, err == nil
	})
	assert.Equal(t, int64(1), x)
	if ok {
		assert.Greater(t, y, x, "the strict rule never lets Y share X's token")
	}
	assert.True(t, ok, "Y gets a token after retrying above node 0's counter")
	assert.Equal(t, int64(2), y)
}

func TestFenceKeySharesSlot(t *testing.T) {
	for k, want := range map[string]string{
		"lock:a":       "{lock:a}:fence",
		"{user1}:lock": "{user1}:lock:fence",
		"a{b}c":        "a{b}c:fence",
		"a}b":          "a}b:fence",
		"{}x":          "{}x:fence", // no usable tag: outside Cluster only
	} {
		assert.Equal(t, want, keys.Fence(k), k)
	}
}
