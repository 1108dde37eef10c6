package redlock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/internal/quorum"
	"github.com/redfence/redfence/redisconn"
)

// NodeCheck reports what in one node's configuration still puts the lock or
// its fencing tokens at risk: a lost lock key lets a second holder in unless
// the restart quarantine covers the loss; fence counters may be lost (the
// clock floor keeps tokens increasing), but not a fence hash evicted right
// after its write, and not a node clock far from true time.
type NodeCheck struct {
	Index           int
	Addr            string
	Role            string // "master" or "slave", from INFO replication
	AppendOnly      string // CONFIG GET appendonly
	AppendFsync     string // CONFIG GET appendfsync
	MaxmemoryPolicy string // CONFIG GET maxmemory-policy
	Maxmemory       int64  // CONFIG GET maxmemory, bytes; 0 means no limit
	Replicas        int    // connected_slaves, from INFO replication
	// ReplicaLag is the longest INFO replication lag (whole seconds) among
	// the online replicas; 0 without any.
	ReplicaLag     time.Duration
	OnlineReplicas int // replicas in state online: those WAIT counts (WithReplicaAcks)
	// ClockOffset is the node's clock (TIME) minus this process's at the
	// middle of the round trip, exact to within half of it.
	ClockOffset time.Duration
	// RunID is the server's run id, "" for a Cluster or when INFO is not
	// allowed; two nodes with one run id are one server.
	RunID string
	// Risks lists, in words, each way the node's configuration lets a second
	// holder in or a fencing token repeat, and what to do; empty for none.
	Risks []string
	// Err is set when the node could not be checked (unreachable, CONFIG
	// disabled or renamed, as on many managed services) or refused scripts
	// (the user lacks EVALSHA or EVAL: leases could not be extended or released).
	Err error
}

// CheckNodes reports, for each node, what in its configuration puts locks
// at risk (Risks: no fsync on every write while the quarantine is off, an
// eviction policy, a replica role or asynchronous replicas, a clock over
// 500ms off, a run id seen twice) and Err for a node that could not be
// checked or refuses scripts. Nodes are asked in parallel, each within the
// node timeout (at least 100ms). See docs/fencing.md, Assumptions.
func (e *Client) CheckNodes(ctx context.Context) []NodeCheck {
	out := make([]NodeCheck, len(e.nodes))
	leave, err := e.enter(ctx)
	if err != nil { // err for every node
		for i, n := range e.nodes {
			out[i] = NodeCheck{Index: i, Addr: n.addr, Err: err}
		}
		return out
	}
	defer leave()
	r := quorum.Start(ctx, len(e.nodes), len(e.nodes), max(e.cfg.nodeTimeout, maxDefaultNodeTimeout), &e.tracker,
		func(ctx context.Context, i int) (NodeCheck, error) {
			return checkNode(ctx, e.nodes[i].conn, e.cfg.quarantine, e.cfg.replicaAcks)
		})
	r.Wait()
	for _, rep := range r.Replies() {
		c := rep.Value
		c.Index, c.Addr, c.Err = rep.Index, e.nodes[rep.Index].addr, rep.Err
		if c.Err != nil {
			c.Risks = nil
		}
		out[rep.Index] = c
	}
	seen := make(map[string]int, len(out))
	for i := range out {
		c := &out[i]
		if c.Err == nil && c.RunID != "" {
			if j, ok := seen[c.RunID]; ok {
				c.Risks = append(c.Risks, fmt.Sprintf("the same Redis server as node %d (%s), run id %s: it votes twice (give each server once)", j, out[j].Addr, c.RunID))
			} else {
				seen[c.RunID] = i
			}
		}
		for _, risk := range c.Risks {
			e.tel.log.WarnContext(ctx, "redfence: node configuration is a risk", "node", c.Addr, "risk", risk)
		}
	}
	return out
}

