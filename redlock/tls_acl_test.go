package redlock_test

import (
	"testing"

	"github.com/redfence/redfence/internal/locktest"
)

// TestTLSACLRedlock runs redlock over three TLS nodes with a client
// certificate, as an ACL user limited to redistest.LockACL, with fencing and
// the restart quarantine (redlock's default, on) on: the rule suffices, and
// every part of it is needed (locktest.TLSACL).
func TestTLSACLRedlock(t *testing.T) { locktest.TLSACL(t, kind(3)) }
