package redlock

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestQuarantineLeft checks Inspect's reading of a node's marker, and Left's
// rule, against the acquire script's: a node vouched for in its current run
// votes; without a marker it sits out a whole period from first use;
// otherwise max(ready_at - now, q - uptime).
func TestQuarantineLeft(t *testing.T) {
	const run = "abc123"
	q := 60 * time.Second
	tests := []struct {
		name             string
		readyAt, vouched string
		uptime, now      int64
		q                time.Duration
		want             time.Duration
		marked           bool
	}{
		{"vouched in this run", "1000", run, 5, 2000, q, 0, true},
		{"vouched, quarantine off", "", run, 5, 2000, 0, 0, false},
		{"vouched in an earlier run", "1000", "old", 3600, 2000, q, 0, true},
		{"off", "", "", 5, 2000, 0, 0, false},
		{"no marker", "", "", 3600, 2000, q, q, false},
		{"ready_at ahead", "61000", "", 3600, 1000, q, 60 * time.Second, true},
		{"ready_at just ahead", "1001", "", 3600, 1000, q, time.Millisecond, true},
		{"recent restart", "1000", "", 10, 5000, q, 50 * time.Second, true},
		{"both passed", "1000", "", 60, 5000, q, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := markerState(tt.readyAt, tt.vouched, run, tt.uptime, tt.now)
			require.NoError(t, err)
			assert.Equal(t, tt.marked, got.Marked)
			assert.Equal(t, tt.vouched == run, got.Vouched)
			assert.Equal(t, tt.want, got.left(tt.q))
		})
	}
	_, err := markerState("soon", "", run, 60, 5000)
	assert.ErrorContains(t, err, `ready_at "soon" is not a number`)
}

func TestParseServerInfo(t *testing.T) {
	id, up, err := parseServerInfo("# Server\r\nredis_version:7.0.15\r\nrun_id:deadbeef\r\nuptime_in_seconds:42\r\n")
	require.NoError(t, err)
	assert.Equal(t, "deadbeef", id)
	assert.Equal(t, int64(42), up)
	_, _, err = parseServerInfo("# Server\r\nrun_id:x\r\n")
	assert.ErrorContains(t, err, "uptime_in_seconds")
	_, _, err = parseServerInfo("run_id:x\r\nuptime_in_seconds:many\r\n")
	assert.ErrorContains(t, err, `"many"`)
}
