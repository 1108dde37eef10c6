package redlock

import (
	"context"

	"github.com/redfence/redfence/internal/core"
)

// Inspection is what every node holds for one lock key: the result of
// Client.Inspect.
type Inspection = core.Inspection

// NodeState is one node's part of an Inspection: the key's holder (owner
// value) and PTTL, its fence counter, the node's restart-quarantine state,
// or Err when the node could not be read.
type NodeState = core.NodeState

// NodeQuarantine is a node's restart-quarantine marker as Inspect reads it;
// its Left method gives the time the node still sits out for a quarantine
// period.
type NodeQuarantine = core.NodeQuarantine

// Inspect reads, from every node in parallel, what it holds for the lock
// key: the owner value and PTTL of the key (the Client's WithKeyPrefix
// applies, as in NewMutex), the key's fence counter and the node's
// restart-quarantine marker, each node in one MULTI/EXEC bounded by ctx and
// the per-node timeout. It only reads. A node that fails is reported in its
// NodeState.Err; Inspect itself returns an error only when ctx ends
// (ctx.Err()), for a nil ctx, an empty or reserved key (a *ConfigError, as
// NewMutex), and after Close (ErrClosed).
func (c *Client) Inspect(ctx context.Context, key string) (*Inspection, error) {
	leave, err := c.e.Enter(ctx)
	if err != nil {
		return nil, err
	}
	defer leave()
	return c.e.Inspect(ctx, key)
}
