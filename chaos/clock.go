package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/redfence/redfence/chaos/internal/clockshim"
)

// ErrNoClock is wrapped by the error SetClockOffset returns on a node that
// was started without NodeSpec.Clock.
var ErrNoClock = errors.New("chaos: clock offset needs a node started with NodeSpec.Clock")

// clockShim builds the gettimeofday shim into the backend's directory the
// first time it is needed and returns the library's path and the directory.
func (b *ProcessBackend) clockShim(ctx context.Context) (so, dir string, err error) {
	b.shimMu.Lock()
	defer b.shimMu.Unlock()
	if b.shimClosed {
		return "", "", ErrBackendClosed
	}
	if b.shim != "" {
		return b.shim, b.dir, nil
	}
	if b.dir == "" {
		d, err := os.MkdirTemp("", "redfence-chaos-")
		if err != nil {
			return "", "", fmt.Errorf("chaos: clock shim directory: %w", err)
		}
		b.dir = d
	}
	so, err = clockshim.Build(ctx, b.dir)
	if err != nil {
		return "", "", fmt.Errorf("chaos: building the clock shim: %w", err)
	}
	b.shim = so
	return b.shim, b.dir, nil
}

// clockEnv creates a node's offset file, at zero, in dir and returns the
// environment that makes redis-server preload the shim reading it.
func clockEnv(so, dir string, seq int) (env []string, offsetFile string, err error) {
	offsetFile = filepath.Join(dir, "clock-offset-"+strconv.Itoa(seq))
	if err := clockshim.WriteOffset(offsetFile, 0); err != nil {
		return nil, "", fmt.Errorf("chaos: clock offset file: %w", err)
	}
	return []string{"LD_PRELOAD=" + so, clockshim.EnvFile + "=" + offsetFile}, offsetFile, nil
}

// SetClockOffset implements Node. The running process picks the offset up
// at its next gettimeofday call; the offset lasts across Kill and Start
// until it is set again. It has millisecond resolution (d is truncated
// towards zero) and fails with ErrNoClock unless the node was started with
// NodeSpec.Clock.
func (n *processNode) SetClockOffset(ctx context.Context, d time.Duration) error {
	if err := liveCtx(ctx); err != nil {
		return n.errorf("set clock offset", err)
	}
	if n.offsetFile == "" {
		return n.errorf("set clock offset", ErrNoClock)
	}
	if err := clockshim.WriteOffset(n.offsetFile, d); err != nil {
		return n.errorf("set clock offset", err)
	}
	return nil
}
