package coord_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/coord"
	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/internal/redistest"
)

func newElection(t *testing.T, b backend, opts ...coord.ElectionOption) *coord.Election {
	t.Helper()
	e, err := coord.NewElection(b.locker, redistest.Key(t), append([]coord.ElectionOption{coord.WithPollInterval(10 * time.Millisecond)}, opts...)...)
	require.NoError(t, err)
	return e
}

// campaignLater campaigns for e as who in a goroutine; the leadership won
// arrives on the channel (nil if Campaign failed).
func campaignLater(t *testing.T, ctx context.Context, e *coord.Election, who string) <-chan *coord.Leadership {
	won := make(chan *coord.Leadership, 1)
	go func() {
		l, err := e.Campaign(ctx, who)
		assert.NoError(t, err)
		won <- l
	}()
	return won
}

// observeUntil reads seen until it reports l, asserts that report is l's
// Info, and returns the reports before it. It fails the test if seen closes
// first.
func observeUntil(t *testing.T, seen <-chan coord.LeaderInfo, l *coord.Leadership) (before []coord.LeaderInfo) {
	t.Helper()
	for obs := range seen {
		if obs.Identity == l.Info().Identity {
			assert.Equal(t, l.Info(), obs)
			return before
		}
		before = append(before, obs)
	}
	t.Errorf("Observe never reported %s", l.Info().Identity)
	return before
}

// TestOneLeaderAtATime: campaigners take turns; their terms, measured from
// Campaign's return to the call of Resign, never overlap, and epochs grow
// from term to term. During its term each leader is what Leader reports.
func TestOneLeaderAtATime(t *testing.T) {
	backends(t, func(t *testing.T, b backend) {
		const campaigners, termsEach = 4, 4
		ctx := ctxT(t)
		e := newElection(t, b)
		type term struct {
			who        string
			epoch      fencing.Token
			start, end time.Time
		}
		var (
			mu    sync.Mutex
			terms []term
		)
		var wg sync.WaitGroup
		for i := 0; i < campaigners; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				who := fmt.Sprintf("node-%d", i)
				for k := 0; k < termsEach; k++ {
					l, err := e.Campaign(ctx, who)
					if !assert.NoError(t, err) {
						return
					}
					start := time.Now()
					info, err := e.Leader(ctx)
					assert.NoError(t, err)
					assert.Equal(t, l.Info(), info, "Leader reports the current leader")
					assert.NoError(t, l.Err())
					end := time.Now()
					mu.Lock()
					terms = append(terms, term{who, l.Epoch(), start, end})
					mu.Unlock()
					assert.NoError(t, l.Resign(ctx))
					assert.ErrorIs(t, l.Err(), coord.ErrReleased)
				}
			}()
		}
		wg.Wait()
		require.Len(t, terms, campaigners*termsEach)
		slices.SortFunc(terms, func(a, b term) int { return a.start.Compare(b.start) })
		for i := 1; i < len(terms); i++ {
			prev, cur := terms[i-1], terms[i]
			assert.True(t, cur.start.After(prev.end), "term %d (%s) began %v before term %d (%s) ended",
				i, cur.who, prev.end.Sub(cur.start), i-1, prev.who)
			assert.Greater(t, cur.epoch, prev.epoch, "epochs grow")
		}
		_, err := e.Leader(ctx)
		assert.ErrorIs(t, err, coord.ErrNoLeader, "nobody leads after the last Resign")
	})
}

// TestResignHandsOver: a waiting campaigner wins as soon as the leader
// resigns, with a higher epoch, and Observe reports both.
func TestResignHandsOver(t *testing.T) {
	backends(t, func(t *testing.T, b backend) {
		ctx := ctxT(t)
		e := newElection(t, b)
		_, err := e.Leader(ctx)
		require.ErrorIs(t, err, coord.ErrNoLeader)

		octx, stopObserving := context.WithTimeout(ctx, 10*time.Second)
		defer stopObserving()
		seen := e.Observe(octx)
		assert.Equal(t, coord.LeaderInfo{}, within(t, 5*time.Second, seen, "first observation"), "no leader yet")

		a, err := e.Campaign(ctx, "a")
		require.NoError(t, err)
		assert.Equal(t, a.Info(), within(t, 5*time.Second, seen, "leader a"))
		lctx := contextOf(t, ctx, a)

		won := campaignLater(t, ctx, e, "b")
		require.NoError(t, a.Resign(ctx))
		assert.ErrorIs(t, a.Resign(ctx), coord.ErrReleased)
		<-lctx.Done()
		assert.ErrorIs(t, context.Cause(lctx), coord.ErrReleased)

		bl := within(t, 5*time.Second, won, "b's campaign")
		require.NotNil(t, bl)
		assert.Greater(t, bl.Epoch(), a.Epoch())
		info, err := e.Leader(ctx)
		require.NoError(t, err)
		assert.Equal(t, coord.LeaderInfo{Identity: "b", Epoch: bl.Epoch(), Since: time.UnixMilli(bl.Since().UnixMilli())}, info)
		for _, obs := range observeUntil(t, seen, bl) {
			assert.Equal(t, coord.LeaderInfo{}, obs, "between a and b: nobody")
		}
		stopObserving()
		for range seen { // closed when the context ends
		}
		require.NoError(t, bl.Resign(ctx))
	})
}

