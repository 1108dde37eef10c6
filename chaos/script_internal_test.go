package chaos

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestScriptsStartEmpty: every run gets a fresh script, and a check whose
// play recorded nothing fails its expectation instead of passing: what a
// play leaves for its check is in typed fields, and a missing one is seen.
// Only the scenarios whose checks need nothing from their play (1, 11
// and 13) pass on common checks alone.
func TestScriptsStartEmpty(t *testing.T) {
	stateless := map[string]bool{"1": true, "11": true, "13": true}
	for _, parent := range Scenarios() {
		for _, sc := range parent.Runs() {
			require.NotNil(t, sc.script, sc.Name)
			s := sc.script()
			assert.NotSame(t, s, sc.script(), "%s: a fresh script per run", sc.Name)
			v := &verdict{res: &Result{}}
			s.check(&run{sc: sc}, v)
			assert.Equal(t, stateless[sc.Name], len(v.fails) == 0, "%s: %v", sc.Name, v.fails)
		}
	}
}
