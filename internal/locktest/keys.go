package locktest

import (
	"time"

	"github.com/redfence/redfence/internal/keys"
)

// The key layout the locks use on the nodes (docs/design.md, Keys), which
// the tests read and plant keys by, and the drift allowance's constants.
const (
	// MarkerKey is the node's restart-quarantine marker.
	MarkerKey = keys.Marker
	// ExtraDrift is what the drift allowance adds to TTL x drift factor,
	// and DefaultDrift the default drift factor.
	ExtraDrift   = 2 * time.Millisecond
	DefaultDrift = 0.01
)

// FenceKey is the fence hash of lock key k.
func FenceKey(k string) string { return keys.Fence(k) }

// ReadersKey is the readers' set of read-write lock key k.
func ReadersKey(k string) string { return keys.ReadersOf(k) }

// IntentKey is the writer-intent marker of read-write lock key k.
func IntentKey(k string) string { return keys.Intent(k) }

// releasedChannel is the prefix of the grant channels of lock key k.
func releasedChannel(k string) string { return keys.ReleasedPrefix + k }
