package redlock

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
	online := replicas
	online.OnlineReplicas = 2
	oneOnline := replicas
	oneOnline.OnlineReplicas = 1
	ahead, behind := safe, safe
	ahead.ClockOffset, behind.ClockOffset = 2*time.Second, -700*time.Millisecond
	for _, tc := range []struct {
		name       string
		c          NodeCheck
		quarantine time.Duration
		acks       int
		rtt        time.Duration
		want       string // "" for no risk
	}{
		{"safe", safe, 0, 0, 0, ""},
		{"no persistence", noPersist, 0, 0, 0, "appendonly is off"},
		{"no persistence, quarantine", noPersist, time.Minute, 0, 0, ""},
		{"everysec", everysec, 0, 0, 0, "appendfsync is \"everysec\""},
		{"everysec, quarantine", everysec, time.Minute, 0, 0, ""},
		{"eviction", evict, time.Minute, 0, 0, "can evict lock keys"},
		{"replicas", replicas, time.Minute, 0, 0, "2 asynchronous replica(s)"},
		{"acks of every online replica", online, time.Minute, 2, 0, ""},
		{"acks of fewer than the replicas", online, time.Minute, 1, 0, "asks for 1 of 2 replicas"},
		{"acks of more than are online", oneOnline, time.Minute, 2, 0, "asks for 2 replica(s) but 1 are online"},
		{"clock ahead", ahead, 0, 0, 0, "clock is 2s off"},
		{"clock behind", behind, 0, 0, 0, "clock is -700ms off"},
		{"clock within the round trip", behind, 0, 0, time.Second, ""},
	} {
		r := risks(tc.c, tc.quarantine, tc.acks, tc.rtt)
		if tc.want == "" {
			assert.Empty(t, r, tc.name)
			continue
		}
		if assert.Len(t, r, 1, tc.name) {
			assert.True(t, strings.Contains(r[0], tc.want), "%s: %q", tc.name, r[0])
		}
	}
}

func TestReplicaLine(t *testing.T) {
	online, lag, ok := replicaLine("slave0", "ip=127.0.0.1,port=7102,state=online,offset=403,lag=3")
	assert.True(t, ok)
	assert.True(t, online)
	assert.Equal(t, 3*time.Second, lag)
	online, _, ok = replicaLine("slave12", "ip=127.0.0.1,port=7102,state=wait_bgsave,offset=0,lag=0")
	assert.True(t, ok)
	assert.False(t, online)
	for _, line := range []string{"slave_read_only:1", "slaves:", "connected_slaves:2", "role:master"} {
		name, fields, _ := strings.Cut(line, ":")
		_, _, ok = replicaLine(name, fields)
		assert.False(t, ok, line)
	}
}
