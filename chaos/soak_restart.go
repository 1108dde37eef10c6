package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/redis/go-redis/v9"
)

// A restart without persistence in a soak whose nodes run with AOFAlways.
// A backend fixes a node's persistence when it starts it (NodeSpec), and
// Node.Start keeps it; so where the harness can reach a node's files (the
// process backend) the soak deletes them before the start, and elsewhere
// (Docker: the files live in the container) it starts the node with them
// and empties it before any client reaches it.

// emptyStarter is a killed Node that can start again without its data
// files.
type emptyStarter interface {
	startEmpty(ctx context.Context) error
}

var _ emptyStarter = (*processNode)(nil)

// startEmpty starts the killed process again without its AOF directory
// and RDB file, so it comes back empty, as a node without persistence
// does.
func (n *processNode) startEmpty(ctx context.Context) error {
	return n.do(ctx, "start empty", func() error {
		if n.node.Running() {
			return errors.New("the node is running")
		}
		for _, f := range []string{"appendonlydir", "dump.rdb"} {
			if err := os.RemoveAll(filepath.Join(n.node.Dir(), f)); err != nil {
				return err
			}
		}
		return n.node.Restart(ctx)
	})
}

// restartEmpty starts the killed target i again without what it held:
// without its files if it can (emptyStarter), else with its links from
// every client cut until FLUSHALL has emptied it, so that no client sees
// what it restarted with. Either way the clients find what a restart
// without persistence leaves: an empty node, with a new run id and an
// uptime from zero.
func (in *runInjector) restartEmpty(ctx context.Context, i int) error {
	r, node := in.r, in.targets[i]
	if es, ok := node.(emptyStarter); ok && !in.flushRestart {
		return r.nodeOp(ctx, es.startEmpty, func() { r.down[node] = false })
	}
	var errs []error
	for c := range r.nw.Clients() {
		errs = append(errs, r.nw.Cut(c, i))
	}
	if err := errors.Join(errs...); err == nil {
		err = r.restart(ctx, node)
		if err == nil {
			err = r.onNode(ctx, node, flushUnlessReplica)
		}
		errs = append(errs, err)
	}
	for c := range r.nw.Clients() {
		errs = append(errs, r.nw.Heal(c, i))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("restart %s empty: %w", node.Name(), err)
	}
	return nil
}

// flushUnlessReplica empties c's node, unless it came back as a replica
// (Sentinel rewrote its configuration when it demoted it): a replica
// refuses FLUSHALL (READONLY), and the full resync that follows a restart
// replaces what it held with its primary's data anyway.
func flushUnlessReplica(ctx context.Context, c *redis.Client) error {
	err := c.FlushAll(ctx).Err()
	if err != nil && redis.HasErrorPrefix(err, "READONLY") {
		return nil
	}
	return err
}
