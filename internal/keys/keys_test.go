package keys

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestLayout checks the table of docs/design.md, Keys: each side key is in
// its lock key's Cluster slot, and names its owner.
func TestLayout(t *testing.T) {
	for _, tc := range []struct{ key, fence, readers, intent, queue string }{
		{"job", "{job}:fence", "{job}:rw:readers", "{job}:rw:intent", "{job}:queue"},
		{"lock:{user:1}job", "lock:{user:1}job:fence", "lock:{user:1}job:rw:readers", "lock:{user:1}job:rw:intent", "lock:{user:1}job:queue"},
		{"a}b", "a}b:fence", "a}b:rw:readers", "a}b:rw:intent", "a}b:queue"}, // no usable tag: outside a Cluster only
		{"{}x", "{}x:fence", "{}x:rw:readers", "{}x:rw:intent", "{}x:queue"}, // an empty tag is none, and "}" forbids wrapping
	} {
		assert.Equal(t, tc.fence, Fence(tc.key))
		assert.Equal(t, tc.readers, ReadersOf(tc.key))
		assert.Equal(t, tc.intent, Intent(tc.key))
		assert.Equal(t, tc.queue, Queue(tc.key))
		for _, side := range []string{tc.fence, tc.readers, tc.intent, tc.queue} {
			owner, what := Owner(side)
			assert.Equal(t, tc.key, owner, "%q", side)
			assert.NotEmpty(t, what)
		}
	}
	owner, what := Owner("{x}:fence")
	assert.Equal(t, "x", owner, "{x}:fence is x's, not {x}'s")
	assert.Equal(t, "the fence hash of the lock key", what)
	for _, k := range []string{"job", ":fence", "x:fence:y", "{a}:queue2"} {
		_, what := Owner(k)
		assert.Empty(t, what, "%q is no side key", k)
	}
	tag, ok := Tag("a{b}c{d}")
	assert.True(t, ok)
	assert.Equal(t, "b", tag)
	_, ok = Tag("a{}b")
	assert.False(t, ok)
}
