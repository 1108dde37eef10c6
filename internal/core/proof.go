package core

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// The restart quarantine's proof per connection (docs/design.md, Restart
// quarantine, has the argument). A restarted server has closed every
// connection it had, and a Lane never reconnects by itself. So once an
// acquire's full quarantine check (quarantine.lua) has passed on a lane, the
// lane shows, for as long as it answers, that its node has not restarted
// since, and later acquires on it take the proven form: the plain SET NX PX
// (or the acquire script with the quarantine off), followed in the same
// pipeline by HGET of the marker's id and LASTSAVE. The two readings cover
// what a live connection does not show by itself:
//
//   - the marker's id is set when the marker is created: a flush (or any
//     loss of the marker) removes it, and the full check that finds the
//     marker missing creates a new one with a new id;
//   - LASTSAVE is set at every start of the server (and every save): a
//     proxy that keeps the client's connection while it reconnects to a
//     restarted server shows a new LASTSAVE. It counts whole seconds, so a
//     lane is proven only when the node's TIME, read before the check, is
//     past the second of its LASTSAVE: a start after the check then falls
//     in a later second.
//
// The full form records the readings: LASTSAVE and TIME before the script,
// the id after it. A proven form whose readings differ from the lane's was
// sent to a node that may have lost data: the lane is unproven and the
// acquire is sent again at once, in full, on the same lane (every acquire
// script grants a repeated request of the same owner value, the SET's
// included), and that answer is the node's vote.

// proof is the proven form of a request's command, or none.
type proof struct {
	args   []any   // sent in place of the command on a proven lane; nil: none
	decode decoder // reads its reply
}

// prepare makes q's commands for lane l (nil: the Conn, where the command
// goes out as it is): the proven form on a proven lane, otherwise the
// command, with the readings of the proof around it when q has a proven
// form.
func (q *request) prepare(l *lane, full bool) {
	ctx := q.r.Context()
	q.pre, q.clock, q.marker, q.post = nil, nil, nil, nil
	q.proven = false
	switch {
	case q.proof.args == nil || l == nil:
		q.cmd = redis.NewCmd(ctx, q.args...)
	case l.proven && !full:
		q.proven = true
		q.cmd = redis.NewCmd(ctx, q.proof.args...)
		q.marker = redis.NewCmd(ctx, "hget", MarkerKey, "id")
		q.post = redis.NewCmd(ctx, "lastsave")
	default:
		q.pre = redis.NewCmd(ctx, "lastsave")
		q.clock = redis.NewCmd(ctx, "time")
		q.cmd = redis.NewCmd(ctx, q.args...)
		q.marker = redis.NewCmd(ctx, "hget", MarkerKey, "id")
	}
}

// appendCmds appends what q sends, in order.
func (q *request) appendCmds(cmds []*redis.Cmd) []*redis.Cmd {
	for _, c := range [...]*redis.Cmd{q.pre, q.clock, q.cmd, q.marker, q.post} {
		if c != nil {
			cmds = append(cmds, c)
		}
	}
	return cmds
}

// settleProof reads what q's replies on l say of l's proof, and reports
// whether q must be sent again in full: a full check that passed proves l,
// with its readings; a proven form whose readings differ unproves it.
func settleProof(q *request, l *lane) (recheck bool) {
	switch {
	case l == nil || q.proof.args == nil:
		return false
	case q.proven:
		id, err1 := q.marker.Text()
		saved, err2 := q.post.Int64()
		if err1 != nil || err2 != nil || id != l.id || saved != l.saved {
			l.proven = false
			return true
		}
		q.decode = q.proof.decode
		return false
	}
	saved, err1 := q.pre.Int64()
	now, err2 := q.clock.Slice()
	id, err3 := q.marker.Text()
	if err1 != nil || err2 != nil || err3 != nil || id == "" || len(now) != 2 || !scriptPassed(q.cmd) {
		return false
	}
	if sec, err := strconv.ParseInt(fmt.Sprint(now[0]), 10, 64); err == nil && sec > saved {
		l.proven, l.saved, l.id = true, saved, id
	}
	return false
}

// recheck sends qs again in full on l, whose proven forms did not hold, and
// settles their proofs.
func recheck(ctx context.Context, l *lane, qs []*request) {
	cmds := make([]*redis.Cmd, 0, 3*len(qs))
	for _, q := range qs {
		q.prepare(l, true)
		cmds = q.appendCmds(cmds)
	}
	l.l.Pipeline(ctx, cmds)
	for _, q := range qs {
		retryScript(ctx, l.l, q.cmd)
		settleProof(q, l)
	}
}

// scriptPassed reports whether an acquire script's reply says the
// restart quarantine's check passed: a grant or a refusal by another owner,
// not a quarantined node's {-2, ms} nor an error.
func scriptPassed(cmd *redis.Cmd) bool {
	v, err := cmd.Result()
	if err != nil {
		return false
	}
	a, ok := v.([]any)
	if !ok || len(a) < 2 {
		return false
	}
	st, ok := a[0].(int64)
	return ok && st != -2
}
