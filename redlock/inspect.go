package redlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/internal/keys"
	"github.com/redfence/redfence/internal/quorum"
	"github.com/redfence/redfence/redisconn"
)

// Inspection is what every node holds for one lock key (Client.Inspect).
type Inspection struct {
	Key      string      // the full Redis key, the Client's prefix included
	FenceKey string      // the key of its fence hash (docs/design.md, Keys)
	Nodes    []NodeState // one per node, in the Client's order
}

// NodeState is one node's answer to Inspect. When Err is set the node could
// not be read and the other fields but Index and Addr are zero.
type NodeState struct {
	Index int
	Addr  string
	// Holder is the owner value stored in the key (a Lease's Value), ""
	// when the key is free.
	Holder string
	// TTL is the held key's remaining time to live: negative when it has no
	// expiry (a key redfence did not write), 0 when the key is free.
	TTL time.Duration
	// Token is the key's fence counter: the last fencing token issued, 0
	// for none.
	Token fencing.Token
	// Quarantine is the node's restart-quarantine state, as the acquire
	// script reads it (docs/design.md, Restart quarantine).
	Quarantine struct {
		Vouched bool          // vouched for in its current run: it votes whatever the quarantine
		Marked  bool          // its marker has a ready_at; without one it is new or flushed
		ReadyIn time.Duration // ready_at minus the node's clock, when Marked
		Uptime  time.Duration // how long the server has run, in whole seconds
		Cluster bool          // a Redis Cluster, where the quarantine cannot run: nothing else was read
		Left    time.Duration // how much longer it refuses to vote under the Client's quarantine
	}
	Err error
}

// nodeQuarantine is NodeState.Quarantine's type.
type nodeQuarantine struct {
	Vouched, Marked bool
	ReadyIn, Uptime time.Duration
	Cluster         bool
	Left            time.Duration
}

// left returns how much longer the node refuses to vote under a quarantine
// of q, by the acquire script's rule (unmarked: it starts at the next acquire).
func (n nodeQuarantine) left(q time.Duration) time.Duration {
	switch {
	case n.Vouched || n.Cluster || q <= 0:
		return 0
	case !n.Marked:
		return q
	}
	return max(n.ReadyIn, q-n.Uptime, 0)
}

// Inspect reads what every node holds for the lock key (the Client's key
// prefix applied): its holder and TTL, its fence counter, and the node's
// restart-quarantine state, each node in parallel within the node timeout.
// It only reads. A node that fails has NodeState.Err set; Inspect returns
// an error for a nil ctx, an invalid key (*ConfigError), after Close
// (ErrClosed), or when ctx ends.
func (e *Client) Inspect(ctx context.Context, key string) (*Inspection, error) {
	leave, err := e.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer leave()
	if key == "" {
		return nil, &ConfigError{Pkg: e.pkg, Field: "key", Msg: "empty"}
	}
	k := e.cfg.keyPrefix + key
	if why := reservedKey(k); why != "" {
		return nil, &ConfigError{Pkg: e.pkg, Field: "key", Msg: fmt.Sprintf("%q is %s", k, why)}
	}
	ins := &Inspection{Key: k, FenceKey: keys.Fence(k), Nodes: make([]NodeState, len(e.nodes))}
	r := quorum.Start(ctx, len(e.nodes), len(e.nodes), e.cfg.nodeTimeout, &e.tracker,
		func(ctx context.Context, i int) (NodeState, error) {
			return inspectNode(ctx, e.nodes[i].conn, ins.Key, ins.FenceKey)
		})
	r.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, rep := range r.Replies() {
		s := rep.Value
		if rep.Err != nil {
			s = NodeState{Err: rep.Err}
		} else {
			s.Quarantine.Left = nodeQuarantine(s.Quarantine).left(e.cfg.quarantine)
		}
		s.Index, s.Addr = rep.Index, e.nodes[rep.Index].addr
		ins.Nodes[rep.Index] = s
	}
	return ins, nil
}

