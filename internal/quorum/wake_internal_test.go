package quorum

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestDeliveryWakesOnlyWhenTheGoalIsMet: a delivery signals the waiting
// owner only once the replies delivered meet what it waits for, so that a
// round of five costs the owner one wake-up, not five.
func TestDeliveryWakesOnlyWhenTheGoalIsMet(t *testing.T) {
	no := errors.New("no")
	signalled := func(r *Round[int]) bool {
		select {
		case <-r.signal:
			return true
		default:
			return false
		}
	}
	wait := func(r *Round[int], goal int) { // as await leaves it when it blocks
		r.mu.Lock()
		r.goal = goal
		r.mu.Unlock()
	}

	r := Begin[int](context.Background(), 5, 3, time.Minute)
	wait(r, goalDecided)
	r.Deliver(0, 0, nil)
	r.Deliver(1, 0, no)
	r.Deliver(2, 0, nil)
	assert.False(t, signalled(r), "two for, one against: not decided")
	r.Deliver(3, 0, nil)
	assert.True(t, signalled(r), "three for decide")
	r.Deliver(4, 0, nil)
	assert.False(t, signalled(r), "nobody waits any more")
	r.Wait()

	r = Begin[int](context.Background(), 5, 3, time.Minute)
	wait(r, goalDecided)
	for i := range 3 {
		r.Deliver(i, 0, no)
	}
	assert.True(t, signalled(r), "three against decide")
	assert.False(t, r.Decide())
	r.Deliver(3, 0, nil)
	r.Deliver(4, 0, nil)

	r = Begin[int](context.Background(), 3, 2, time.Minute)
	wait(r, goalAll)
	r.Deliver(0, 0, nil)
	r.Deliver(1, 0, nil)
	assert.False(t, signalled(r), "a decided round is not every reply")
	r.Deliver(2, 0, nil)
	assert.True(t, signalled(r), "every reply")
	r.Wait()

	r = Begin[int](context.Background(), 3, 2, time.Minute)
	wait(r, goalIndex+1)
	r.Deliver(0, 0, nil)
	assert.False(t, signalled(r), "waiting for call 1 only")
	r.Deliver(1, 0, nil)
	assert.True(t, signalled(r), "call 1")
	r.Deliver(2, 0, nil)
	r.WaitFor([]int{0, 1, 2})
	assert.Len(t, r.Replies(), 3)
}