// checkNode checks c, asked for acks replica acknowledgements (0: off).
func checkNode(ctx context.Context, c redisconn.Conn, quarantine time.Duration, acks int) (NodeCheck, error) {
	if c.Info().Topology != redisconn.Cluster {
		return checkOne(ctx, c, quarantine, acks)
	}
	// A Cluster: a risk on any primary is a risk for the keys in its slots.
	var (
		mu    sync.Mutex
		out   NodeCheck
		first = true
	)
	err := c.EachPrimary(ctx, func(ctx context.Context, shard redisconn.Conn) error {
		addr := shard.Info().Addr
		nc, err := checkOne(ctx, shard, quarantine, acks)
		if err != nil {
			return fmt.Errorf("primary %s: %w", addr, err)
		}
		mu.Lock()
		defer mu.Unlock()
		risks := out.Risks
		if first || len(nc.Risks) > 0 && len(risks) == 0 {
			out = nc // report the settings of a risky primary, if any
			first = false
		}
		out.Risks, out.RunID = risks, ""
		for _, r := range nc.Risks {
			out.Risks = append(out.Risks, "primary "+addr+": "+r)
		}
		return nil
	})
	return out, err
}

func checkOne(ctx context.Context, c redisconn.Conn, quarantine time.Duration, acks int) (NodeCheck, error) {
	id, err := runScript(ctx, c, probeScript, nil).Text()
	if err != nil {
		return NodeCheck{}, fmt.Errorf("script (EVALSHA, then EVAL): %w (a lease's extend and release are scripts)", err)
	}
	nc := NodeCheck{RunID: id}
	var mm string
	for _, s := range []struct {
		name string
		v    *string
	}{{"appendonly", &nc.AppendOnly}, {"appendfsync", &nc.AppendFsync}, {"maxmemory-policy", &nc.MaxmemoryPolicy}, {"maxmemory", &mm}} {
		cmd := redis.NewCmd(ctx, "config", "get", s.name)
		if err := c.Process(ctx, cmd); err != nil {
			return nc, fmt.Errorf("CONFIG GET %s: %w", s.name, err)
		}
		var ok bool
		if *s.v, ok = configValue(cmd.Val(), s.name); !ok {
			return nc, fmt.Errorf("CONFIG GET %s: no such setting", s.name)
		}
	}
	if nc.Maxmemory, err = strconv.ParseInt(mm, 10, 64); err != nil {
		return nc, fmt.Errorf("CONFIG GET maxmemory: %q: %w", mm, err)
	}
	infoCmd := redis.NewCmd(ctx, "info", "replication")
	_ = c.Process(ctx, infoCmd)
	info, err := infoCmd.Text()
	if err != nil {
		return nc, fmt.Errorf("INFO replication: %w", err)
	}
	fields := infoFields(info)
	nc.Role = fields["role"]
	nc.Replicas, _ = strconv.Atoi(fields["connected_slaves"])
	for name, v := range fields {
		if online, lag, ok := replicaLine(name, v); ok && online {
			nc.OnlineReplicas++
			nc.ReplicaLag = max(nc.ReplicaLag, lag)
		}
	}
	sent := time.Now()
	timeCmd := redis.NewCmd(ctx, "time")
	_ = c.Process(ctx, timeCmd)
	now, err := serverTime(timeCmd)
	if err != nil {
		return nc, fmt.Errorf("TIME: %w", err)
	}
	rtt := time.Since(sent)
	nc.ClockOffset = now.Sub(sent.Add(rtt / 2)).Round(time.Millisecond)
	nc.Risks = risks(nc, quarantine, acks, rtt)
	return nc, nil
}

