package ratelimit

import (
	"fmt"
	"time"
)

// Limit is a rate: Rate requests per Period. Burst is how many requests the
// GCRA admits at once after a quiet spell (the bucket's size); the window
// algorithms admit Rate per window and ignore Burst.
//
// Valid limits have Rate >= 1, Period >= 1µs and, for GCRA, Burst >= 1.
// The zero Limit is invalid: every call with it returns an error wrapping
// ErrInvalid, never a silent "allow everything" or "deny everything".
type Limit struct {
	Rate   int
	Burst  int
	Period time.Duration
}

// PerSecond returns rate requests per second with a burst of rate.
func PerSecond(rate int) Limit { return Limit{Rate: rate, Burst: rate, Period: time.Second} }

// PerMinute returns rate requests per minute with a burst of rate.
func PerMinute(rate int) Limit { return Limit{Rate: rate, Burst: rate, Period: time.Minute} }

// PerHour returns rate requests per hour with a burst of rate.
func PerHour(rate int) Limit { return Limit{Rate: rate, Burst: rate, Period: time.Hour} }

// String returns the limit as, for example, "10 req/1s (burst 10)".
func (l Limit) String() string {
	return fmt.Sprintf("%d req/%v (burst %d)", l.Rate, l.Period, l.Burst)
}

// Validate reports whether l can be used with alg: it returns an
// *InvalidError for a Rate below 1, a Period below 1µs (the scripts count
// in microseconds), or, for GCRA, a Burst below 1 (nothing could ever be
// admitted). A negative Burst is an error for every algorithm.
func (l Limit) Validate(alg Algorithm) error {
	switch {
	case l.Rate < 1:
		return invalid("limit", "rate %d: must be at least 1 (limit %v)", l.Rate, l)
	case l.Period < time.Microsecond:
		return invalid("limit", "period %v: must be at least 1µs (limit %v)", l.Period, l)
	case l.Burst < 0:
		return invalid("limit", "burst %d: must not be negative (limit %v)", l.Burst, l)
	case alg == GCRA && l.Burst < 1:
		return invalid("limit", "burst %d: GCRA needs a burst of at least 1, or nothing is ever admitted (limit %v)", l.Burst, l)
	}
	return nil
}

// most returns the largest n that AllowN can ever admit under l with alg.
func (l Limit) most(alg Algorithm) int {
	if alg == GCRA {
		return l.Burst
	}
	return l.Rate
}
