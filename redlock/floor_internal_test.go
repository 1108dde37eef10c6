package redlock

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/internal/quorum"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redisconn"
)

// The acceptor's half of the clock floor: a node never acknowledges a token
// below its own clock at the moment it granted the key, whatever the
// proposer computed. This is what keeps tokens above a lost one when the
// proposer never saw the node's phase-1 reply, or left its clock out as too
// far ahead (docs/fencing.md, The proof, case 2).
func TestFenceRefusesProposalBelowNodeClock(t *testing.T) {
	for _, floor := range []bool{true, false} {
		r := newRig(t)
		r.m.cfg.noClockFloor = !floor
		v := newValue()
		// Every node grants; the replies that reach the proposer claim values
		// far below the nodes' clocks (lost replies, clocks behind).
		for _, rep := range r.phase1(v, 0, 1, 2, 3, 4) {
			require.NoError(t, rep.Err)
		}
		low := []quorum.Reply[int64]{{Index: 3, Value: 5}, {Index: 4, Value: 5}}
		token, err := r.m.fence(r.ctx, v, r.m.e.now(), low)
		if !floor {
			require.NoError(t, err, "control: counter-only acceptors take any token above their counter")
			assert.Equal(t, int64(6), token)
			continue
		}
		require.Error(t, err, "no node acknowledges 6: it is below every node's clock at its grant")
		var qe *QuorumError
		require.True(t, errors.As(err, &qe))
		for _, ne := range qe.Nodes {
			var below fenceBelowClockError
			require.True(t, errors.As(ne.Err, &below), "node %d: %v", ne.Index, ne.Err)
			assert.Greater(t, below.granted, time.Now().Add(-time.Minute).UnixMicro(), "the floor is the node's clock")
		}
		for i, c := range r.clients {
			n, err := c.Exists(r.ctx, r.m.fenceKey).Result()
			require.NoError(t, err)
			assert.Zero(t, n, "node %d recorded nothing", i)
		}
	}
}

// The proposer's half: one above the highest phase-1 value, leaving out
// values far above the median, so that one node with a clock far in the
// future does not drag every token toward it.
func TestProposalLeavesOutFarAheadValues(t *testing.T) {
	now := time.Now().UnixMicro()
	reps := func(vals ...int64) []quorum.Reply[int64] {
		var out []quorum.Reply[int64]
		for i, v := range vals {
			out = append(out, quorum.Reply[int64]{Index: i, Value: v})
		}
		return out
	}
	hour, sec := time.Hour.Microseconds(), time.Second.Microseconds()
	timeout := 100 * time.Millisecond
	assert.Equal(t, now+1, proposal(reps(now, now-sec, now+hour), timeout), "an hour ahead: left out")
	assert.Equal(t, now+2*sec+1, proposal(reps(now, now+sec, now+2*sec), timeout), "seconds apart: all count")
	assert.Equal(t, now+hour+1, proposal(reps(now+hour, now+hour, now), timeout), "a majority ahead is the median")
	refused := append(reps(now), quorum.Reply[int64]{Index: 1, Value: now + 3*sec, Err: ErrTaken},
		quorum.Reply[int64]{Index: 2, Value: now + hour, Err: errors.New("timeout")})
	assert.Equal(t, now+3*sec+1, proposal(refused, timeout), "refusals count, failures do not")
	assert.Equal(t, int64(1), proposal(nil, timeout))
}

// single's acquire asked twice with the same value (a retried request whose
// first reply was lost) returns the token it already gave, not a new one.
func TestFence1RepeatedRequestKeepsToken(t *testing.T) {
	e, clients := testEngine(t, "single", 1, WithFencing())
	m, err := e.NewMutex(redistest.Key(t))
	require.NoError(t, err)
	v := newValue()
	var tokens []int64
	for range 2 {
		cmd := redis.NewCmd(t.Context(), m.acquireArgs(v)...)
		_ = clients[0].Process(t.Context(), cmd)
		retryScript(t.Context(), redisconn.GoRedis(clients[0]), cmd)
		n, err := m.acquireDecoder()(cmd)
		require.NoError(t, err)
		tokens = append(tokens, n)
	}
	assert.Equal(t, tokens[0], tokens[1])
}
