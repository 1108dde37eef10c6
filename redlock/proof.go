package redlock

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// The restart quarantine's proof per connection (docs/design.md, The proof
// per connection, has the argument): once the full check passed on a lane,
// its acquires take a proven form, followed by the marker's id and LASTSAVE;
// a restart closes the lane, a flush changes the id, a restart behind a
// proxy changes LASTSAVE. Readings that differ unprove the lane, and the
// acquire goes again in full on it (every acquire grants a repeated value).

// proof is the proven form of a request's command, or none.
type proof struct {
	args   []any   // sent in place of the command on a proven lane; nil: none
	decode decoder // reads its reply
}

// readings are a lane's commands for the proof, sent once per batch.
type readings struct {
	saved, clock, mark *redis.Cmd
}

func (r readings) reset() {
	for _, c := range [...]*redis.Cmd{r.saved, r.clock, r.mark} {
		c.SetVal(nil)
		c.SetErr(nil)
	}
}

// batchCmds returns the commands of a batch on lane l, with the readings
// around them when some request has a proven form (proofs), proven when l
// is and full is not set.
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
		args := q.args
		if q.proven = proven && q.proof.args != nil; q.proven {
			args = q.proof.args
		}
		q.cmd = redis.NewCmd(q.r.Context(), args...)
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

// settleProof proves l after a full check that passed (with TIME past the
// second of LASTSAVE), or unproves it when a proven batch's readings differ,
// and then reports that the batch must go again in full.
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

// scriptPassed reports whether an acquire script's reply passed the
// quarantine's check: neither {-2, ms} nor an error.
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
