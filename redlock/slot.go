package redlock

import (
	"fmt"

	"github.com/redfence/redfence/internal/keys"
	"github.com/redfence/redfence/redisconn"
)

// clusterSlots is the number of Redis Cluster hash slots.
const clusterSlots = 16384

// hashTag returns the part of k that Redis Cluster and go-redis's Ring hash:
// its hash tag when it has one, else k itself.
func hashTag(k string) string {
	if t, ok := keys.Tag(k); ok {
		return t
	}
	return k
}

// slotOf returns k's Redis Cluster hash slot: CRC16 (XMODEM) of its hash tag,
// modulo 16384, as CLUSTER KEYSLOT computes it.
func slotOf(k string) int {
	var crc uint16
	for _, b := range []byte(hashTag(k)) {
		crc ^= uint16(b) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % clusterSlots
}

// colocation is what a refusal by checkColocated says of the lock: why
// its keys must reach one server, and how to make them.
type colocation struct{ why, fix string }

var (
	multiColocation = colocation{
		why: "a multi-key lock runs one script per node over all its keys",
		fix: "give the keys a common hash tag, such as {orders}:a and {orders}:b",
	}
	rwColocation = colocation{
		why: "a read-write lock keeps its readers' set and writer-intent marker beside its key and runs one script per node over all three",
		fix: "give the key a hash tag, such as {catalog} or {catalog}:lock, or leave '}' out of it (the lock then puts it in braces itself)",
	}
)

// checkColocated refuses a lock whose keys a node's client would send to
// different servers: over a Cluster client every key must hash to one
// slot, over a Ring every key must have the same hash tag (the Ring picks a
// shard by it). One script per node must see every key, and a plain lock
// on any of them must reach the same server. c says which lock it is.
func checkColocated(pkg string, nodes []node, keys []string, c colocation) error {
	for i, n := range nodes {
		switch n.conn.Info().Topology {
		case redisconn.Cluster:
			for _, k := range keys[1:] {
				if slotOf(k) != slotOf(keys[0]) {
					return &ConfigError{Pkg: pkg, Field: "keys", Msg: fmt.Sprintf("client %d is a Redis Cluster client and keys %q (slot %d) and %q (slot %d) hash to different slots: %s, which Cluster allows only within one slot; %s",
						i, keys[0], slotOf(keys[0]), k, slotOf(k), c.why, c.fix)}
				}
			}
		case redisconn.Ring:
			for _, k := range keys[1:] {
				if hashTag(k) != hashTag(keys[0]) {
					return &ConfigError{Pkg: pkg, Field: "keys", Msg: fmt.Sprintf("client %d is a Ring and keys %q and %q have different hash tags, so the Ring may place them on different shards: %s; %s",
						i, keys[0], k, c.why, c.fix)}
				}
			}
		}
	}
	return nil
}
