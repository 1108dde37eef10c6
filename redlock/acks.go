package redlock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/redisconn"
)

// Replica acknowledgement (WithReplicaAcks): a batch with lease writes ends
// with WAIT on the same connection, which covers every write before it; a
// write whose WAIT counted fewer than n replicas is no vote.

// replicaAckError is a write too few replicas acknowledged, or WAIT's error.
type replicaAckError struct {
	want, got int
	timeout   time.Duration
	err       error
}

func (e *replicaAckError) Error() string {
	if e.err != nil {
		return fmt.Sprintf("%v: WAIT failed: %v", ErrReplicaAcks, e.err)
	}
	return fmt.Sprintf("%v: %d of %d replicas within %v (a failover could lose the write)", ErrReplicaAcks, e.got, e.want, e.timeout)
}

func (e *replicaAckError) Unwrap() []error {
	if e.err != nil {
		return []error{ErrReplicaAcks, e.err}
	}
	return []error{ErrReplicaAcks}
}

// acked reports whether q is a lease write that needs replica acks (before
// any EVAL re-send, which is acknowledged where it is made).
func (b *batcher) acked(q *request) bool { return b.acks > 0 && ackable(q.cmd.Args()) }

func ackable(args []any) bool {
	switch args[0] {
	case "set":
		return true
	case "evalsha":
		h := args[1].(string)
		return h == acquireScript.Hash() || h == extendScript.Hash() ||
			h == multiAcquireScript.Hash() || h == multiExtendScript.Hash() ||
			h == semAcquireScript.Hash() || h == semExtendScript.Hash() ||
			h == rwReadScript.Hash() || h == rwReadExtendScript.Hash() || h == rwWriteScript.Hash()
	}
	return false
}

// checkAcks refuses replica acks where WAIT cannot reach the connection that
// wrote (several nodes, a Ring), or where the client's ReadTimeout would cut
// its answer off.
func checkAcks(pkg string, nodes []node, cfg config) error {
	if cfg.replicaAcks == 0 {
		return nil
	}
	if len(nodes) > 1 {
		return &ConfigError{Pkg: pkg, Field: "replica acks", Msg: fmt.Sprintf("set on %d nodes: replica acknowledgement is for the lock on one Redis deployment (New over one client); Redlock's nodes are independent primaries without replicas", len(nodes))}
	}
	round := cfg.roundTimeout()
	for i, n := range nodes {
		info := n.conn.Info()
		if info.Topology == redisconn.Ring {
			return &ConfigError{Pkg: pkg, Field: "replica acks", Msg: fmt.Sprintf("client %d is a Ring: WAIT cannot be sent to the shard of a key through it (use a Client per shard, or a Cluster)", i)}
		}
		if read := info.ReadTimeout; read > 0 && read < round {
			return &ConfigError{Pkg: pkg, Field: "replica acks", Msg: fmt.Sprintf("client %d's ReadTimeout %v is below node timeout + acknowledgement timeout (%v), so WAIT's answer would be cut off (go-redis ends a read at ReadTimeout even with ContextTimeoutEnabled): set a ReadTimeout of at least %v", i, read, round, round)}
		}
	}
	return nil
}

// sendAcked sends live on a Cluster's Conn split by the primaries of its
// keys, each part with its WAIT (which must reach the connection that
// wrote), leaving each request's acknowledgement error in it.
func (b *batcher) sendAcked(ctx context.Context, live []*request) {
	shards, groups := map[any]redisconn.Conn{}, map[any][]*request{} // by the primary's Identity
	for _, q := range live {
		shard, err := b.conn.Shard(ctx, keyOf(q.cmd.Args()))
		if err != nil {
			q.cmd.SetErr(fmt.Errorf("finding the primary of the key: %w", err))
			continue
		}
		id := shard.Info().Identity
		shards[id], groups[id] = shard, append(groups[id], q)
	}
	var wg sync.WaitGroup
	for id, qs := range groups {
		wg.Go(func() { b.pipeAcked(ctx, shards[id], qs, cmdsOf(qs)) })
	}
	wg.Wait()
}

// pipeAcked sends cmds, the commands of qs, and WAIT as one pipeline, re-sends
// an EVALSHA that met NOSCRIPT as EVAL (a lease write with its own WAIT), and
// leaves each request's acknowledgement error in it.
func (b *batcher) pipeAcked(ctx context.Context, c sender, qs []*request, cmds []*redis.Cmd) {
	wait := b.waitCmd(ctx, b.ackTimeout)
	c.Pipeline(ctx, append(cmds, wait))
	var moved bool
	for _, q := range qs {
		acked := b.acked(q)
		q.ackErr = nil
		switch {
		case isNoScript(q.cmd) && acked:
			q.cmd, q.ackErr = b.resendAcked(ctx, c, evalOf(ctx, q.cmd))
		case isNoScript(q.cmd):
			retryScript(ctx, c, q.cmd)
		case acked:
			q.ackErr = b.ackError(wait)
		}
		err := q.cmd.Err()
		moved = moved || redis.HasErrorPrefix(err, "MOVED") || redis.HasErrorPrefix(err, "ASK")
	}
	if moved {
		b.conn.Refresh(ctx) // the next attempt finds the key's new primary
	}
}

func (b *batcher) resendAcked(ctx context.Context, c sender, cmd *redis.Cmd) (*redis.Cmd, error) {
	timeout := b.ackTimeout
	if d, ok := ctx.Deadline(); ok {
		// The batch's WAIT may have used the timeout up: answer, with the
		// count, before the round's deadline rather than after.
		timeout = min(timeout, time.Until(d)*9/10)
	}
	wait := b.waitCmd(ctx, timeout)
	c.Pipeline(ctx, []*redis.Cmd{cmd, wait})
	return cmd, b.ackError(wait)
}

// waitCmd is WAIT for timeout, in whole ms and at least 1 (0 would wait for ever).
func (b *batcher) waitCmd(ctx context.Context, timeout time.Duration) *redis.Cmd {
	return redis.NewCmd(ctx, "wait", b.acks, max(timeout.Milliseconds(), 1))
}

func (b *batcher) ackError(wait *redis.Cmd) error {
	got, err := wait.Int64()
	if err == nil && got >= int64(b.acks) {
		return nil
	}
	return &replicaAckError{want: b.acks, got: int(got), timeout: b.ackTimeout, err: err}
}

func isNoScript(cmd *redis.Cmd) bool {
	err := cmd.Err()
	return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") // no allocation on success
}

// evalOf returns cmd as EVAL, or cmd itself if it is not one of our scripts.
func evalOf(ctx context.Context, cmd *redis.Cmd) *redis.Cmd {
	args := cmd.Args()
	src, ok := scriptSource[args[1].(string)]
	if !ok {
		return cmd
	}
	eval := append([]any(nil), args...)
	eval[0], eval[1] = "eval", src
	return redis.NewCmd(ctx, eval...)
}
