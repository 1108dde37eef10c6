package fencing_test

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/internal/pgtest"
)

func exec(t *testing.T, db interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, q string, args ...any) int64 {
	t.Helper()
	res, err := db.ExecContext(testCtx(t), q, args...)
	require.NoError(t, err, q)
	n, err := res.RowsAffected()
	require.NoError(t, err)
	return n
}

func queryString(t *testing.T, db *sql.DB, q string, args ...any) string {
	t.Helper()
	var s string
	require.NoError(t, db.QueryRowContext(testCtx(t), q, args...).Scan(&s), q)
	return s
}

// guardedUpdate writes value to the data row in a transaction fenced by
// CheckTx, and commits; a rejected token rolls back.
func guardedUpdate(ctx context.Context, g *fencing.SQLGuard, db *sql.DB, resource string, tok fencing.Token, q string, args ...any) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := g.CheckTx(ctx, tx, resource, tok); err != nil {
		return errors.Join(err, tx.Rollback())
	}
	if _, err := tx.ExecContext(ctx, q, args...); err != nil {
		return errors.Join(err, tx.Rollback())
	}
	return tx.Commit()
}

func TestSQLGuardConcurrentCheckTx(t *testing.T) {
	t.Parallel()
	for _, order := range tokenOrders {
		t.Run(order.name, func(t *testing.T) {
			t.Parallel()
			g, db := sqlGuard(t)
			exec(t, db, "CREATE TABLE account (id int PRIMARY KEY, token bigint NOT NULL, applied text NOT NULL)")
			exec(t, db, "INSERT INTO account VALUES (1, 0, '')")
			lists := tokenLists(t, writeTokens, writers, order.ascending)
			ctx := testCtx(t)

			// Each accepted writer reads applied and writes it back with its
			// token appended, in the fenced transaction, with no lock of its
			// own on the data row: only the fence row lock that CheckTx
			// holds until commit keeps these read-modify-writes apart, so
			// applied lists the writes in commit order, and loses entries if
			// two writers ever overlap.
			outcomes := runWriters(lists, func(tok fencing.Token) error {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				defer func() { _ = tx.Rollback() }() // a no-op after Commit
				if err := g.CheckTx(ctx, tx, "account", tok); err != nil {
					return err
				}
				var applied string
				if err := tx.QueryRowContext(ctx, "SELECT applied FROM account WHERE id = 1").Scan(&applied); err != nil {
					return err
				}
				if applied != "" {
					applied += ","
				}
				applied += tok.String()
				if _, err := tx.ExecContext(ctx, "UPDATE account SET token = $1, applied = $2 WHERE id = 1", int64(tok), applied); err != nil {
					return err
				}
				return tx.Commit()
			})

			var applied []fencing.Token
			if s := queryString(t, db, "SELECT applied FROM account WHERE id = 1"); s != "" {
				for _, f := range strings.Split(s, ",") {
					n, err := strconv.ParseUint(f, 10, 64)
					require.NoError(t, err)
					applied = append(applied, fencing.Token(n))
				}
			}
			checkOutcomes(t, outcomes, applied, writeTokens)
			assert.Equal(t, "400", queryString(t, db, "SELECT token::text FROM account WHERE id = 1"), "the data comes from the highest token")
			assert.Equal(t, "400", queryString(t, db, "SELECT token::text FROM redfence_fences WHERE resource = 'account'"))
		})
	}
}

