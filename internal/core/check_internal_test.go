package core

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// What CheckNodes still calls a risk: lost lock keys unless the quarantine
// covers them, eviction, replicas, far clocks; not lost counters as such.
func TestRisks(t *testing.T) {
	safe := NodeCheck{Role: "master", AppendOnly: "yes", AppendFsync: "always", MaxmemoryPolicy: "noeviction"}
	noPersist := safe
	noPersist.AppendOnly = "no"
	everysec := safe
	everysec.AppendFsync = "everysec"
	evict := safe
	evict.Maxmemory, evict.MaxmemoryPolicy = 1<<20, "volatile-lru"
	replicas := safe
	replicas.Replicas = 2
	ahead, behind := safe, safe
	ahead.ClockOffset, behind.ClockOffset = 2*time.Second, -700*time.Millisecond
	for _, tc := range []struct {
		name       string
		c          NodeCheck
		quarantine time.Duration
		rtt        time.Duration
		want       string // "" for no risk
	}{
		{"safe", safe, 0, 0, ""},
		{"no persistence", noPersist, 0, 0, "appendonly is off"},
		{"no persistence, quarantine", noPersist, time.Minute, 0, ""},
		{"everysec", everysec, 0, 0, "appendfsync is \"everysec\""},
		{"everysec, quarantine", everysec, time.Minute, 0, ""},
		{"eviction", evict, time.Minute, 0, "can evict lock keys"},
		{"replicas", replicas, time.Minute, 0, "2 asynchronous replica(s)"},
		{"clock ahead", ahead, 0, 0, "clock is 2s off"},
		{"clock behind", behind, 0, 0, "clock is -700ms off"},
		{"clock within the round trip", behind, 0, time.Second, ""},
	} {
		r := risks(tc.c, tc.quarantine, tc.rtt)
		if tc.want == "" {
			assert.Empty(t, r, tc.name)
			continue
		}
		if assert.Len(t, r, 1, tc.name) {
			assert.True(t, strings.Contains(r[0], tc.want), "%s: %q", tc.name, r[0])
		}
	}
}
