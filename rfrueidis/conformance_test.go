package rfrueidis

import (
	"testing"

	"github.com/redfence/redfence/internal/locktest"
)

// The conformance suite (with its wake-up tests), the lock shapes, the
// fencing tests across lost writes and the restart quarantine, over rueidis:
// the same tests redlock and single run over go-redis.

func TestRedlockConformance(t *testing.T)      { locktest.Run(t, redlockKind(5).Env()) }
func TestRedlockConformanceMulti(t *testing.T) { locktest.Run(t, redlockKind(5).MultiEnv()) }
func TestRedlockMultiKey(t *testing.T)         { locktest.RunMultiKey(t, redlockKind(5)) }
func TestRedlockSemaphore(t *testing.T)        { locktest.RunSemaphore(t, redlockKind(5)) }
func TestRedlockRWMutex(t *testing.T)          { locktest.RunRWMutex(t, redlockKind(5)) }
func TestRedlockFencingTokens(t *testing.T)    { locktest.FencingTokens(t, redlockKind(5)) }
func TestRedlockFencingSharedNodeRestartedEmpty(t *testing.T) {
	locktest.FencingSharedNodeRestartedEmpty(t, redlockKind(5))
}
func TestRedlockFencingAllNodesRestartedEmpty(t *testing.T) {
	locktest.FencingAllNodesRestartedEmpty(t, redlockKind(5))
}
func TestRedlockFencingSharedFenceKeyLost(t *testing.T) {
	locktest.FencingSharedFenceKeyLost(t, redlockKind(5))
}
func TestRedlockRestartQuarantine(t *testing.T) { locktest.RestartQuarantine(t, redlockKind(5)) }
func TestRedlockQuarantineNewAndFlushedNodes(t *testing.T) {
	locktest.QuarantineNewAndFlushedNodes(t, redlockKind(3))
}
func TestRedlockTLSACL(t *testing.T) { locktest.TLSACL(t, redlockKind(3)) }

func TestSingleConformance(t *testing.T)      { locktest.Run(t, singleKind.Env()) }
func TestSingleConformanceMulti(t *testing.T) { locktest.Run(t, singleKind.MultiEnv()) }
func TestSingleMultiKey(t *testing.T)         { locktest.RunMultiKey(t, singleKind) }
func TestSingleSemaphore(t *testing.T)        { locktest.RunSemaphore(t, singleKind) }
func TestSingleRWMutex(t *testing.T)          { locktest.RunRWMutex(t, singleKind) }
func TestSingleFencingTokens(t *testing.T)    { locktest.FencingTokens(t, singleKind) }
func TestSingleTLSACL(t *testing.T)           { locktest.TLSACL(t, singleKind) }
