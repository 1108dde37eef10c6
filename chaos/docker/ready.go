package docker

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/redfence/redfence/internal/redisnode"
)

const (
	// pollInterval spaces readiness probes.
	pollInterval = 50 * time.Millisecond
	// probeTimeout bounds one PING round trip during the readiness wait.
	probeTimeout = time.Second
	// logTailLines is how much container output a readiness error carries.
	logTailLines = 20
)

// pingWait is a testcontainers wait strategy that polls PING through the
// pinned host port. It replaces wait.ForListeningPort, whose internal check
// execs /bin/sh, which the scratch image does not have; it also sees the
// current start, unlike a log-line wait after a restart. It fails fast, with
// the container's output, when the container exits.
type pingWait struct {
	addr    string
	timeout time.Duration
}

var _ wait.Strategy = pingWait{}

// WaitUntilReady implements wait.Strategy.
func (w pingWait) WaitUntilReady(ctx context.Context, target wait.StrategyTarget) error {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	timer := time.NewTimer(0)
	defer timer.Stop()
	var last error
	for {
		select {
		case <-ctx.Done():
			err := fmt.Errorf("%w on %s within %v: %w", ErrNotReady, w.addr, w.timeout, ctx.Err())
			if last != nil {
				err = fmt.Errorf("%w (last probe: %w)", err, last)
			}
			return withLogs(err, target) // ctx is done here; fetching the logs for the error needs a context of its own
		case <-timer.C:
		}
		if last = redisnode.Ping(ctx, w.addr, probeTimeout); last == nil {
			return nil
		}
		st, err := target.State(ctx)
		if err == nil && !st.Running && !st.Restarting {
			return withLogs(fmt.Errorf("%w on %s: container %s (exit code %d)", ErrNotReady, w.addr, st.Status, st.ExitCode), target) // the logs for the error get their own short timeout, not the readiness deadline, which may be nearly spent
		}
		timer.Reset(pollInterval)
	}
}

// withLogs appends the tail of the container's output to err.
func withLogs(err error, target wait.StrategyTarget) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rc, lerr := target.Logs(ctx)
	if lerr != nil {
		return err
	}
	defer rc.Close()
	b, _ := io.ReadAll(io.LimitReader(rc, 1<<20))
	tail := lastLines(string(b), logTailLines)
	if tail == "" {
		return err
	}
	return fmt.Errorf("%w\n--- container output (tail) ---\n%s", err, tail)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}
