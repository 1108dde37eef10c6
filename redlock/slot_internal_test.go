package redlock

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Slot is Redis Cluster's key slot: CRC16/XMODEM of the hash tag (the
// values are the cluster specification's and CLUSTER KEYSLOT's).
func TestSlot(t *testing.T) {
	assert.Equal(t, 0x31C3, slotOf("123456789"), "the specification's CRC16 check value")
	assert.Equal(t, 12182, slotOf("foo"))
	assert.Equal(t, 5061, slotOf("bar"))
	assert.Equal(t, slotOf("user1000"), slotOf("{user1000}.following"))
	assert.Equal(t, slotOf("{user1000}.following"), slotOf("{user1000}.followers"))
	assert.Equal(t, slotOf("{}x"), slotOf("{}x"), "an empty tag hashes the whole key")
	assert.NotEqual(t, slotOf("x"), slotOf("{}x"))
	assert.Equal(t, slotOf("bar"), slotOf("foo{bar}{zap}"), "the first tag counts")
}
