package redlock

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/internal/keys"
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

// readings are a lane's commands for the proof's readings, made once and
// sent once per batch: LASTSAVE and TIME before a full check, the marker's
// id after it; the id and LASTSAVE after the proven forms.
type readings struct {
	saved, clock, mark *redis.Cmd
}

func newReadings() readings {
	ctx := context.Background()
	return readings{saved: redis.NewCmd(ctx, "lastsave"), clock: redis.NewCmd(ctx, "time"), mark: redis.NewCmd(ctx, "hget", keys.Marker, "id")}
}

// reset clears the readings' replies before they are sent again.
func (r readings) reset() {
	for _, c := range [...]*redis.Cmd{r.saved, r.clock, r.mark} {
		c.SetVal(nil)
		c.SetErr(nil)
	}
}

// prepare makes q's command, in its proven form when proven is set and q has
// one.
func (q *request) prepare(proven bool) {
	q.proven = proven && q.proof.args != nil
	if q.proven {
		q.cmd = redis.NewCmd(q.r.Context(), q.proof.args...)
		return
	}
	q.cmd = redis.NewCmd(q.r.Context(), q.args...)
}

// batchCmds returns the commands of a batch on lane l: live's commands,
// with the proof's readings around them when l is set and some request of
// live has a proven form (proofs), in the proven form when l is proven.
func batchCmds(l *lane, live []*request, full bool) (cmds []*redis.Cmd, proofs bool) {
	proofs = l != nil && slices.ContainsFunc(live, func(q *request) bool { return q.proof.args != nil })
	proven := proofs && l.proven && !full
	cmds = l.buffer(len(live) + 3)
	if proofs {
		l.r.reset()
		if !proven {
			cmds = append(cmds, l.r.saved, l.r.clock)
		}
	}
	for _, q := range live {
		q.prepare(proven)
		cmds = append(cmds, q.cmd)
	}
	if proofs {
		cmds = append(cmds, l.r.mark)
		if proven {
			cmds = append(cmds, l.r.saved)
		}
	}
	return cmds, proofs
}

// settleProof reads what the batch's readings say of l's proof and reports
// whether the batch's requests with a proven form must be sent again in
// full: a full check that passed proves l with its readings (LASTSAVE and
// TIME before it, the id after), and proven forms whose readings differ
// from the lane's unprove it. Requests sent in the proven form and kept get
// its decoder.
func settleProof(l *lane, live []*request) (recheck bool) {
	id, err := l.r.mark.Text()
	saved, err2 := l.r.saved.Int64()
	proven := false
	for _, q := range live {
		proven = proven || q.proven
	}
	if proven {
		if err != nil || err2 != nil || id != l.id || saved != l.saved {
			l.proven = false
			return true
		}
		for _, q := range live {
			if q.proven {
				q.decode = q.proof.decode
			}
		}
		return false
	}
	now, err3 := l.r.clock.Slice()
	if err != nil || err2 != nil || err3 != nil || id == "" || len(now) != 2 {
		return false
	}
	if sec, err := strconv.ParseInt(fmt.Sprint(now[0]), 10, 64); err == nil && sec > saved &&
		slices.ContainsFunc(live, func(q *request) bool { return q.proof.args != nil && scriptPassed(q.cmd) }) {
		l.proven, l.saved, l.id = true, saved, id
	}
	return false
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