func TestSQLGuardKleppmann(t *testing.T) {
	t.Parallel()
	g, db := sqlGuard(t)
	exec(t, db, "CREATE TABLE files (id int PRIMARY KEY, data text NOT NULL, fence bigint NOT NULL DEFAULT 0)")
	exec(t, db, "INSERT INTO files (id, data) VALUES (1, ''), (2, ''), (3, ''), (4, '')")
	ctx := testCtx(t)
	const update = "UPDATE files SET data = $1 WHERE id = $2"
	data := func(id int) string {
		return queryString(t, db, "SELECT data FROM files WHERE id = $1", id)
	}

	t.Run("guarded with CheckTx", func(t *testing.T) {
		// Client A acquired the lock with token 33, then paused before
		// writing; its lease expired. Client B acquired token 34 and wrote.
		require.NoError(t, guardedUpdate(ctx, g, db, "file1", 34, update, "B", 1))
		// A wakes up and writes with its old token: rejected, rolled back.
		err := guardedUpdate(ctx, g, db, "file1", 33, update, "A", 1)
		requireStale(t, err, "file1", 33, 34)
		assert.Equal(t, "B", data(1), "B's write survives")
	})
	t.Run("guarded with a fence column in the user's table", func(t *testing.T) {
		const fenced = "UPDATE files SET data = $1, fence = $2 WHERE id = $3 AND fence <= $2"
		assert.Equal(t, int64(1), exec(t, db, fenced, "B", 34, 2), "B's write is applied")
		assert.Equal(t, int64(0), exec(t, db, fenced, "A", 33, 2), "zero rows: A's token is stale")
		assert.Equal(t, "B", data(2), "B's write survives")
		assert.Equal(t, int64(1), exec(t, db, fenced, "B2", 34, 2), "the same token may write again")
	})
	t.Run("control: plain UPDATE loses B's update", func(t *testing.T) {
		exec(t, db, update, "B", 3)
		exec(t, db, update, "A", 3) // A's late write
		assert.Equal(t, "A", data(3), "without fencing, A overwrote B")
	})
	t.Run("control: Check then a separate UPDATE is not enough", func(t *testing.T) {
		require.NoError(t, g.Check(ctx, "file4", 33)) // A checks before pausing
		require.NoError(t, guardedUpdate(ctx, g, db, "file4", 34, update, "B", 4))
		exec(t, db, update, "A", 4) // A's write, after its earlier Check
		assert.Equal(t, "A", data(4), "a check outside the write's transaction does not fence it")
	})
}

// waitForLockWait blocks until some session of db's database waits for a
// lock.
func waitForLockWait(t *testing.T, db *sql.DB) {
	t.Helper()
	require.Eventually(t, func() bool {
		var n int
		err := db.QueryRowContext(t.Context(),
			"SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'").Scan(&n)
		return err == nil && n > 0
	}, 30*time.Second, 5*time.Millisecond, "no session waited for the fence row lock")
}

// TestSQLGuardCheckTxHoldsTheFence shows that an open transaction that passed
// CheckTx holds off other writers of the resource until it ends, and that
// the fence commits or rolls back with it.
func TestSQLGuardCheckTxHoldsTheFence(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)

	// hold opens a transaction on a fresh guard that passes CheckTx(held),
	// starts a second writer that runs CheckTx(next) in its own transaction
	// and commits, and returns once that writer waits for the fence row. The
	// second writer's result arrives on the channel.
	hold := func(t *testing.T, held, next fencing.Token) (*fencing.SQLGuard, *sql.Tx, <-chan error) {
		t.Helper()
		g, db := sqlGuard(t)
		tx, err := db.BeginTx(ctx, nil)
		require.NoError(t, err)
		require.NoError(t, g.CheckTx(ctx, tx, "r", held))
		done := make(chan error, 1)
		go func() {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				done <- err
				return
			}
			if err := g.CheckTx(ctx, tx, "r", next); err != nil {
				done <- errors.Join(err, tx.Rollback())
				return
			}
			done <- tx.Commit()
		}()
		waitForLockWait(t, db)
		select {
		case err := <-done:
			t.Fatalf("the second writer finished while the first held the fence: %v", err)
		default:
		}
		return g, tx, done
	}

	t.Run("higher token waits, then passes", func(t *testing.T) {
		t.Parallel()
		g, tx, done := hold(t, 33, 34)
		require.NoError(t, tx.Commit())
		require.NoError(t, <-done)
		requireStale(t, g.Check(ctx, "r", 33), "r", 33, 34)
	})
	t.Run("lower token waits, then is stale", func(t *testing.T) {
		t.Parallel()
		_, tx, done := hold(t, 34, 33)
		require.NoError(t, tx.Commit())
		requireStale(t, <-done, "r", 33, 34)
	})
	t.Run("rollback undoes the fence", func(t *testing.T) {
		t.Parallel()
		_, tx, done := hold(t, 34, 33)
		require.NoError(t, tx.Rollback())
		require.NoError(t, <-done, "34 never committed, so 33 is the highest")
	})
}

