package nilcheck

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
)

func TestIsNil(t *testing.T) {
	var rc *redis.Client
	var uc redis.UniversalClient = rc
	var f func()
	var m map[string]int
	assert.True(t, IsNil(nil))
	assert.True(t, IsNil(uc), "a typed nil in an interface")
	assert.True(t, IsNil(f))
	assert.True(t, IsNil(m))
	assert.False(t, IsNil(0))
	assert.False(t, IsNil(""))
	assert.False(t, IsNil(redis.NewClient(&redis.Options{})))
}
