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

type notNewError struct{ why string }

func (e notNewError) Error() string { return ErrNotNew.Error() + ": " + e.why }

func (e notNewError) Unwrap() error { return ErrNotNew }

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
	replies := check.Replies()
	already, inUse := true, false
	for _, rep := range replies {
		if rep.Err == nil {
			already = already && rep.Value.vouched
			inUse = inUse || rep.Value.why != ""
		}
	}
	switch {
	case check.Reached() && already:
		return nil // nothing to change
	case !check.Reached() || inUse:
		// Vouch for none: every node is listed with why.
		qe := &QuorumError{Op: "vouch", Need: len(e.nodes)}
		for _, rep := range replies {
			err := rep.Err
			switch {
			case err != nil:
			case rep.Value.why != "":
				err = notNewError{rep.Value.why}
			default:
				err = errVouchedForNone
			}
			qe.Nodes = append(qe.Nodes, NodeError{Index: rep.Index, Addr: e.nodes[rep.Index].addr, Err: err})
		}
		slices.SortFunc(qe.Nodes, func(a, b NodeError) int { return a.Index - b.Index })
		return qe
	}
	// The script checks again, atomically with vouching.
	r := e.vouchRound(ctx, "vouch", timeout)
	r.Wait()
	res := slices.Clone(r.Replies())
	ok := 0
	for i, rep := range res {
		switch {
		case rep.Err == nil && rep.Value.why != "":
			res[i].Err = notNewError{rep.Value.why}
		case rep.Err == nil:
			ok++
		}
	}
	if ok == len(e.nodes) {
		return nil
	}
	return quorumError("vouch", e.nodes, len(e.nodes), ok, res)
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
