package redlock_test

import (
	"testing"

	"github.com/redfence/redfence/internal/locktest"
)

// TestTLSACLSingle runs package single over TLS with a client certificate,
// as an ACL user limited to redistest.LockACL, with fencing and the restart
// quarantine on: the rule suffices, and every part of it but +pttl is needed
// (locktest.TLSACL).
func TestSingleTLSACLSingle(t *testing.T) { locktest.TLSACL(t, singleKind) }