// inspectNode reads key, its TTL, its fence counter and the node's marker,
// run id, uptime and clock in one MULTI/EXEC, so that they agree.
func inspectNode(ctx context.Context, c redisconn.Conn, key, fenceKey string) (NodeState, error) {
	get := redis.NewCmd(ctx, "get", key)
	pttl := redis.NewCmd(ctx, "pttl", key)
	fence := redis.NewCmd(ctx, "hget", fenceKey, "t")
	cmds := []*redis.Cmd{get, pttl, fence}
	var marker, info, now *redis.Cmd
	// A Cluster has no marker, and MULTI cannot span two slots: read the key
	// and its fence hash alone, which share one.
	cluster := c.Info().Topology == redisconn.Cluster
	if !cluster {
		marker = redis.NewCmd(ctx, "hmget", keys.Marker, "ready_at", "vouched")
		info = redis.NewCmd(ctx, "info", "server")
		now = redis.NewCmd(ctx, "time")
		cmds = append(cmds, marker, info, now)
	}
	if err := c.Tx(ctx, cmds); err != nil && !errors.Is(err, redis.Nil) {
		return NodeState{}, err
	}
	holder, err := get.Text()
	if err != nil && !errors.Is(err, redis.Nil) {
		return NodeState{}, fmt.Errorf("GET %s: %w", key, err)
	}
	s := NodeState{Holder: holder}
	if s.Holder != "" {
		ms, err := pttl.Int64()
		if err != nil {
			return NodeState{}, fmt.Errorf("PTTL %s: %w", key, err)
		}
		s.TTL = time.Duration(ms) * time.Millisecond
		if ms < 0 { // -1: no expiry, -2: no key (go-redis's PTTL keeps these raw)
			s.TTL = time.Duration(ms)
		}
	}
	token, err := fence.Uint64() // 0 with redis.Nil: no counter
	if err != nil && !errors.Is(err, redis.Nil) {
		return NodeState{}, fmt.Errorf("HGET %s t: %w", fenceKey, err)
	}
	s.Token = fencing.Token(token)
	if cluster {
		s.Quarantine.Cluster = true
		return s, nil
	}
	m, err := marker.Slice()
	if err != nil {
		return NodeState{}, fmt.Errorf("HMGET %s: %w", keys.Marker, err)
	}
	if len(m) != 2 {
		return NodeState{}, fmt.Errorf("HMGET %s: %d values for 2 fields", keys.Marker, len(m))
	}
	infoText, err := info.Text()
	if err != nil {
		return NodeState{}, fmt.Errorf("INFO server: %w", err)
	}
	runID, uptime, err := parseServerInfo(infoText)
	if err != nil {
		return NodeState{}, fmt.Errorf("INFO server: %w", err)
	}
	t, err := serverTime(now)
	if err != nil {
		return NodeState{}, fmt.Errorf("TIME: %w", err)
	}
	readyAt, _ := m[0].(string)
	vouched, _ := m[1].(string)
	s.Quarantine, err = markerState(readyAt, vouched, runID, uptime, t.UnixMilli())
	return s, err
}

// markerState builds a nodeQuarantine from the marker's fields ("" when
// absent), the run id, the uptime in seconds and the clock in ms.
func markerState(readyAt, vouched, runID string, uptimeSec, nowMs int64) (nodeQuarantine, error) {
	q := nodeQuarantine{Vouched: vouched != "" && vouched == runID, Uptime: time.Duration(uptimeSec) * time.Second}
	if readyAt == "" {
		return q, nil
	}
	ready, err := strconv.ParseInt(readyAt, 10, 64)
	if err != nil {
		return nodeQuarantine{}, fmt.Errorf("%s ready_at %q is not a number", keys.Marker, readyAt)
	}
	q.Marked, q.ReadyIn = true, time.Duration(ready-nowMs)*time.Millisecond
	return q, nil
}

func parseServerInfo(info string) (runID string, uptimeSec int64, err error) {
	fields := infoFields(info)
	runID, up := fields["run_id"], fields["uptime_in_seconds"]
	if runID == "" || up == "" {
		return "", 0, errors.New("no run_id or uptime_in_seconds in the reply")
	}
	if uptimeSec, err = strconv.ParseInt(up, 10, 64); err != nil {
		return "", 0, fmt.Errorf("uptime_in_seconds %q: %w", up, err)
	}
	return runID, uptimeSec, nil
}
