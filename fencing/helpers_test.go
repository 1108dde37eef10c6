package fencing_test

import (
	"context"
	"database/sql"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/internal/pgtest"
	"github.com/redfence/redfence/internal/redistest"
)

// testTimeout bounds each test's I/O.
const testTimeout = time.Minute

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// redisClient starts a redis-server for the test and returns a client for it.
func redisClient(t *testing.T) *redis.Client {
	t.Helper()
	return redistest.Client(t, redistest.Nodes(t, 1)[0].Addr())
}

// sqlGuard returns an SQLGuard on a fresh database, and the database.
func sqlGuard(t *testing.T, opts ...fencing.SQLGuardOption) (*fencing.SQLGuard, *sql.DB) {
	t.Helper()
	db := pgtest.DB(t)
	g, err := fencing.NewSQLGuard(db, opts...)
	require.NoError(t, err)
	return g, db
}

// doGuard runs MemoryGuard.Do with a no-op write as a Guard.
type doGuard struct{ g *fencing.MemoryGuard }

func (d doGuard) Check(_ context.Context, resource string, t fencing.Token) error {
	return d.g.Do(resource, t, func() error { return nil })
}

// writeGuard runs RedisGuard.Write as a Guard, writing the token as the data.
type writeGuard struct{ g *fencing.RedisGuard }

func (w writeGuard) Check(ctx context.Context, resource string, t fencing.Token) error {
	return w.g.Write(ctx, resource, t, w.g.DataKey(resource, "data"), t.String(), 0)
}

// txGuard runs SQLGuard.CheckTx in a transaction of its own and commits it.
type txGuard struct {
	g  *fencing.SQLGuard
	db *sql.DB
}

func (x txGuard) Check(ctx context.Context, resource string, t fencing.Token) error {
	tx, err := x.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := x.g.CheckTx(ctx, tx, resource, t); err != nil {
		return errors.Join(err, tx.Rollback())
	}
	return tx.Commit()
}

// guardKind makes a fresh guard for a test.
type guardKind struct {
	name string
	new  func(t *testing.T) fencing.Guard
}

// guardKinds lists every guard, and every atomic check-and-write form run as
// a guard, so that table tests cover them all.
func guardKinds() []guardKind {
	return []guardKind{
		{"Memory", func(*testing.T) fencing.Guard { return fencing.NewMemoryGuard() }},
		{"MemoryDo", func(*testing.T) fencing.Guard { return doGuard{fencing.NewMemoryGuard()} }},
		{"Redis", func(t *testing.T) fencing.Guard { return fencing.NewRedisGuard(redisClient(t)) }},
		{"RedisWrite", func(t *testing.T) fencing.Guard { return writeGuard{fencing.NewRedisGuard(redisClient(t))} }},
		{"SQL", func(t *testing.T) fencing.Guard { g, _ := sqlGuard(t); return g }},
		{"SQLCheckTx", func(t *testing.T) fencing.Guard { g, db := sqlGuard(t); return txGuard{g, db} }},
	}
}

// requireStale checks that err is exactly a stale-token rejection of token
// for resource with the given current token.
func requireStale(t *testing.T, err error, resource string, token, current fencing.Token) {
	t.Helper()
	require.ErrorIs(t, err, fencing.ErrStaleToken)
	var stale *fencing.StaleTokenError
	require.ErrorAs(t, err, &stale)
	assert.Equal(t, fencing.StaleTokenError{Resource: resource, Token: token, Current: current}, *stale)
	assert.Contains(t, err.Error(), strconv.Quote(resource))
	assert.Contains(t, err.Error(), " "+token.String()+" ")
	assert.Contains(t, err.Error(), current.String())
}

// tokenOrders are the two ways concurrent writers get their tokens: each
// writer's list in random order, or each writer's list ascending, which
// makes many writers hold close tokens at the same moment and so widens the
// contention a broken guard would fail under.
var tokenOrders = []struct {
	name      string
	ascending bool
}{
	{"shuffled", false},
	{"ascending per writer", true},
}

// tokenLists deals the tokens 1..n, shuffled, round-robin into k lists,
// each sorted ascending if asked, and logs the seed.
func tokenLists(t *testing.T, n, k int, ascending bool) [][]fencing.Token {
	t.Helper()
	seed := rand.Uint64()
	t.Logf("shuffle seed %d", seed)
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	tokens := make([]fencing.Token, n)
	for i := range tokens {
		tokens[i] = fencing.Token(i + 1)
	}
	r.Shuffle(n, func(i, j int) { tokens[i], tokens[j] = tokens[j], tokens[i] })
	lists := make([][]fencing.Token, k)
	for i, tok := range tokens {
		lists[i%k] = append(lists[i%k], tok)
	}
	if ascending {
		for _, l := range lists {
			slices.Sort(l)
		}
	}
	return lists
}

// runWriters runs one goroutine per list, started together, each calling
// write for its tokens in order, and returns every outcome.
func runWriters(lists [][]fencing.Token, write func(fencing.Token) error) []outcome {
	results := make([][]outcome, len(lists))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w, list := range lists {
		wg.Go(func() {
			<-start
			for _, tok := range list {
				o := outcome{token: tok, err: write(tok)}
				var stale *fencing.StaleTokenError
				if errors.As(o.err, &stale) {
					o.current = stale.Current
				}
				results[w] = append(results[w], o)
			}
		})
	}
	close(start)
	wg.Wait()
	var all []outcome
	for _, r := range results {
		all = append(all, r...)
	}
	return all
}

// outcome is what one concurrent writer saw for one token.
type outcome struct {
	token   fencing.Token
	err     error
	current fencing.Token // from a *StaleTokenError
}

// checkOutcomes asserts that every token was either applied or rejected as
// stale with a strictly higher current token, that the applied tokens are
// non-decreasing in the order they were applied, that the highest token was
// applied last, and that some tokens were in fact rejected (the writers did
// interleave).
func checkOutcomes(t *testing.T, outcomes []outcome, applied []fencing.Token, n int) {
	t.Helper()
	require.Len(t, outcomes, n)
	accepted, stale := 0, 0
	for _, o := range outcomes {
		switch {
		case o.err == nil:
			accepted++
		case errors.Is(o.err, fencing.ErrStaleToken):
			stale++
			assert.Greater(t, o.current, o.token, "a token is only rejected for a higher current one")
		default:
			t.Errorf("token %d: unexpected error %v", o.token, o.err)
		}
	}
	assert.Equal(t, accepted, len(applied), "every accepted token was applied exactly once")
	assert.Positive(t, stale, "shuffled writers must see stale rejections")
	for i := 1; i < len(applied); i++ {
		if applied[i] < applied[i-1] {
			t.Errorf("write with token %d applied after token %d (position %d of %v)", applied[i], applied[i-1], i, applied)
			break
		}
	}
	require.NotEmpty(t, applied)
	assert.Equal(t, fencing.Token(n), applied[len(applied)-1], "the highest token wrote last")
}
