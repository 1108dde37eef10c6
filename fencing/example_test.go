package fencing_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/fencing"
)

func ExampleMemoryGuard() {
	ctx := context.Background()
	g := fencing.NewMemoryGuard()

	fmt.Println(g.Check(ctx, "orders/42", 33)) // first token seen
	fmt.Println(g.Check(ctx, "orders/42", 33)) // the same holder again
	fmt.Println(g.Check(ctx, "orders/42", 34)) // a newer holder
	fmt.Println(g.Check(ctx, "orders/42", 33)) // the old holder, too late
	fmt.Println(g.Check(ctx, "orders/42", 0))  // no token at all
	// Output:
	// <nil>
	// <nil>
	// <nil>
	// fencing: stale token 33 for resource "orders/42": current token is 34
	// fencing: invalid token: 0 means no token (was fencing enabled on the lock?)
}

// Kleppmann's scenario: client A got token 33 and paused; meanwhile its lease
// expired, client B got token 34 and wrote. A's late write is rejected.
func ExampleMemoryGuard_Do() {
	g := fencing.NewMemoryGuard()
	file := ""
	write := func(data string) func() error {
		return func() error { file = data; return nil }
	}

	fmt.Println(g.Do("file", 34, write("written by B")))
	err := g.Do("file", 33, write("written by A"))
	fmt.Println(errors.Is(err, fencing.ErrStaleToken))
	fmt.Println(file)
	// Output:
	// <nil>
	// true
	// written by B
}

func ExampleStaleTokenError() {
	g := fencing.NewMemoryGuard()
	ctx := context.Background()
	_ = g.Check(ctx, "orders/42", 34)

	err := g.Check(ctx, "orders/42", 33)
	var stale *fencing.StaleTokenError
	if errors.As(err, &stale) {
		fmt.Printf("resource %s: token %d is behind %d\n", stale.Resource, stale.Token, stale.Current)
	}
	// Output:
	// resource orders/42: token 33 is behind 34
}

// Write checks the token and stores the data in one Lua script, so a write
// with a stale token can never land after a newer one. The data key carries
// the resource's hash tag, as Redis Cluster requires.
func ExampleRedisGuard_Write() {
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer client.Close()
	g := fencing.NewRedisGuard(client)

	var token fencing.Token = 34            // from the lock's lease
	key := g.DataKey("orders/42", "status") // "redfence:fence:{orders/42}:status"
	err := g.Write(ctx, "orders/42", token, key, "shipped", 24*time.Hour)
	switch {
	case errors.Is(err, fencing.ErrStaleToken):
		log.Print("lost the lock to a newer holder; not writing")
	case err != nil:
		log.Print(err)
	}
}

// CheckTx fences a transaction: the fence update and the protected write
// commit or roll back together.
func ExampleSQLGuard_CheckTx() {
	ctx := context.Background()
	db, err := sql.Open("pgx", "postgres://localhost/app")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	g, err := fencing.NewSQLGuard(db) // creates redfence_fences if missing
	if err != nil {
		log.Fatal(err)
	}

	var token fencing.Token = 34 // from the lock's lease
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }() // a no-op after Commit
	if err := g.CheckTx(ctx, tx, "orders/42", token); err != nil {
		log.Print(err) // errors.Is(err, fencing.ErrStaleToken): a newer holder wrote
		return
	}
	if _, err := tx.ExecContext(ctx, "UPDATE orders SET status = 'shipped' WHERE id = 42"); err != nil {
		log.Print(err)
		return
	}
	if err := tx.Commit(); err != nil {
		log.Print(err)
	}
}

// A table of your own can carry the fence in a column; the write then checks
// the token in its WHERE clause, atomically, without SQLGuard:
//
//	ALTER TABLE orders ADD COLUMN fence BIGINT NOT NULL DEFAULT 0;
func Example_ownTable() {
	var db *sql.DB // from sql.Open, as in ExampleSQLGuard_CheckTx
	ctx := context.Background()
	var token fencing.Token = 34 // from the lock's lease
	res, err := db.ExecContext(ctx,
		"UPDATE orders SET status = $1, fence = $2 WHERE id = $3 AND fence <= $2",
		"shipped", int64(token), 42)
	if err != nil {
		log.Fatal(err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		log.Print("stale token (or no such order): not written")
	}
}

func ExampleMiddleware() {
	g := fencing.NewMemoryGuard()
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t, _ := fencing.TokenFromContext(r.Context())
		fmt.Fprintf(w, "saved with token %d\n", t)
	})
	resource := func(r *http.Request) string { return r.URL.Path }
	srv := httptest.NewServer(fencing.Middleware(g, resource)(handler))
	defer srv.Close()

	for _, token := range []string{"34", "33"} {
		req, _ := http.NewRequest(http.MethodPut, srv.URL+"/orders/42", nil)
		req.Header.Set(fencing.HeaderName, token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%d %s", resp.StatusCode, body)
	}
	// Output:
	// 200 saved with token 34
	// 409 {"error":"stale fencing token","resource":"/orders/42","token":33,"current":34}
}
