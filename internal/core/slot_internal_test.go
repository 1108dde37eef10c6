package core

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Slot is Redis Cluster's key slot: CRC16/XMODEM of the hash tag (the
// values are the cluster specification's and CLUSTER KEYSLOT's).
func TestSlot(t *testing.T) {
	assert.Equal(t, 0x31C3, Slot("123456789"), "the specification's CRC16 check value")
	assert.Equal(t, 12182, Slot("foo"))
	assert.Equal(t, 5061, Slot("bar"))
	assert.Equal(t, Slot("user1000"), Slot("{user1000}.following"))
	assert.Equal(t, Slot("{user1000}.following"), Slot("{user1000}.followers"))
	assert.Equal(t, Slot("{}x"), Slot("{}x"), "an empty tag hashes the whole key")
	assert.NotEqual(t, Slot("x"), Slot("{}x"))
	assert.Equal(t, Slot("bar"), Slot("foo{bar}{zap}"), "the first tag counts")
}
