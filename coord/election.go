package coord

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/internal/nilcheck"
)

// LeaderInfo describes a leader. The zero value means "no leader".
type LeaderInfo struct {
	Identity string        // what the leader passed to Campaign
	Epoch    fencing.Token // its lease's fencing token: higher for every later leader
	Since    time.Time     // when it won, by its own clock
}

// Election elects one leader at a time among campaigners of the same name
// over a Locker. It holds no per-campaign state and is safe for concurrent
// use.
type Election struct {
	quorum
	name    string
	mutex   Mutex
	key     string // the lock key
	infoKey string // who leads, next to it
	cfg     electionConfig
}

// NewElection returns the election called name over locker. Its lock is the
// key prefix+name, always with fencing tokens (they are the epochs); its
// info hash, {key}:leader, sits in the same Redis Cluster slot. It returns
// an error wrapping ErrInvalid for a nil locker, an empty name or an invalid
// option, and the lock client's *ConfigError for a TTL it refuses.
func NewElection(locker Locker, name string, opts ...ElectionOption) (*Election, error) {
	if nilcheck.IsNil(locker) {
		return nil, invalid("locker", "nil")
	}
	if name == "" {
		return nil, invalid("election name", "empty")
	}
	cfg := electionConfig{poll: DefaultPollInterval}
	applyAll(&cfg, opts, ElectionOption.applyElection)
	q, err := cfg.settle(locker, DefaultElectionPrefix, "poll interval", cfg.poll)
	if err != nil {
		return nil, err
	}
	m, err := locker.NewMutex(cfg.prefix+name, MutexOptions{TTL: cfg.ttl, Fencing: true})
	if err != nil {
		return nil, err
	}
	return &Election{quorum: q, name: name, mutex: m,
		key: m.Key(), infoKey: tagged(m.Key(), ":leader"), cfg: cfg}, nil
}

// Key returns the Redis key of the election's lock.
func (e *Election) Key() string { return e.key }

// Campaign blocks until the caller leads, or ctx ends (the error then wraps
// ctx.Err() and the lock packages' ErrNotAcquired). The Leadership is a
// fenced lease on the election's lock (its token is the Epoch), recorded
// with identity on a majority of nodes and kept alive by a goroutine that
// Campaign starts: call Resign when done leading, also after the leadership
// was lost. ctx bounds the campaign only. While another campaigner leads,
// Campaign waits as the lock's Mutex.Lock does (docs/design.md, Waiting).
func (e *Election) Campaign(ctx context.Context, identity string) (*Leadership, error) {
	if identity == "" {
		return nil, invalid("identity", "empty")
	}
	for {
		l, err := e.mutex.Lock(ctx)
		if err != nil {
			return nil, fmt.Errorf("coord: campaign %q: %w", e.name, err)
		}
		if l.Token() == 0 {
			e.release(ctx, l)
			return nil, invalid("locker", "its leases carry no fencing token although fencing was asked for")
		}
		since := time.Now()
		err = e.proclaim(ctx, l, identity, since)
		if err == nil {
			return e.lead(ctx, l, identity, since), nil
		}
		e.release(ctx, l)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("coord: campaign %q: %w: %w", e.name, ctx.Err(), err)
		}
		// The lock was won but could not be proclaimed on a majority: pause
		// for a node timeout, then campaign again.
		t := time.NewTimer(e.cfg.nodeTimeout)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("coord: campaign %q: %w: %w", e.name, ctx.Err(), err)
		case <-t.C:
		}
	}
}

func (e *Election) release(ctx context.Context, l Lease) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	_ = l.Release(rctx)
}

// proclaim records identity, epoch and since next to the lock on every node
// that holds the lease's value, and needs a majority.
func (e *Election) proclaim(ctx context.Context, l Lease, identity string, since time.Time) error {
	args := []any{l.Value(), identity, strconv.FormatUint(uint64(l.Token()), 10), since.UnixMilli()}
	rs := fanOut(ctx, e.nodes, e.cfg.nodeTimeout, func(ctx context.Context, c redis.UniversalClient) (int64, error) {
		n, err := proclaimScript.Run(ctx, c, []string{e.key, e.infoKey}, args...).Int64()
		if err == nil && n != 1 {
			err = errNotHeld
		}
		return n, err
	})
	ok := 0
	for _, r := range rs {
		if r.err == nil {
			ok++
		}
	}
	if ok >= e.need {
		return nil
	}
	return quorumError("proclaim", e.nodes, e.need, ok, rs)
}

// lead starts the keep-alive goroutine, on a context that keeps ctx's values
// but not its cancellation: the leadership outlives the campaign.
func (e *Election) lead(ctx context.Context, l Lease, identity string, since time.Time) *Leadership {
	kctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	ld := &Leadership{e: e, lease: l, identity: identity, since: since, stop: stop, kept: make(chan struct{})}
	go func() {
		defer close(ld.kept)
		// Its verdict is also the lease's: Err, Done and Release report it.
		_ = l.KeepAlive(kctx)
	}()
	return ld
}

