package coord

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/redlock"
)

// errTimeout is a node's error when it did not answer within the node
// timeout.
var errTimeout = errors.New("coord: node timed out")

// quorum is a Locker's nodes and how many of them make a majority.
type quorum struct {
	nodes []redis.UniversalClient
	need  int
}

// quorumOf returns the quorum of locker's nodes; a locker without nodes is
// invalid.
func quorumOf(locker Locker) (quorum, error) {
	nodes := locker.Nodes()
	if len(nodes) == 0 {
		return quorum{}, invalid("locker", "it has no nodes")
	}
	return quorum{nodes: nodes, need: len(nodes)/2 + 1}, nil
}

type reply[T any] struct {
	val T
	err error
}

// fanOut runs call on every node, one goroutine per node (inline for a single
// node), each bounded by timeout, and waits for all of them: no goroutine
// outlives the call.
func fanOut[T any](ctx context.Context, nodes []redis.UniversalClient, timeout time.Duration,
	call func(ctx context.Context, c redis.UniversalClient) (T, error)) []reply[T] {
	out := make([]reply[T], len(nodes))
	one := func(i int) {
		nctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		v, err := call(nctx, nodes[i])
		if err != nil && errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			err = errTimeout
		}
		out[i] = reply[T]{v, err}
	}
	if len(nodes) == 1 {
		one(0)
		return out
	}
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			one(i)
		}()
	}
	wg.Wait()
	return out
}

// quorumError reports the nodes that failed or refused in an operation that
// needed need successes and got got.
func quorumError[T any](op string, nodes []redis.UniversalClient, need, got int, rs []reply[T]) *redlock.QuorumError {
	qe := &redlock.QuorumError{Op: op, Need: need, Got: got}
	for i, r := range rs {
		if r.err != nil {
			qe.Nodes = append(qe.Nodes, redlock.NodeError{Index: i, Addr: addrOf(nodes[i]), Err: r.err})
		}
	}
	slices.SortFunc(qe.Nodes, func(a, b redlock.NodeError) int { return a.Index - b.Index })
	return qe
}

// tagged returns the key of a companion of lock key k that shares k's Redis
// Cluster hash slot: k's own hash tag when it has one, otherwise k wrapped in
// braces (which hashes exactly as k does).
func tagged(k, suffix string) string {
	if i := strings.IndexByte(k, '{'); i >= 0 {
		if j := strings.IndexByte(k[i+1:], '}'); j > 0 {
			return k + suffix
		}
	}
	if strings.IndexByte(k, '}') < 0 {
		return "{" + k + "}" + suffix
	}
	return k + suffix // no usable tag: fine outside Cluster
}