func TestSQLGuardOptions(t *testing.T) {
	t.Parallel()
	t.Run("custom table", func(t *testing.T) {
		t.Parallel()
		g, db := sqlGuard(t, fencing.WithSQLTable("My_Fences"), nil)
		assert.Equal(t, "My_Fences", g.Table())
		require.NoError(t, g.Check(testCtx(t), "r", 9))
		assert.Equal(t, "9", queryString(t, db, "SELECT token::text FROM my_fences WHERE resource = 'r'"))
		assert.Equal(t, "0", queryString(t, db, "SELECT count(*)::text FROM pg_tables WHERE tablename = 'redfence_fences'"))
	})
	t.Run("default table and columns", func(t *testing.T) {
		t.Parallel()
		g, db := sqlGuard(t)
		assert.Equal(t, fencing.DefaultSQLTable, g.Table())
		assert.Equal(t, "resource text,token bigint", queryString(t, db,
			`SELECT string_agg(column_name || ' ' || data_type, ',' ORDER BY ordinal_position)
			   FROM information_schema.columns WHERE table_name = 'redfence_fences'`))
		// A second guard on the same table is fine.
		_, err := fencing.NewSQLGuard(db)
		require.NoError(t, err)
	})
	t.Run("no create", func(t *testing.T) {
		t.Parallel()
		db := pgtest.DB(t)
		g, err := fencing.NewSQLGuard(db, fencing.WithSQLCreateTable(false))
		require.NoError(t, err)
		assert.Equal(t, "0", queryString(t, db, "SELECT count(*)::text FROM pg_tables WHERE tablename = 'redfence_fences'"))
		ctx := testCtx(t)
		err = g.Check(ctx, "r", 1)
		require.Error(t, err, "no table yet")
		assert.NotErrorIs(t, err, fencing.ErrStaleToken)
		require.NoError(t, g.CreateTable(ctx))
		require.NoError(t, g.CreateTable(ctx), "idempotent")
		require.NoError(t, g.Check(ctx, "r", 1))
	})
	t.Run("concurrent creators", func(t *testing.T) {
		t.Parallel()
		db := pgtest.DB(t)
		errs := make(chan error, 8)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				<-start
				_, err := fencing.NewSQLGuard(db, fencing.WithSQLTable("raced"))
				errs <- err
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			assert.NoError(t, err)
		}
	})
}

func TestSQLGuardInvalidArguments(t *testing.T) {
	t.Parallel()
	g, db := sqlGuard(t)
	ctx := testCtx(t)

	_, err := fencing.NewSQLGuard(nil)
	assert.ErrorIs(t, err, fencing.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "nil *sql.DB")
	for _, name := range []string{"", "1fences", "fences; DROP TABLE x", "public.fences", `"fences"`, "fën", strings.Repeat("f", 64)} {
		_, err := fencing.NewSQLGuard(db, fencing.WithSQLTable(name))
		assert.ErrorIs(t, err, fencing.ErrInvalidArgument, "%q", name)
	}
	_, err = fencing.NewSQLGuard(db, fencing.WithSQLTable(strings.Repeat("f", 63)))
	assert.NoError(t, err, "63 bytes is allowed")

	assert.ErrorIs(t, g.CheckTx(ctx, nil, "r", 1), fencing.ErrInvalidArgument)
	assert.ErrorIs(t, g.Check(ctx, "", 1), fencing.ErrInvalidArgument)
	err = g.Check(ctx, "r", math.MaxInt64+1)
	assert.ErrorIs(t, err, fencing.ErrInvalidToken)
	assert.Contains(t, err.Error(), "9223372036854775808")

	var nilGuard *fencing.SQLGuard
	assert.ErrorIs(t, nilGuard.Check(ctx, "r", 1), fencing.ErrInvalidArgument)
	assert.ErrorIs(t, nilGuard.CheckTx(ctx, nil, "r", 1), fencing.ErrInvalidArgument)
	assert.ErrorIs(t, nilGuard.CreateTable(ctx), fencing.ErrInvalidArgument)
	assert.Equal(t, "", nilGuard.Table())

	assert.Equal(t, "0", queryString(t, db, "SELECT count(*)::text FROM redfence_fences"), "rejected calls recorded nothing")
}

func TestSQLGuardStorageError(t *testing.T) {
	t.Parallel()
	g, db := sqlGuard(t)
	require.NoError(t, db.Close())
	err := g.Check(testCtx(t), "r", 1)
	require.Error(t, err)
	assert.NotErrorIs(t, err, fencing.ErrStaleToken)
	assert.Contains(t, err.Error(), `fencing: sql check for resource "r"`)
}
