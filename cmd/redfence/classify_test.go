package main

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/redfence/redfence/redlock"
)

func TestClassifyAcquireError(t *testing.T) {
	node := func(i int, err error) redlock.NodeError { return redlock.NodeError{Index: i, Addr: "a", Err: err} }
	notAcquired := func(qe *redlock.QuorumError) error { return fmt.Errorf("%w: %w", redlock.ErrNotAcquired, qe) }
	taken := redlock.ErrTaken
	down := errors.New("dial tcp: connection refused")
	quarantined := fmt.Errorf("%w (1ns left)", redlock.ErrQuarantined)
	tests := []struct {
		name string
		err  error
		n    int
		want int
	}{
		{"all taken", notAcquired(&redlock.QuorumError{Op: "acquire", Need: 2, Nodes: []redlock.NodeError{node(0, taken), node(1, taken), node(2, taken)}}), 3, exitLockHeld},
		{"taken, rest won", notAcquired(&redlock.QuorumError{Op: "acquire", Need: 3, Got: 2, Nodes: []redlock.NodeError{node(0, taken), node(1, taken), node(2, taken)}}), 5, exitLockHeld},
		{"taken alone blocks a majority, one down", notAcquired(&redlock.QuorumError{Op: "acquire", Need: 3, Got: 1, Nodes: []redlock.NodeError{node(0, taken), node(1, taken), node(2, taken), node(3, down)}}), 5, exitLockHeld},
		{"taken and down together", notAcquired(&redlock.QuorumError{Op: "acquire", Need: 3, Got: 2, Nodes: []redlock.NodeError{node(0, taken), node(1, down), node(2, down)}}), 5, exitUnavailable},
		{"all down", notAcquired(&redlock.QuorumError{Op: "acquire", Need: 2, Nodes: []redlock.NodeError{node(0, down), node(1, down), node(2, down)}}), 3, exitUnavailable},
		{"quarantined", notAcquired(&redlock.QuorumError{Op: "acquire", Need: 2, Nodes: []redlock.NodeError{node(0, quarantined), node(1, quarantined), node(2, quarantined)}}), 3, exitUnavailable},
		{"wrapped by the wait loop", fmt.Errorf("%w (3 attempts in 1s)", notAcquired(&redlock.QuorumError{Op: "acquire", Need: 2, Nodes: []redlock.NodeError{node(0, taken), node(1, taken), node(2, taken)}})), 3, exitLockHeld},
		{"timeouts are failures", notAcquired(&redlock.QuorumError{Op: "acquire", Need: 3, Got: 1, Nodes: []redlock.NodeError{node(0, taken), node(1, context.DeadlineExceeded), node(2, context.DeadlineExceeded)}}), 5, exitUnavailable},
		{"fence phase", notAcquired(&redlock.QuorumError{Op: "fence", Need: 2, Nodes: []redlock.NodeError{node(0, redlock.ErrNotHeld), node(1, redlock.ErrNotHeld)}}), 3, exitUnavailable},
		{"no quorum error", fmt.Errorf("%w: acquire took 3s, leaving no validity", redlock.ErrNotAcquired), 3, exitUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _ := classifyAcquireError(tt.err, tt.n)
			assert.Equal(t, tt.want, code)
		})
	}
}
