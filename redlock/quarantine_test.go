package redlock_test

import (
	"testing"

	"github.com/redfence/redfence/internal/locktest"
)

// Client A holds nodes {0,1,2}; node 2 restarts empty; client B, which can
// reach only {2,3,4}, must not acquire while node 2 is in quarantine, and
// does once the quarantine has ended (by then A's lease has expired). The
// control, without the quarantine, shows two holders at once.
func TestRestartQuarantine(t *testing.T) { locktest.RestartQuarantine(t, kind(5)) }

func TestQuarantineValidation(t *testing.T) { locktest.QuarantineValidation(t, kind(3)) }

// Brand-new nodes are quarantined until vouched for; a flush (marker gone)
// quarantines a node again although it did not restart.
func TestQuarantineNewAndFlushedNodes(t *testing.T) {
	locktest.QuarantineNewAndFlushedNodes(t, kind(3))
}

// The marker survives a restart when the node persists its data, and the
// acquire script skips INFO once the node has been up (by LASTSAVE) longer than
// the quarantine: a restart must still be caught, by the uptime rule.
func TestQuarantineRestartWithPersistedMarker(t *testing.T) {
	locktest.QuarantineRestartWithPersistedMarker(t, kind(1))
}
func TestRestartProof(t *testing.T) { locktest.RestartProof(t, kind(5)) }
