package redisconn

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
)

// clientRetries describes the retries of c that can outlast a per-node
// timeout, or "": go-redis retries within the command's context, so a
// refused connection ends at redfence's deadline as a timeout.
func clientRetries(c redis.UniversalClient) string {
	var cmd, dial int
	switch v := c.(type) {
	case *redis.Client:
		cmd, dial = v.Options().MaxRetries, v.Options().DialerRetries
	case *redis.ClusterClient:
		cmd, dial = v.Options().MaxRetries, v.Options().DialerRetries
	default:
		return ""
	}
	var parts []string
	if cmd > 0 {
		parts = append(parts, fmt.Sprintf("MaxRetries %d", cmd))
	}
	if dial > 1 {
		parts = append(parts, fmt.Sprintf("DialerRetries %d", dial))
	}
	if len(parts) == 0 {
		return ""
	}
	return "the client's retries (" + strings.Join(parts, ", ") + ") may have hidden the node's error: " +
		"set MaxRetries -1, DialerRetries 1 (README, Lock clients)"
}

func honorsContext(c redis.UniversalClient) bool {
	switch v := c.(type) {
	case *redis.Client:
		return v.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return v.Options().ContextTimeoutEnabled
	}
	return false
}

// addrOf returns a go-redis client's configured address(es), or "".
func addrOf(c redis.UniversalClient) string {
	var a []string
	switch v := c.(type) {
	case *redis.Client:
		if a := v.Options().Addr; a != "FailoverClient" {
			return a
		}
		return ""
	case *redis.ClusterClient:
		a = slices.Clone(v.Options().Addrs)
	case *redis.Ring:
		a = slices.Collect(maps.Values(v.Options().Addrs))
	default:
		return ""
	}
	slices.Sort(a)
	return strings.Join(a, ",")
}
