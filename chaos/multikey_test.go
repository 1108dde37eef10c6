package chaos_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/chaos"
	"github.com/redfence/redfence/redlock"
)

// multiKeySets are the key sets of TestMultiKeyChurnUnderFaults' holders:
// multi-key locks over overlapping sets, and a plain lock on one key.
var multiKeySets = [][]string{{"a", "b"}, {"b", "c"}, {"c", "a"}, {"a", "b", "c"}, {"b"}, {"c", "b"}}

// TestMultiKeyChurnUnderFaults: holders of multi-key locks over overlapping
// key sets (and a plain lock on one key), each with its own Client, churn
// on five Redlock nodes without persistence while the nemesis pauses a
// minority, kills a node and restarts it empty (the restart quarantine
// covers it), pauses one node past the TTL, and kills another. For every
// key, no two leases that include it are believed held at once
// (chaos.Overlaps on the key's history), every key was held, and the fencing
// tokens of the key's acquisitions never repeat and increase in real time
// (an acquisition that returned before another was called has the lower
// token; over several nodes every key of a lease carries its one token).
func TestMultiKeyChurnUnderFaults(t *testing.T) {
	ops := churnUnderFaults(t, len(multiKeySets), func(c *redlock.Client, id int) func(context.Context) (*redlock.Lease, error) {
		m, err := c.NewMultiMutex(multiKeySets[id])
		require.NoError(t, err)
		return m.TryLock
	}, redlock.WithFencing())

	for _, key := range []string{"a", "b", "c"} {
		var keyOps []chaos.Op
		for id, hops := range ops {
			if slices.Contains(multiKeySets[id], key) {
				keyOps = append(keyOps, hops...)
			}
		}
		held := 0
		for _, op := range keyOps {
			if op.Held() {
				held++
			}
		}
		t.Logf("key %s: %d leases held", key, held)
		assert.Positive(t, held, "key %s was held", key)
		assert.Empty(t, chaos.Overlaps(keyOps), "two holders of key %s at once", key)
		assert.Empty(t, tokenViolations(keyOps), "tokens of key %s", key)
	}
}

// tokenViolations lists the granted acquisitions in ops whose token is not
// above that of every granted acquisition that returned before they were
// called, or repeats another's.
func tokenViolations(ops []chaos.Op) []string {
	var granted []chaos.Op
	for _, op := range ops {
		if op.Kind == chaos.Acquire && op.Status == chaos.OK {
			granted = append(granted, op)
		}
	}
	var out []string
	for i, y := range granted {
		for j, x := range granted {
			switch {
			case i != j && x.Token == y.Token:
				out = append(out, fmt.Sprintf("acquisitions %d and %d share token %d", x.ID, y.ID, x.Token))
			case x.Return < y.Call && x.Token >= y.Token:
				out = append(out, fmt.Sprintf("acquisition %d (token %d) returned before %d (token %d) was called", x.ID, x.Token, y.ID, y.Token))
			}
		}
	}
	return out
}
