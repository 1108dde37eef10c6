package fencing_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
	"github.com/redfence/redfence/single"
)

// store is a protected resource: write stores value under token t (guarded
// or not, depending on the store), read returns what is stored.
type store struct {
	write func(ctx context.Context, t fencing.Token, value string) error
	read  func(ctx context.Context) string
}

// stores returns, for one guard kind, the guarded store and an unguarded
// control over the same kind of storage.
type storeKind struct {
	name string
	make func(t *testing.T, guarded bool) store
}

func storeKinds() []storeKind {
	return []storeKind{
		{"memory", func(t *testing.T, guarded bool) store {
			var mu sync.Mutex
			var data string
			g := fencing.NewMemoryGuard()
			return store{
				write: func(_ context.Context, tok fencing.Token, v string) error {
					if !guarded {
						mu.Lock()
						data = v
						mu.Unlock()
						return nil
					}
					return g.Do("report", tok, func() error {
						mu.Lock()
						data = v
						mu.Unlock()
						return nil
					})
				},
				read: func(context.Context) string { mu.Lock(); defer mu.Unlock(); return data },
			}
		}},
		{"redis", func(t *testing.T, guarded bool) store {
			c := redisClient(t)
			g := fencing.NewRedisGuard(c)
			key := g.DataKey("report", "data")
			return store{
				write: func(ctx context.Context, tok fencing.Token, v string) error {
					if !guarded {
						return c.Set(ctx, key, v, 0).Err()
					}
					return g.Write(ctx, "report", tok, key, v, 0)
				},
				read: func(ctx context.Context) string { return c.Get(ctx, key).Val() },
			}
		}},
		{"sql", func(t *testing.T, guarded bool) store {
			g, db := sqlGuard(t)
			ctx := testCtx(t)
			_, err := db.ExecContext(ctx, `CREATE TABLE report (id INT PRIMARY KEY, body TEXT NOT NULL)`)
			require.NoError(t, err)
			_, err = db.ExecContext(ctx, `INSERT INTO report VALUES (1, '')`)
			require.NoError(t, err)
			return store{
				write: func(ctx context.Context, tok fencing.Token, v string) error {
					tx, err := db.BeginTx(ctx, nil)
					if err != nil {
						return err
					}
					if guarded {
						if err := g.CheckTx(ctx, tx, "report", tok); err != nil {
							return errors.Join(err, tx.Rollback())
						}
					}
					if _, err := tx.ExecContext(ctx, `UPDATE report SET body = $1 WHERE id = 1`, v); err != nil {
						return errors.Join(err, tx.Rollback())
					}
					return tx.Commit()
				},
				read: func(ctx context.Context) string {
					var body string
					if err := db.QueryRowContext(ctx, `SELECT body FROM report WHERE id = 1`).Scan(&body); err != nil && !errors.Is(err, sql.ErrNoRows) {
						return "error: " + err.Error()
					}
					return body
				},
			}
		}},
		{"http", func(t *testing.T, guarded bool) store {
			var mu sync.Mutex
			var data string
			var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				data = r.URL.Query().Get("v")
				mu.Unlock()
				w.WriteHeader(http.StatusNoContent)
			})
			if guarded {
				h = fencing.Middleware(fencing.NewMemoryGuard(), func(*http.Request) string { return "report" })(h)
			}
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)
			return store{
				write: func(ctx context.Context, tok fencing.Token, v string) error {
					req, err := http.NewRequestWithContext(ctx, http.MethodPut, srv.URL+"/report?v="+v, nil)
					if err != nil {
						return err
					}
					req.Header.Set(fencing.HeaderName, tok.String())
					resp, err := srv.Client().Do(req)
					if err != nil {
						return err
					}
					defer resp.Body.Close()
					if resp.StatusCode == http.StatusConflict {
						return fmt.Errorf("409 Conflict: %w", fencing.ErrStaleToken)
					}
					if resp.StatusCode != http.StatusNoContent {
						return fmt.Errorf("status %d", resp.StatusCode)
					}
					return nil
				},
				read: func(context.Context) string { mu.Lock(); defer mu.Unlock(); return data },
			}
		}},
	}
}

// locker acquires a fenced lease and reports its token and when it ends.
type locker func(ctx context.Context) (token fencing.Token, done <-chan struct{}, err error)

func redlockLocker(t *testing.T, clients []redis.UniversalClient, key string) locker {
	c, err := redlock.New(clients, redlock.WithTTL(300*time.Millisecond), redlock.WithFencing())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.Vouch(context.Background()), "brand-new nodes")
	return mutexLocker(t, c, key)
}

func singleLocker(t *testing.T, client redis.UniversalClient, key string) locker {
	c, err := single.New(client, redlock.WithTTL(300*time.Millisecond), redlock.WithFencing())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return mutexLocker(t, c, key)
}

// mutexLocker returns a locker for c's Mutex for key (package single's
// Client is package redlock's).
func mutexLocker(t *testing.T, c *redlock.Client, key string) locker {
	m, err := c.NewMutex(key)
	require.NoError(t, err)
	return func(ctx context.Context) (fencing.Token, <-chan struct{}, error) {
		l, err := m.Lock(ctx)
		if err != nil {
			return 0, nil, err
		}
		return l.Token(), l.Done(), nil
	}
}

// kleppmann plays Kleppmann's scenario: A acquires, stalls past its validity
// (it never notices), B acquires and writes; then A's delayed write arrives.
// It returns A's write error and what the store holds at the end.
func kleppmann(t *testing.T, a, b locker, s store) (final string, aErr error) {
	ctx := testCtx(t)
	tokA, doneA, err := a(ctx)
	require.NoError(t, err)
	<-doneA // A stalls (a GC pause, say) until its lease is over
	tokB, _, err := b(ctx)
	require.NoError(t, err, "B acquires after A's lease ran out")
	require.Greater(t, tokB, tokA)
	require.NoError(t, s.write(ctx, tokB, "B"), "B's write")
	aErr = s.write(ctx, tokA, "A") // A wakes up and writes with its old token
	return s.read(ctx), aErr
}

func TestKleppmannScenario(t *testing.T) {
	for _, lockKind := range []string{"redlock", "single"} {
		for _, sk := range storeKinds() {
			t.Run(lockKind+"/"+sk.name, func(t *testing.T) {
				newLockers := func(t *testing.T) (locker, locker) {
					key := redistest.Key(t)
					if lockKind == "single" {
						c := redistest.Client(t, redistest.Nodes(t, 1)[0].Addr())
						return singleLocker(t, c, key), singleLocker(t, c, key)
					}
					clients := redistest.Clients(t, redistest.Nodes(t, 5))
					return redlockLocker(t, clients, key), redlockLocker(t, clients, key)
				}
				t.Run("guarded", func(t *testing.T) {
					a, b := newLockers(t)
					final, aErr := kleppmann(t, a, b, sk.make(t, true))
					require.ErrorIs(t, aErr, fencing.ErrStaleToken, "A's late write is rejected")
					assert.Equal(t, "B", final, "B's data survives")
				})
				t.Run("control without guard", func(t *testing.T) {
					a, b := newLockers(t)
					final, aErr := kleppmann(t, a, b, sk.make(t, false))
					require.NoError(t, aErr)
					assert.Equal(t, "A", final, "without fencing, A's late write overwrites B's: the lost update")
				})
			})
		}
	}
}
