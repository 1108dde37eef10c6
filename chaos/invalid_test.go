package chaos_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/redfence/redfence/chaos"
	"github.com/redfence/redfence/redlock"
)

// TestInvalidArgumentShape: chaos's invalid-argument errors are the
// module's one shape (a *redlock.ConfigError with Pkg "chaos", wrapping
// redlock.ErrInvalid) and still wrap chaos's own sentinels, with the
// sentinel's text first.
func TestInvalidArgumentShape(t *testing.T) {
	_, scenarioErr := chaos.FindScenarios("no such")
	_, workloadErr := (&chaos.Workload{}).Run(context.Background(), chaos.NewHistory())
	_, historyErr := chaos.ReadHistoryJSON(strings.NewReader("{"))
	artifactsErr := chaos.WriteArtifacts(t.TempDir(), 1, nil, time.Second)
	for name, tc := range map[string]struct {
		err      error
		sentinel error
	}{
		"FindScenarios":   {scenarioErr, chaos.ErrInvalidScenario},
		"Workload.Run":    {workloadErr, chaos.ErrInvalidWorkload},
		"ReadHistoryJSON": {historyErr, chaos.ErrInvalidHistory},
		"WriteArtifacts":  {artifactsErr, chaos.ErrInvalidHistory},
	} {
		assert.ErrorIs(t, tc.err, redlock.ErrInvalid, name)
		assert.ErrorIs(t, tc.err, tc.sentinel, name)
		var ce *redlock.ConfigError
		if assert.True(t, errors.As(tc.err, &ce), name) {
			assert.Equal(t, "chaos", ce.Pkg, name)
		}
		assert.True(t, strings.HasPrefix(tc.err.Error(), tc.sentinel.Error()+": "), "%s: %v", name, tc.err)
	}
	assert.ErrorIs(t, historyErr, io.ErrUnexpectedEOF, "the JSON decoder's error is wrapped too")
}
