package redlock

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/internal/keys"
	"github.com/redfence/redfence/redisconn"
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

// batchCmds returns a batch's commands on lane l, with the readings when some
// request has a proven form (proofs), proven when l is and full is not set.
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
	if slices.ContainsFunc(live, func(q *request) bool { return q.proven }) {
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
	now, err3 := serverTime(l.r.clock)
	if err != nil || err2 != nil || err3 != nil || id == "" {
		return false
	}
	if now.Unix() > saved && slices.ContainsFunc(live, func(q *request) bool { return q.proof.args != nil && scriptPassed(q.cmd) }) {
		l.proven, l.saved, l.id = true, saved, id
	}
	return false
}

// scriptPassed reports whether an acquire script's reply passed the
// quarantine's check: neither {-2, ms} nor an error.
func scriptPassed(cmd *redis.Cmd) bool {
	a, ok := cmd.Val().([]any)
	if cmd.Err() != nil || !ok || len(a) < 2 {
		return false
	}
	st, ok := a[0].(int64)
	return ok && st != -2
}

// lane is one Lane and what it proved: LASTSAVE and the marker's id.
type lane struct {
	l      redisconn.Lane
	proven bool
	saved  int64
	id     string
	r      readings
	cmds   []*redis.Cmd // the batch's commands, reused
	born   time.Time
}

// laneMaxAge is how long a lane is kept before its connection goes back to
// the client's pool and a fresh lane takes its place: go-redis peeks at the
// socket (a system call) before every command on a RESP3 connection that
// has not been back in its pool for 5 seconds.
const laneMaxAge = 4 * time.Second

func (l *lane) buffer(n int) []*redis.Cmd {
	if l == nil {
		return make([]*redis.Cmd, 0, n)
	}
	if cap(l.cmds) < n {
		l.cmds = make([]*redis.Cmd, 0, n)
	}
	clear(l.cmds[:cap(l.cmds)])
	return l.cmds[:0]
}

// lanePool is the Lanes of one Redis client, shared by every Client over it
// so that their connections stay bounded: at most max open, one batch each.
type lanePool struct {
	conn redisconn.Conn
	max  int

	mu   sync.Mutex
	idle []*lane // lanes not in use
	open int     // lanes open, idle or in use
	refs int     // engines using the pool; pools' lock is taken first
}

// pools holds the lane pools of the Redis clients in use, by Identity.
var pools = struct {
	sync.Mutex
	m map[any]*lanePool
}{m: map[any]*lanePool{}}

func lanesOf(c redisconn.Conn) *lanePool {
	info := c.Info()
	pools.Lock()
	defer pools.Unlock()
	p := pools.m[info.Identity]
	if p == nil {
		p = &lanePool{conn: c, max: min(max(maxSenders, oneNodeSenders), info.Lanes)}
		pools.m[info.Identity] = p
	}
	p.mu.Lock()
	p.refs++
	p.mu.Unlock()
	return p
}

// release counts one user off; the last closes the idle lanes.
func (p *lanePool) release() {
	pools.Lock()
	defer pools.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.refs--; p.refs > 0 {
		return
	}
	delete(pools.m, p.conn.Info().Identity)
	for _, l := range p.idle {
		l.l.Close()
	}
	p.idle, p.open = nil, 0
}

// take returns an idle lane, a new one while fewer than max are open, or nil.
func (p *lanePool) take() *lane {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		l := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return l
	}
	if p.open >= p.max {
		p.mu.Unlock()
		return nil
	}
	p.open++
	p.mu.Unlock()
	return p.fresh()
}

// fresh opens a lane that open counts already.
func (p *lanePool) fresh() *lane {
	if l := p.conn.Lane(); l != nil {
		ctx := context.Background()
		return &lane{l: l, born: time.Now(), r: readings{saved: redis.NewCmd(ctx, "lastsave"), clock: redis.NewCmd(ctx, "time"), mark: redis.NewCmd(ctx, "hget", keys.Marker, "id")}}
	}
	p.mu.Lock()
	p.open--
	p.mu.Unlock()
	return nil
}

func (p *lanePool) put(l *lane) {
	if l == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	// refs == 0: released meanwhile, not possible while a batch runs, but
	// never leak. An old lane makes room for a fresh one, which proves
	// itself anew.
	if p.refs == 0 || time.Since(l.born) > laneMaxAge {
		l.l.Close()
		p.open--
		return
	}
	p.idle = append(p.idle, l)
}

// drop closes l, broken. With stale set (the server had closed it) it also
// closes the idle lanes, likely closed too, and returns a fresh lane or nil.
func (p *lanePool) drop(l *lane, stale bool) *lane {
	l.l.Close()
	p.mu.Lock()
	p.open--
	if !stale {
		p.mu.Unlock()
		return nil
	}
	idle := p.idle
	p.idle, p.open = nil, p.open-len(idle)+1 // +1: room for the fresh lane
	p.mu.Unlock()
	for _, i := range idle {
		i.l.Close()
	}
	return p.fresh()
}
