package chaos_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/redfence/redfence/chaos"
)

func TestNewResult(t *testing.T) {
	safe := []chaos.Op{
		acq(0, 0, 0, 10, 100, 1), write(1, 0, 11, 12, chaos.OK, 1, "a"), rel(2, 0, 0, 20, 30),
		acq(3, 1, 15, 40, 200, 2), write(4, 1, 41, 42, chaos.OK, 2, "b"),
	}
	st := chaos.ComputeStats(safe, 0, 100*ms, time.Second, 50*ms)
	r := chaos.NewResult(safe, st, 5*time.Second)
	assert.Equal(t, 2, r.Grants)
	assert.Equal(t, 2, r.FencedAccepted)
	assert.Zero(t, r.DoubleGrants)
	assert.Equal(t, "ok", r.Linearizable)
	assert.True(t, r.Pass)
	assert.InDelta(t, 1.0, r.Availability, 1e-9, "the run is shorter than a window")

	double := append(safe[:2:2], acq(2, 1, 15, 40, 200, 2))
	r = chaos.NewResult(double, nil, 5*time.Second)
	assert.Equal(t, 1, r.DoubleGrants)
	assert.Equal(t, "violation", r.Linearizable)
	assert.False(t, r.Pass)
	assert.Zero(t, r.Grants, "no stats given")
}
