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

// TestRWMutexChurnUnderFaults: four readers (RLock) and two writers (Lock,
// which leaves the intent marker while readers hold), each with its own
// Client, churn over one read-write lock on five Redlock nodes without
// persistence while the nemesis of TestMultiKeyChurnUnderFaults pauses a
// minority, kills a node and restarts it empty (the restart quarantine
// covers it), pauses one node past the TTL, and kills another. In the
// believed-held intervals of the history, a writer's never overlaps another
// lease's, reader's or writer's; both modes were held, and the writers'
// fencing tokens never repeat and increase in real time.
func TestRWMutexChurnUnderFaults(t *testing.T) {
	const readers, writers = 4, 2
	ops := slices.Concat(churnUnderFaults(t, readers+writers, func(c *redlock.Client, id int) func(context.Context) (*redlock.Lease, error) {
		w, r, err := c.NewRWMutex("rw")
		require.NoError(t, err)
		if id >= readers {
			return w.Lock
		}
		return r.Lock
	}, redlock.WithFencing())...)

	ivs := chaos.HeldIntervals(ops)
	isWriter := func(iv chaos.Interval) bool { return iv.Client >= readers }
	var reads, writes, shared int
	var writerOps []chaos.Op
	for _, iv := range ivs {
		if isWriter(iv) {
			writes++
		} else {
			reads++
		}
	}
	for _, op := range ops {
		if op.Client >= readers {
			writerOps = append(writerOps, op)
		}
	}
	var bad []string
	for i, a := range ivs { // sorted by Start
		for _, b := range ivs[i+1:] {
			if b.Start >= a.End {
				break // b and every later one start after a ends
			}
			switch {
			case isWriter(a) || isWriter(b):
				bad = append(bad, fmt.Sprintf("lease %d (client %d, %v..%v) overlaps lease %d (client %d, %v..%v)",
					a.Lease, a.Client, a.Start, a.End, b.Lease, b.Client, b.Start, b.End))
			default:
				shared++
			}
		}
	}
	t.Logf("%d read leases and %d write leases held; %d pairs of readers overlapped", reads, writes, shared)
	assert.Positive(t, reads, "readers held")
	assert.Positive(t, writes, "writers held")
	assert.Empty(t, bad, "a writer with another holder")
	assert.Empty(t, tokenViolations(writerOps), "writers' tokens")
	for _, iv := range ivs {
		if !isWriter(iv) {
			assert.Zero(t, iv.Token, "a reader's token")
		}
	}
}
