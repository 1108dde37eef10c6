package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"

	"github.com/redfence/redfence/chaos"
	"github.com/redfence/redfence/chaos/internal/clockshim"
)

// killWaitTimeout bounds Kill's wait for the container to stop, on top of
// the caller's context.
const killWaitTimeout = 10 * time.Second

// pauseAttempts is how many times Pause asks the engine to freeze a
// container that could not be frozen.
const pauseAttempts = 5

// Node is one Redis container. It implements chaos.Node; its methods are
// safe for concurrent use (Kill, Start, Pause, Resume and Close on one node
// are serialised). Each control method looks at the container's actual
// state, so each is idempotent: Kill on a stopped node, Start on a running
// (or paused) node, Pause on a paused node and Resume on a running one do
// nothing.
type Node struct {
	b          *Backend
	name       string
	cname      string
	port       int
	addr       string
	clock      bool
	offsetPath string // host path of the clock offset file ("" without Clock)
	ctr        *testcontainers.DockerContainer

	mu     sync.Mutex // serialises control operations
	closed atomic.Bool
}

var _ chaos.Node = (*Node)(nil)

// Name implements chaos.Node: "n0", "n1", ...
func (n *Node) Name() string { return n.name }

// Addr implements chaos.Node: "127.0.0.1:<pinned host port>", the same
// after Kill and Start.
func (n *Node) Addr() string { return n.addr }

// ContainerName is the Docker container's name, redfence-<backend ID>-<call>-<node name>.
func (n *Node) ContainerName() string { return n.cname }

// ContainerID is the Docker container's ID.
func (n *Node) ContainerID() string { return n.ctr.GetContainerID() }

func (n *Node) errorf(op string, err error) error {
	return &NodeError{Node: n.name, Container: n.cname, Op: op, Err: err}
}

// state inspects the container.
func (n *Node) state(ctx context.Context) (*container.State, error) {
	res, err := n.b.cli.ContainerInspect(ctx, n.ctr.GetContainerID(), client.ContainerInspectOptions{})
	if err != nil {
		return nil, fmt.Errorf("inspect: %w", err)
	}
	if res.Container.State == nil {
		return nil, errors.New("inspect: engine returned no container state")
	}
	return res.Container.State, nil
}

// withState runs f, the operation op, with the operation lock held and the
// container's state just inspected; it fails with ErrClosed on a closed
// node. Its errors, and f's, name the node and op.
func (n *Node) withState(ctx context.Context, op string, f func(st *container.State) error) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed.Load() {
		return n.errorf(op, ErrClosed)
	}
	st, err := n.state(ctx)
	if err == nil {
		err = f(st)
	}
	if err != nil {
		return n.errorf(op, err)
	}
	return nil
}

// Kill implements chaos.Node: docker kill (SIGKILL; a paused container is
// killed without running again first), then it waits until the container
// has stopped. Its data directory stays.
func (n *Node) Kill(ctx context.Context) error {
	return n.withState(ctx, "kill", func(st *container.State) error {
		if !st.Running {
			return nil
		}
		_, kerr := n.b.cli.ContainerKill(ctx, n.ctr.GetContainerID(), client.ContainerKillOptions{Signal: "KILL"})
		ctx, cancel := context.WithTimeout(ctx, killWaitTimeout)
		defer cancel()
		timer := time.NewTimer(0)
		defer timer.Stop()
		for {
			select {
			case <-ctx.Done():
				return errors.Join(kerr, fmt.Errorf("container still running: %w", ctx.Err()))
			case <-timer.C:
			}
			st, err := n.state(ctx)
			if err != nil {
				return errors.Join(kerr, err)
			}
			if !st.Running {
				return nil // a kill error racing with the process's own exit is moot
			}
			if kerr != nil {
				return kerr
			}
			timer.Reset(pollInterval)
		}
	})
}

// Start implements chaos.Node: docker start on the same container, with the
// same pinned host port, then it waits until Redis answers PING (bounded by
// ctx and the start timeout). It fails if the port was taken meanwhile.
func (n *Node) Start(ctx context.Context) error {
	return n.withState(ctx, "start", func(st *container.State) error {
		if st.Running {
			return nil
		}
		return n.ctr.Start(ctx)
	})
}

// Pause implements chaos.Node: docker pause (cgroup freezer). Connections
// are still accepted by the kernel, but nothing is answered until Resume.
// It fails with ErrNotRunning on a killed node.
func (n *Node) Pause(ctx context.Context) error {
	return n.setPaused(ctx, "pause", true)
}

// Resume implements chaos.Node: docker unpause. It fails with ErrNotRunning
// on a killed node.
func (n *Node) Resume(ctx context.Context) error {
	return n.setPaused(ctx, "resume", false)
}

func (n *Node) setPaused(ctx context.Context, op string, pause bool) error {
	return n.withState(ctx, op, func(st *container.State) error {
		var err error
		switch {
		case !st.Running:
			return ErrNotRunning
		case st.Paused == pause:
			return nil
		case pause:
			// The cgroup freezer gives up when a process does not stop in
			// time, as on a heavily loaded machine ("unable to freeze"),
			// and leaves the container running: try again, within ctx.
			for attempt := 1; ; attempt++ {
				_, err = n.b.cli.ContainerPause(ctx, n.ctr.GetContainerID(), client.ContainerPauseOptions{})
				if err == nil || attempt >= pauseAttempts || !strings.Contains(err.Error(), "unable to freeze") {
					break
				}
				select {
				case <-ctx.Done():
					return errors.Join(err, ctx.Err())
				case <-time.After(pollInterval):
				}
			}
		default:
			_, err = n.b.cli.ContainerUnpause(ctx, n.ctr.GetContainerID(), client.ContainerUnpauseOptions{})
		}
		return err
	})
}

// SetClockOffset implements chaos.Node: it rewrites the node's offset file,
// which the preloaded shim reads on every gettimeofday, so the change is
// immediate, and lasts across Kill and Start. It fails with ErrNoClock
// unless the node was started with NodeSpec.Clock.
func (n *Node) SetClockOffset(_ context.Context, d time.Duration) error {
	if n.closed.Load() {
		return n.errorf("set clock offset", ErrClosed)
	}
	if !n.clock {
		return n.errorf("set clock offset", ErrNoClock)
	}
	if err := clockshim.WriteOffset(n.offsetPath, d); err != nil {
		return n.errorf("set clock offset", err)
	}
	return nil
}

// Close implements chaos.Node: it removes the container (and with it the
// node's data) and its clock offset file. It is idempotent; other methods
// then fail with ErrClosed.
func (n *Node) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed.Swap(true) {
		return nil
	}
	var errs []error
	if n.ctr != nil {
		errs = append(errs, terminate(n.ctr))
	}
	n.removeOffsetFile()
	if err := errors.Join(errs...); err != nil {
		return n.errorf("close", err)
	}
	return nil
}

func (n *Node) removeOffsetFile() {
	if n.offsetPath != "" {
		_ = os.Remove(n.offsetPath)
	}
}

// terminate removes a container through testcontainers-go without a
// graceful stop (the data is being thrown away anyway); the engine kills a
// paused container too.
func terminate(ctr *testcontainers.DockerContainer) error {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	err := ctr.Terminate(ctx, testcontainers.StopTimeout(0))
	if err != nil && isNotFound(err) {
		return nil
	}
	return err
}

func isNotFound(err error) bool { return cerrdefs.IsNotFound(err) }