// Leader returns the current leader without campaigning: the holder of the
// election's lock on a majority of the nodes that answered, with what it
// recorded. It returns an error wrapping ErrNoLeader when there is none (or
// the holder has not recorded itself yet), and a *QuorumError when too few
// nodes answered to tell. The answer may be stale the moment it returns: a
// leader can be deposed at any time, which is what Epoch is for.
func (e *Election) Leader(ctx context.Context) (LeaderInfo, error) {
	rs := fanOut(ctx, e.nodes, e.cfg.nodeTimeout, func(ctx context.Context, c redis.UniversalClient) ([]any, error) {
		return leaderScript.Run(ctx, c, []string{e.key, e.infoKey}).Slice()
	})
	answered := 0
	votes := map[string]int{}
	infos := map[string]LeaderInfo{}
	for _, r := range rs {
		if r.err != nil {
			continue
		}
		answered++
		if len(r.val) < 2 {
			continue // free here
		}
		v, _ := r.val[0].(string)
		votes[v]++
		if len(r.val) == 5 {
			if info, ok := parseInfo(r.val[2:]); ok {
				infos[v] = info
			}
		}
	}
	if answered < e.need {
		if err := ctx.Err(); err != nil {
			return LeaderInfo{}, fmt.Errorf("coord: leader %q: %w", e.name, err)
		}
		return LeaderInfo{}, fmt.Errorf("coord: leader %q: %w", e.name, quorumError("leader", e.nodes, e.need, answered, rs))
	}
	for v, n := range votes {
		if n < e.need {
			continue
		}
		if info, ok := infos[v]; ok {
			return info, nil
		}
		return LeaderInfo{}, fmt.Errorf("%w: %q: the lock is held, but its holder has not recorded itself yet", ErrNoLeader, e.name)
	}
	return LeaderInfo{}, fmt.Errorf("%w: %q", ErrNoLeader, e.name)
}

func parseInfo(f []any) (LeaderInfo, bool) {
	id, ok1 := f[0].(string)
	ep, ok2 := f[1].(string)
	ms, ok3 := f[2].(string)
	if !ok1 || !ok2 || !ok3 {
		return LeaderInfo{}, false
	}
	epoch, err1 := strconv.ParseUint(ep, 10, 64)
	since, err2 := strconv.ParseInt(ms, 10, 64)
	if err1 != nil || err2 != nil {
		return LeaderInfo{}, false
	}
	return LeaderInfo{Identity: id, Epoch: fencing.Token(epoch), Since: time.UnixMilli(since)}, true
}

// Observe reads the leader every poll interval (see WithPollInterval) and
// sends it on the returned channel whenever it changed (Identity or Epoch),
// the first reading included; a zero LeaderInfo means there is no leader.
// Readings that fail are skipped. The channel holds one value and a slow
// receiver gets the latest one: a leadership shorter than the interval, or
// superseded before the receiver came, may be missed. The channel is closed
// when ctx ends; the goroutine behind it ends with it.
func (e *Election) Observe(ctx context.Context) <-chan LeaderInfo {
	ch := make(chan LeaderInfo, 1)
	go func() {
		defer close(ch)
		t := time.NewTicker(e.cfg.poll)
		defer t.Stop()
		var last LeaderInfo
		first := true
		for {
			info, err := e.Leader(ctx)
			if (err == nil || errors.Is(err, ErrNoLeader)) && ctx.Err() == nil &&
				(first || info.Identity != last.Identity || info.Epoch != last.Epoch) {
				first, last = false, info
				select { // latest wins: drop an unread older value
				case <-ch:
				default:
				}
				ch <- info // never blocks: this goroutine is the only sender
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return ch
}

// Leadership is one term as leader, from Campaign to Resign or loss. Its
// methods are safe for concurrent use.
type Leadership struct {
	e        *Election
	lease    Lease
	identity string
	since    time.Time
	stop     context.CancelFunc
	kept     chan struct{} // closed when the keep-alive goroutine has returned

	mu       sync.Mutex
	resigned bool
}

// Identity returns the identity given to Campaign.
func (l *Leadership) Identity() string { return l.identity }

// Epoch returns the leadership's fencing token: every later leader of the
// election has a higher one. Pass it with every action taken as leader, and
// have followers and resources refuse epochs below the highest they have
// seen (package fencing): only that stops a deposed leader that does not
// yet know it.
func (l *Leadership) Epoch() fencing.Token { return l.lease.Token() }

// Since returns when the leadership began, by this process's clock.
func (l *Leadership) Since() time.Time { return l.since }

// Info returns the leadership as Election.Leader reports it.
func (l *Leadership) Info() LeaderInfo {
	return LeaderInfo{Identity: l.identity, Epoch: l.Epoch(), Since: time.UnixMilli(l.since.UnixMilli())}
}

// ValidUntil returns when the leadership's current lease validity ends; the
// keep-alive goroutine moves it forward.
func (l *Leadership) ValidUntil() time.Time { return l.lease.ValidUntil() }

// Done returns a channel closed when the leadership ends: lost (its lease
// could not be kept alive, closed before another campaigner can win) or
// resigned.
func (l *Leadership) Done() <-chan struct{} { return l.lease.Done() }

// Err returns nil while leading, an error wrapping ErrLost once the
// leadership was lost, and ErrReleased once resigned.
func (l *Leadership) Err() error { return l.lease.Err() }

// Context returns a context derived from parent that is cancelled when the
// leadership ends, with the reason as context.Cause. Call the CancelFunc
// when done with it. It starts no goroutine.
func (l *Leadership) Context(parent context.Context) (context.Context, context.CancelFunc) {
	return l.lease.Context(parent)
}

// Resign ends the leadership: it stops and joins the keep-alive goroutine
// and releases the lock, so that another campaigner can win at once. It
// returns nil when the lock was released while valid, an error wrapping
// ErrLost when the leadership had been lost before (the goroutine is still
// stopped), a *QuorumError when nodes could not answer (their copies expire
// by TTL), and ErrReleased when called again.
func (l *Leadership) Resign(ctx context.Context) error {
	l.mu.Lock()
	if l.resigned {
		l.mu.Unlock()
		return ErrReleased
	}
	l.resigned = true
	l.mu.Unlock()
	l.stop()
	<-l.kept
	return l.lease.Release(ctx)
}
