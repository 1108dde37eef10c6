package redlock

import (
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/redfence/redfence/internal/core"
)

// The names and defaults that tools reading a lock's state from Redis need
// (redfence status, ACL rules, a chaos checker).
const (
	// MarkerKey is the restart quarantine's marker hash on every node: the
	// fields ready_at (when the node may vote again, ms by its clock) and
	// vouched (the run id Vouch vouched for).
	MarkerKey = core.MarkerKey
	// DefaultQuarantine is New's restart quarantine (NewSingle's is off).
	DefaultQuarantine time.Duration = core.DefaultQuarantine
)

// FenceKey returns the Redis key of the fence hash of the full lock key k
// (prefix included): its field t is the last fencing token issued. It shares
// k's Cluster slot: k's own hash tag when it has one, else {k}:fence.
func FenceKey(k string) string { return core.FenceKey(k) }

// ReadersKey returns the Redis key of the sorted set in which each node
// records the readers of the read-write lock on the full lock key k (prefix
// included), each scored with its expiry in ms on the node's clock; IntentKey
// returns the key of its writer-intent marker. Both share k's Cluster slot,
// as FenceKey does: k's own hash tag when it has one, else {k}:rw:readers and
// {k}:rw:intent.
func ReadersKey(k string) string { return core.ReadersKey(k) }

// IntentKey returns the Redis key of the writer-intent marker of the
// read-write lock on the full lock key k (see ReadersKey).
func IntentKey(k string) string { return core.IntentKey(k) }

// DefaultRetry returns a new instance of the retry policy Lock uses when
// WithRetry is not given: exponential back-off from 20ms to 500ms, x1.6,
// each delay randomised by +-50%, with no limit on attempts.
func DefaultRetry() backoff.BackOff { return core.DefaultRetry() }