// risks lists what is still a risk (docs/fencing.md, Assumptions): lost lock
// keys unless the quarantine covers them, not lost fence counters.
func risks(c NodeCheck, quarantine time.Duration, acks int, rtt time.Duration) []string {
	var r []string
	if quarantine == 0 {
		if c.AppendOnly != "yes" {
			r = append(r, "appendonly is off: a restart loses lock keys, so a second holder can be granted while the first still holds "+
				"(turn on the restart quarantine, or appendonly yes with appendfsync always; fencing tokens still increase)")
		} else if c.AppendFsync != "always" {
			r = append(r, fmt.Sprintf("appendfsync is %q: a crash can lose the last second of lock keys, so a second holder can be granted "+
				"(turn on the restart quarantine, or use always; fencing tokens still increase)", c.AppendFsync))
		}
	}
	if c.Maxmemory > 0 && (strings.HasPrefix(c.MaxmemoryPolicy, "allkeys-") || strings.HasPrefix(c.MaxmemoryPolicy, "volatile-")) {
		r = append(r, fmt.Sprintf("maxmemory-policy %s can evict lock keys before their TTL (a second holder) and a fence hash "+
			"just written (a repeated token) (use noeviction)", c.MaxmemoryPolicy))
	}
	if c.Role != "" && c.Role != "master" {
		r = append(r, fmt.Sprintf("the node is a replica (role %s): lock writes will fail", c.Role))
	}
	switch {
	case acks > 0 && c.Role == "master" && c.OnlineReplicas < acks:
		r = append(r, fmt.Sprintf("replica acknowledgement asks for %d replica(s) but %d are online: every acquire and extend fails "+
			"until enough replicas are back (or lower WithReplicaAcks)", acks, c.OnlineReplicas))
	case acks > 0 && c.Replicas > acks:
		r = append(r, fmt.Sprintf("replica acknowledgement asks for %d of %d replicas: a failover to one that did not acknowledge "+
			"can still lose a lock key (Sentinel promotes the most up-to-date replica it can reach; ask for all of them to close this)", acks, c.Replicas))
	case acks > 0:
		// Every replica acknowledged each lease write.
	case c.Replicas > 0:
		r = append(r, fmt.Sprintf("%d asynchronous replica(s): a failover can lose a lock key just written, so a second holder can be granted "+
			"(WithReplicaAcks narrows this; fencing tokens still increase if the failover takes over %v)", c.Replicas, 2*clockBound))
	}
	if off := c.ClockOffset.Abs() - rtt/2; off > clockBound/2 {
		r = append(r, fmt.Sprintf("the node's clock is %v off this client's: fencing tokens assume every node's clock within %v of true time (use NTP)",
			c.ClockOffset, clockBound))
	}
	return r
}

// infoFields returns the "name:value" lines of an INFO reply, by name.
func infoFields(info string) map[string]string {
	fields := make(map[string]string)
	for _, line := range strings.Split(info, "\n") {
		if name, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[name] = v
		}
	}
	return fields
}

// replicaLine reads one "slaveN:ip=...,port=...,state=online,offset=...,lag=0"
// line of INFO replication, cut at its colon: whether the replica is online,
// and its lag; ok is false for another line.
func replicaLine(name, fields string) (online bool, lag time.Duration, ok bool) {
	if !strings.HasPrefix(name, "slave") || strings.Trim(name[len("slave"):], "0123456789") != "" || name == "slave" {
		return false, 0, false
	}
	for _, f := range strings.Split(fields, ",") {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "state":
			online = v == "online"
		case "lag":
			if s, err := strconv.Atoi(v); err == nil {
				lag = time.Duration(s) * time.Second
			}
		}
	}
	return online, lag, true
}

func configValue(reply any, name string) (string, bool) {
	switch r := reply.(type) {
	case []any:
		for i := 0; i+1 < len(r); i += 2 {
			if k, _ := r[i].(string); k == name {
				v, ok := r[i+1].(string)
				return v, ok
			}
		}
	case map[any]any:
		v, ok := r[name].(string)
		return v, ok
	}
	return "", false
}

// serverTime reads TIME's reply: seconds and microseconds, as strings or integers.
func serverTime(cmd *redis.Cmd) (time.Time, error) {
	n, err := cmd.Int64Slice()
	if err == nil && len(n) != 2 {
		err = fmt.Errorf("%d values, want 2", len(n))
	}
	if err != nil {
		return time.Time{}, err
	}
	return time.Unix(n[0], n[1]*1000), nil
}
