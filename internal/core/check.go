package core

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/internal/quorum"
)

// NodeCheck reports whether one node can lose writes it acknowledged: a lost
// lock key lets a second holder in, and a lost fence counter breaks the
// fencing guarantee.
type NodeCheck struct {
	Index           int
	Addr            string
	Role            string // "master" or "slave", from INFO replication
	AppendOnly      string // CONFIG GET appendonly
	AppendFsync     string // CONFIG GET appendfsync
	MaxmemoryPolicy string // CONFIG GET maxmemory-policy
	Maxmemory       int64  // CONFIG GET maxmemory, bytes; 0 means no limit
	// Risks lists, in words, each way this node can lose acknowledged writes
	// under its current configuration. Empty when none was found.
	Risks []string
	// Err is set when the node could not be checked (unreachable, or CONFIG
	// disabled by ACL or renamed, as on many managed services).
	Err error
}

// Safe reports whether the node was checked and no risk was found.
func (c NodeCheck) Safe() bool { return c.Err == nil && len(c.Risks) == 0 }

// CheckNodes inspects every node's persistence, eviction and replication
// settings, in parallel, each bounded by the per-node timeout of the
// engine's default configuration.
func (e *Engine) CheckNodes(ctx context.Context) []NodeCheck {
	timeout := max(e.timeout(), MaxDefaultNodeTimeout)
	r := quorum.Start(ctx, len(e.nodes), len(e.nodes), timeout, &e.tracker,
		func(ctx context.Context, i int) (NodeCheck, error) {
			return checkNode(ctx, e.nodes[i].Client)
		})
	r.Wait()
	out := make([]NodeCheck, len(e.nodes))
	for _, rep := range r.Replies() {
		c := rep.Value
		c.Index, c.Addr, c.Err = rep.Index, e.nodes[rep.Index].Addr, rep.Err
		if c.Err != nil {
			c.Risks = nil
		}
		out[rep.Index] = c
		for _, risk := range c.Risks {
			e.tel.log.WarnContext(ctx, "redfence: node can lose acknowledged writes", "node", c.Addr, "risk", risk)
		}
	}
	return out
}

func checkNode(ctx context.Context, c redis.UniversalClient) (NodeCheck, error) {
	cc, ok := c.(*redis.ClusterClient)
	if !ok {
		return checkOne(ctx, c)
	}
	// A Cluster: check every primary; a risk on any of them is a risk for the
	// keys in its slots.
	var (
		mu    sync.Mutex
		out   NodeCheck
		first = true
	)
	err := cc.ForEachMaster(ctx, func(ctx context.Context, shard *redis.Client) error {
		nc, err := checkOne(ctx, shard)
		if err != nil {
			return fmt.Errorf("primary %s: %w", shard.Options().Addr, err)
		}
		mu.Lock()
		defer mu.Unlock()
		risks := out.Risks
		if first || len(nc.Risks) > 0 && len(risks) == 0 {
			out = nc // report the settings of a risky primary, if any
			first = false
		}
		out.Risks = risks
		for _, r := range nc.Risks {
			out.Risks = append(out.Risks, "primary "+shard.Options().Addr+": "+r)
		}
		return nil
	})
	return out, err
}

func checkOne(ctx context.Context, c redis.UniversalClient) (NodeCheck, error) {
	var nc NodeCheck
	get := func(name string) (string, error) {
		m, err := c.ConfigGet(ctx, name).Result()
		if err != nil {
			return "", fmt.Errorf("CONFIG GET %s: %w", name, err)
		}
		v, ok := m[name]
		if !ok {
			return "", fmt.Errorf("CONFIG GET %s: no such setting", name)
		}
		return v, nil
	}
	var err error
	if nc.AppendOnly, err = get("appendonly"); err != nil {
		return nc, err
	}
	if nc.AppendFsync, err = get("appendfsync"); err != nil {
		return nc, err
	}
	if nc.MaxmemoryPolicy, err = get("maxmemory-policy"); err != nil {
		return nc, err
	}
	mm, err := get("maxmemory")
	if err != nil {
		return nc, err
	}
	if nc.Maxmemory, err = strconv.ParseInt(mm, 10, 64); err != nil {
		return nc, fmt.Errorf("CONFIG GET maxmemory: %q: %w", mm, err)
	}
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return nc, fmt.Errorf("INFO replication: %w", err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "role:"); ok {
			nc.Role = v
		}
	}
	nc.Risks = risks(nc)
	return nc, nil
}

func risks(c NodeCheck) []string {
	var r []string
	if c.AppendOnly != "yes" {
		r = append(r, "appendonly is off: a restart loses every key written since the last RDB snapshot, if any")
	} else if c.AppendFsync != "always" {
		r = append(r, fmt.Sprintf("appendfsync is %q: a crash can lose the last second or so of acknowledged writes (use always)", c.AppendFsync))
	}
	if c.Maxmemory > 0 {
		switch {
		case strings.HasPrefix(c.MaxmemoryPolicy, "allkeys-"):
			r = append(r, fmt.Sprintf("maxmemory-policy %s can evict any key, fence counters and lock keys included (use noeviction)", c.MaxmemoryPolicy))
		case strings.HasPrefix(c.MaxmemoryPolicy, "volatile-"):
			r = append(r, fmt.Sprintf("maxmemory-policy %s can evict lock keys before their TTL (use noeviction)", c.MaxmemoryPolicy))
		}
	}
	if c.Role != "" && c.Role != "master" {
		r = append(r, fmt.Sprintf("the node is a replica (role %s): lock writes will fail", c.Role))
	}
	return r
}