// TestLeaderLosesWhenMajorityPaused: with two of three nodes paused the
// leader cannot keep its lease alive: Done closes, before anyone else can
// win. Once the nodes are back, the waiting campaigner wins with a higher
// epoch, and Observe reports it.
func TestLeaderLosesWhenMajorityPaused(t *testing.T) {
	ctx := ctxT(t)
	b := newRedlock(t, 3)
	const ttl = 600 * time.Millisecond
	e := newElection(t, b, coord.WithTTL(ttl), coord.WithNodeTimeout(50*time.Millisecond))
	a, err := e.Campaign(ctx, "a")
	require.NoError(t, err)
	octx, stopObserving := context.WithTimeout(ctx, 10*time.Second)
	defer stopObserving()
	seen := e.Observe(octx)
	assert.Equal(t, "a", within(t, 5*time.Second, seen, "leader a").Identity)

	won := campaignLater(t, ctx, e, "b")
	pause(t, b.nodes[:2]...)
	within(t, 3*ttl, a.Done(), "a's Done")
	lostAt := time.Now()
	assert.ErrorIs(t, a.Err(), coord.ErrLost)
	assert.True(t, lostAt.Before(a.ValidUntil()), "loss declared %v before validity ended", a.ValidUntil().Sub(lostAt))
	select {
	case <-won:
		t.Fatal("b won while a majority was paused")
	default:
	}
	resume(t, b.nodes[:2]...)

	bl := within(t, 5*time.Second, won, "b's campaign")
	require.NotNil(t, bl)
	assert.True(t, bl.Since().After(lostAt), "b won after a lost")
	assert.Greater(t, bl.Epoch(), a.Epoch())
	observeUntil(t, seen, bl)
	stopObserving()
	for range seen { // closed when the context ends
	}
	assert.ErrorIs(t, a.Resign(ctx), coord.ErrLost, "resigning a lost leadership says so")
	require.NoError(t, bl.Resign(ctx))
}

// TestLeaderNotYetRecorded: a holder of the election's lock that has not
// recorded itself is not reported as a leader.
func TestLeaderNotYetRecorded(t *testing.T) {
	ctx := ctxT(t)
	b := newSingle(t)
	e := newElection(t, b)
	m, err := b.locker.NewMutex(e.Key(), coord.MutexOptions{Fencing: true})
	require.NoError(t, err)
	l, err := m.TryLock(ctx)
	require.NoError(t, err)
	_, err = e.Leader(ctx)
	assert.ErrorIs(t, err, coord.ErrNoLeader)
	assert.ErrorContains(t, err, "not recorded")
	require.NoError(t, l.Release(ctx))
}

func TestLeaderNeedsAMajorityOfAnswers(t *testing.T) {
	ctx := ctxT(t)
	b := newRedlock(t, 3)
	e := newElection(t, b, coord.WithNodeTimeout(50*time.Millisecond))
	pause(t, b.nodes[:2]...)
	_, err := e.Leader(ctx)
	var qe *coord.QuorumError
	require.ErrorAs(t, err, &qe)
	assert.Equal(t, 1, qe.Got)
	assert.Len(t, qe.Nodes, 2)
	assert.NotErrorIs(t, err, coord.ErrNoLeader, "cannot tell is not no leader")
}

func TestCampaignEndsWithContext(t *testing.T) {
	ctx := ctxT(t)
	b := newSingle(t)
	e := newElection(t, b)
	a, err := e.Campaign(ctx, "a")
	require.NoError(t, err)
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = e.Campaign(cctx, "b")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	require.NoError(t, a.Resign(ctx))
}

func TestElectionBadArguments(t *testing.T) {
	b := newSingle(t)
	invalid := func(err error, field string) {
		t.Helper()
		var ie *coord.InvalidError
		if assert.ErrorAs(t, err, &ie) {
			assert.Equal(t, field, ie.Field)
		}
	}
	_, err := coord.NewElection(nil, "x")
	invalid(err, "locker")
	_, err = coord.NewElection(b.locker, "")
	invalid(err, "election name")
	_, err = coord.NewElection(b.locker, "x", coord.WithPollInterval(0))
	invalid(err, "poll interval")
	_, err = coord.NewElection(b.locker, "x", coord.WithNodeTimeout(-1))
	invalid(err, "node timeout")
	e := newElection(t, b)
	_, err = e.Campaign(t.Context(), "")
	invalid(err, "identity")
}
