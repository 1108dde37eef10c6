package single_test

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
func TestRestartQuarantine(t *testing.T) { locktest.RestartQuarantine(t, kind) }

func TestQuarantineValidation(t *testing.T) { locktest.QuarantineValidation(t, kind) }

// A brand-new node is quarantined until vouched for; a flush (marker gone)
// quarantines it again although it did not restart.
func TestQuarantineNewAndFlushedNodes(t *testing.T) { locktest.QuarantineNewAndFlushedNodes(t, kind) }

// The marker survives a restart when the node persists its data, and the
// acquire script skips INFO once the node has been up (by LASTSAVE) longer
// than the quarantine: a restart must still be caught, by the uptime rule.
func TestQuarantineRestartWithPersistedMarker(t *testing.T) {
	locktest.QuarantineRestartWithPersistedMarker(t, kind)
}
func TestRestartProof(t *testing.T) { locktest.RestartProof(t, kind) }
