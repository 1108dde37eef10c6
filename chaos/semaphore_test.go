package chaos_test

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/chaos"
	"github.com/redfence/redfence/redlock"
)

// TestSemaphoreChurnUnderFaults: six holders, each with its own Client,
// churn over one semaphore of two permits on five Redlock nodes without
// persistence (quorum 4 of 5) while the nemesis of
// TestMultiKeyChurnUnderFaults pauses a minority, kills a node and restarts
// it empty (the restart quarantine covers it), pauses one node past the TTL,
// and kills another. At no moment are more than two leases believed held
// (the believed-held intervals of the history, swept by start), and the
// semaphore was held.
func TestSemaphoreChurnUnderFaults(t *testing.T) {
	const permits, holders = 2, 6
	perHolder := churnUnderFaults(t, holders, func(c *redlock.Client, _ int) func(context.Context) (*redlock.Lease, error) {
		s, err := c.NewSemaphore("sem", permits)
		require.NoError(t, err)
		return s.TryLock // Token is 0: no fencing
	})
	ops := slices.Concat(perHolder...)

	ivs := chaos.HeldIntervals(ops)
	t.Logf("%d leases held", len(ivs))
	assert.Positive(t, len(ivs), "the semaphore was held")
	assert.Empty(t, moreThan(ivs, permits), "more than %d holders at once", permits)
}

// moreThan returns, for every interval at whose start more than k intervals
// (itself included) are open, the leases open then. Intervals that only
// touch do not overlap.
func moreThan(ivs []chaos.Interval, k int) [][]int {
	var out [][]int
	for i, iv := range ivs { // sorted by Start
		var open []int
		for _, o := range ivs[:i+1] {
			if o.Start <= iv.Start && o.End > iv.Start {
				open = append(open, o.Lease)
			}
		}
		if len(open) > k {
			out = append(out, slices.Clone(open))
		}
	}
	return out
}
