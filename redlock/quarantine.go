package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redfence/redfence/internal/keys"
	"github.com/redfence/redfence/internal/quorum"
	"github.com/redfence/redfence/redisconn"
)

var errVouchedForNone = errors.New("no node is vouched for unless every node answers and none shows it was in use")

// Vouch declares every node brand-new, so that the restart quarantine does
// not hold it back in its current run: the operator step for a new set of
// nodes (CLI: redfence nodes vouch). It vouches for none, and returns a
// *QuorumError (ErrNotNew for nodes that show use), unless every node
// answers, holds no key but its marker, and was not vouched for in an
// earlier run; nil when all are vouched for already. Never vouch for nodes
// that may have lost a held lock (docs/design.md, Restart quarantine).
func (e *Client) Vouch(ctx context.Context) error {
	leave, err := e.enter(ctx)
	if err != nil {
		return err
	}
	defer leave()
	// Check every node first: one that shows use means the others may have
	// lost a held lock whose key it holds.
	timeout := max(e.cfg.nodeTimeout, time.Second)
	check := e.vouchRound(ctx, "check", timeout)
	check.Wait()
	// They matter only once every node answered (Reached): then each reply has a value.
	already := !slices.ContainsFunc(check.Replies(), func(rep quorum.Reply[vouchState]) bool { return !rep.Value.vouched })
	inUse := slices.ContainsFunc(check.Replies(), func(rep quorum.Reply[vouchState]) bool { return rep.Value.why != "" })
	switch {
	case check.Reached() && already:
		return nil // nothing to change
	case !check.Reached() || inUse:
		// Vouch for none: every node is listed with why.
		return quorumError("vouch", e.nodes, len(e.nodes), 0, vouchErrors(check.Replies(), errVouchedForNone))
	}
	// The script checks again, atomically with vouching.
	r := e.vouchRound(ctx, "vouch", timeout)
	r.Wait()
	qe := quorumError("vouch", e.nodes, len(e.nodes), 0, vouchErrors(r.Replies(), nil))
	if len(qe.Nodes) == 0 {
		return nil
	}
	qe.Got = len(e.nodes) - len(qe.Nodes) // Wait took every node's reply
	return qe
}

// vouchErrors returns replies with ErrNotNew for the nodes that show use and
// answered for the others that answered.
func vouchErrors(replies []quorum.Reply[vouchState], answered error) []quorum.Reply[vouchState] {
	res := slices.Clone(replies)
	for i, rep := range res {
		switch {
		case rep.Err != nil:
		case rep.Value.why != "":
			res[i].Err = fmt.Errorf("%w: %s", ErrNotNew, rep.Value.why)
		default:
			res[i].Err = answered
		}
	}
	return res
}

// vouchState is a node's answer to vouch.lua: vouched for in its current run
// already, and what shows use.
type vouchState struct {
	vouched bool
	why     string
}

func (e *Client) vouchRound(ctx context.Context, mode string, timeout time.Duration) *quorum.Round[vouchState] {
	return quorum.Start(ctx, len(e.nodes), len(e.nodes), timeout, &e.tracker,
		func(ctx context.Context, i int) (vouchState, error) {
			v, err := runScript(ctx, e.nodes[i].conn, vouchScript, []string{keys.Marker}, mode).Result()
			if err != nil {
				return vouchState{}, err
			}
			if a, ok := v.([]any); ok && len(a) == 2 {
				vouched, ok1 := a[0].(int64)
				why, ok2 := a[1].(string)
				if ok1 && ok2 {
					return vouchState{vouched: vouched == 1, why: why}, nil
				}
			}
			return vouchState{}, fmt.Errorf("unexpected vouch reply %v", v)
		})
}

func checkQuarantine(pkg string, nodes []node, cfg config) error {
	if cfg.quarantine == 0 {
		return nil
	}
	for i, n := range nodes {
		if n.conn.Info().Topology == redisconn.Cluster {
			return &ConfigError{Pkg: pkg, Field: "quarantine", Msg: fmt.Sprintf("client %d is a Redis Cluster client: the restart quarantine needs one marker key per node, which Cluster cannot address; turn the quarantine off", i)}
		}
	}
	return nil
}
