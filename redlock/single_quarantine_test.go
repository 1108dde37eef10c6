package redlock_test

import (
	"testing"

	"github.com/redfence/redfence/internal/locktest"
)

// The restart quarantine, off by default in single, turned on: the same
// tests as redlock's, on the one node (internal/locktest/quarantine.go).

// Client A holds the node; it restarts empty; client B must not acquire
// while the node is in quarantine, and does once the quarantine has ended
// (by then A's lease has expired). The control, without the quarantine,
// shows two holders at once.
func TestSingleRestartQuarantine(t *testing.T) { locktest.RestartQuarantine(t, singleKind) }

func TestSingleQuarantineValidation(t *testing.T) { locktest.QuarantineValidation(t, singleKind) }

// A brand-new node is quarantined until vouched for; a flush (marker gone)
// quarantines it again although it did not restart.
func TestSingleQuarantineNewAndFlushedNodes(t *testing.T) {
	locktest.QuarantineNewAndFlushedNodes(t, singleKind)
}

// The marker survives a restart when the node persists its data, and the
// acquire script skips INFO once the node has been up (by LASTSAVE) longer
// than the quarantine: a restart must still be caught, by the uptime rule.
func TestSingleQuarantineRestartWithPersistedMarker(t *testing.T) {
	locktest.QuarantineRestartWithPersistedMarker(t, singleKind)
}
func TestSingleRestartProof(t *testing.T) { locktest.RestartProof(t, singleKind) }
