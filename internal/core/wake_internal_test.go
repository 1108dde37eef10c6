package core

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/redfence/redfence/internal/quorum"
)

func TestSplitVote(t *testing.T) {
	taken := func(i int) NodeError { return NodeError{Index: i, Err: ErrTaken} }
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"won some, lost the rest to others", &QuorumError{Op: "acquire", Need: 3, Got: 2, Nodes: []NodeError{taken(0), taken(1), taken(2)}}, true},
		{"wrapped", fmt.Errorf("%w: %w", ErrNotAcquired, &QuorumError{Need: 3, Got: 1, Nodes: []NodeError{taken(0), taken(1), taken(2), taken(3)}}), true},
		{"won nothing: someone else holds it", &QuorumError{Need: 3, Got: 0, Nodes: []NodeError{taken(0), taken(1), taken(2), taken(3), taken(4)}}, false},
		{"a node timed out", &QuorumError{Need: 3, Got: 2, Nodes: []NodeError{taken(0), taken(1), {Index: 2, Err: quorum.ErrTimeout}}}, false},
		{"a node quarantined", &QuorumError{Need: 3, Got: 2, Nodes: []NodeError{taken(0), taken(1), {Index: 2, Err: QuarantineError{Left: time.Second}}}}, false},
		{"cancelled", fmt.Errorf("%w: %w", context.Canceled, &QuorumError{Need: 3, Got: 2, Nodes: []NodeError{{Index: 0, Err: context.Canceled}}}), false},
		{"no quorum error", errors.New("acquire took too long"), false},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, splitVote(tc.err)) })
	}
}

func TestSpread(t *testing.T) {
	const round = time.Millisecond
	for range 1000 {
		d := spread(round)
		assert.Greater(t, d, time.Duration(0))
		assert.LessOrEqual(t, d, 2*round)
	}
}

func TestTurnError(t *testing.T) {
	for _, tc := range []struct {
		err  turnError
		want string
	}{
		{turnError{held: true}, "redfence: key held by another owner (by a lease of this client)"},
		{turnError{ahead: 2}, "redfence: key held by another owner (2 earlier Lock calls of this client wait for it)"},
		{turnError{ahead: 1, held: true}, "redfence: key held by another owner (by a lease of this client; 1 earlier Lock calls of this client wait for it)"},
	} {
		assert.Equal(t, tc.want, tc.err.Error())
		assert.ErrorIs(t, tc.err, ErrTaken)
		assert.Equal(t, OutcomeContended, classify(fmt.Errorf("%w: %w", ErrNotAcquired, tc.err)))
	}
}

func TestReleasedChannel(t *testing.T) {
	assert.Equal(t, "redfence:released:lock:a", ReleasedChannel("lock:a"))
	k, ok := cutPrefix(ReleasedChannel("{x}:y"))
	assert.True(t, ok)
	assert.Equal(t, "{x}:y", k)
	_, ok = cutPrefix("other:lock:a")
	assert.False(t, ok)
}
