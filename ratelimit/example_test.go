package ratelimit_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/ratelimit"
)

func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()

	rl, err := ratelimit.New(rdb, ratelimit.GCRA)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	res, err := rl.Allow(ctx, "user:42", ratelimit.PerSecond(10))
	if err != nil {
		log.Fatal(err)
	}
	if res.Allowed == 0 {
		fmt.Println("slow down; retry in", res.RetryAfter)
		return
	}
	fmt.Println("allowed;", res.Remaining, "more right now")
}

// A sliding window in HTTP middleware: 100 requests per minute per client
// address, with Retry-After on refusals.
func ExampleLimiter_Allow_middleware() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	rl, err := ratelimit.New(rdb, ratelimit.SlidingWindow, ratelimit.WithKeyPrefix("api:"))
	if err != nil {
		log.Fatal(err)
	}
	limit := ratelimit.PerMinute(100)
	middleware := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			res, err := rl.Allow(r.Context(), r.RemoteAddr, limit)
			switch {
			case err != nil:
				http.Error(w, "rate limiter unavailable", http.StatusServiceUnavailable)
			case res.Allowed == 0:
				w.Header().Set("Retry-After", fmt.Sprint(int(res.RetryAfter.Seconds()+0.999)))
				http.Error(w, "too many requests", http.StatusTooManyRequests)
			default:
				next.ServeHTTP(w, r)
			}
		})
	}
	_ = middleware
}

// AllowN is all or nothing; AllowAtMost takes what fits.
func ExampleLimiter_AllowAtMost() {
	var rl *ratelimit.Limiter // from New, with ratelimit.FixedWindow
	ctx := context.Background()
	batch := 250 // messages waiting to be sent
	res, err := rl.AllowAtMost(ctx, "smtp", ratelimit.PerMinute(100), batch)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("send %d now; %d more can go when the window resets in %v\n",
		res.Allowed, batch-res.Allowed, res.ResetAfter)
}

func ExamplePerSecond() {
	fmt.Println(ratelimit.PerSecond(5))
	fmt.Println(ratelimit.Limit{Rate: 5, Burst: 20, Period: time.Second})
	fmt.Println(ratelimit.PerSecond(0).Validate(ratelimit.GCRA))
	// Output:
	// 5 req/1s (burst 5)
	// 5 req/1s (burst 20)
	// ratelimit: invalid limit: rate 0: must be at least 1 (limit 0 req/1s (burst 0))
}
