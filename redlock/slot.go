package redlock

import (
	"fmt"

	"github.com/redfence/redfence/internal/keys"
	"github.com/redfence/redfence/redisconn"
)

const clusterSlots = 16384

// hashTag returns the part of k that Redis Cluster and go-redis's Ring hash.
func hashTag(k string) string {
	if t, ok := keys.Tag(k); ok {
		return t
	}
	return k
}

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

// colocation is why a lock's keys must reach one server, and how.
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

// checkColocated refuses keys that a Cluster or Ring client would send to
// different servers: one script per node must see every key.
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
