package chaos

import (
	"context"
	"errors"
	"net"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// errTimeout is what a read past its deadline returns.
var errTimeout error = &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}

// TestOnNodeRetriesTimeouts: a node command that times out is tried again
// (the soak's nemesis once stopped on one FLUSHALL that timed out), any
// other error is returned at once, and a cancelled context ends the
// retries.
func TestOnNodeRetriesTimeouts(t *testing.T) {
	r := &run{}
	n := &stubNode{name: "n0", calls: map[string]int{}}

	t.Run("TimeoutThenSuccess", func(t *testing.T) {
		calls := 0
		err := r.onNode(t.Context(), n, func(context.Context, *redis.Client) error {
			calls++
			if calls < 3 {
				return errTimeout
			}
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, 3, calls)
	})
	t.Run("OtherErrorAtOnce", func(t *testing.T) {
		calls := 0
		boom := errors.New("ERR boom")
		err := r.onNode(t.Context(), n, func(context.Context, *redis.Client) error {
			calls++
			return boom
		})
		require.ErrorIs(t, err, boom)
		require.ErrorContains(t, err, "on n0: ")
		require.Equal(t, 1, calls)
	})
	t.Run("CancelledContextEndsRetries", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		calls := 0
		err := r.onNode(ctx, n, func(context.Context, *redis.Client) error {
			calls++
			if calls == 2 {
				cancel()
			}
			return errTimeout
		})
		require.ErrorIs(t, err, os.ErrDeadlineExceeded)
		require.Equal(t, 2, calls)
	})
}
