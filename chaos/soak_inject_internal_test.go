package chaos

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stubNode is a Node whose control operations only count.
type stubNode struct {
	name  string
	calls map[string]int
}

func (n *stubNode) Name() string                 { return n.name }
func (n *stubNode) Addr() string                 { return "127.0.0.1:1" }
func (n *stubNode) Kill(context.Context) error   { n.calls["kill"]++; return nil }
func (n *stubNode) Start(context.Context) error  { n.calls["start"]++; return nil }
func (n *stubNode) Pause(context.Context) error  { n.calls["pause"]++; return nil }
func (n *stubNode) Resume(context.Context) error { n.calls["resume"]++; return nil }
func (n *stubNode) Close() error                 { return nil }
func (n *stubNode) SetClockOffset(_ context.Context, d time.Duration) error {
	n.calls["clock"] += int(d / scenarioTTL)
	return nil
}

// TestSoakInjectorSettlesAfterLastNodeFault checks that on Sentinel the
// deployment is settled once the last node fault has healed, not while
// another node is still down (it could not settle then: the unsafe run
// disturbs both nodes at once), and that a clock jump there moves every
// node's clock.
func TestSoakInjectorSettlesAfterLastNodeFault(t *testing.T) {
	n0, n1 := &stubNode{name: "n0", calls: map[string]int{}}, &stubNode{name: "n1", calls: map[string]int{}}
	r := &run{h: NewHistory(), down: map[Node]bool{}, paused: map[Node]bool{}}
	settles := 0
	in := &runInjector{ctx: t.Context(), r: r, targets: []Node{n0, n1}, offset: map[int]int{},
		sent:   &soakSentinel{}, // only its presence matters to clockJump
		settle: func(context.Context) error { settles++; return nil }}
	healKill, err := in.start(&faultPlan{kind: faultKill, node: 0})
	require.NoError(t, err)
	healPause, err := in.start(&faultPlan{kind: faultPause, node: 1})
	require.NoError(t, err)
	require.NoError(t, healPause())
	assert.Zero(t, settles, "n0 is still down")
	require.NoError(t, healKill())
	assert.Equal(t, 1, settles, "settled once both are back")
	assert.Equal(t, map[string]int{"kill": 1, "start": 1}, n0.calls)
	assert.Equal(t, map[string]int{"pause": 1, "resume": 1}, n1.calls)

	_, err = in.start(&faultPlan{kind: faultClock, node: 1})
	require.NoError(t, err)
	assert.Equal(t, []int{2, 2}, []int{n0.calls["clock"], n1.calls["clock"]}, "one host's clock: both nodes jump 2 TTLs")
}
