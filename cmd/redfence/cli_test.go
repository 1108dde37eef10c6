package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redisnode"
	"github.com/redfence/redfence/internal/redistest"
)

// cliBinDir is where redfenceBinary builds the binary; TestMain creates and
// removes it.
var cliBinDir string

// cliBuild builds the binary once for all tests.
var cliBuild struct {
	once sync.Once
	path string
	err  error
}

// Bounds of the end-to-end tests.
const (
	buildTimeout = 3 * time.Minute
	cliTimeout   = 30 * time.Second // one redfence run
)

// redfenceBinary returns the path of the redfence binary built from this
// package (with -race when the tests run with it, so that the subprocesses
// are checked too), building it on first use.
func redfenceBinary(t *testing.T) string {
	t.Helper()
	cliBuild.once.Do(func() {
		goBin, err := exec.LookPath("go")
		if err != nil {
			cliBuild.err = err
			return
		}
		path := filepath.Join(cliBinDir, "redfence")
		args := []string{"build", "-o", path}
		if raceEnabled {
			args = append(args, "-race")
		}
		ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
		defer cancel()
		out, err := exec.CommandContext(ctx, goBin, append(args, ".")...).CombinedOutput()
		if err != nil {
			cliBuild.err = errors.New("go build: " + err.Error() + "\n" + string(out))
			return
		}
		cliBuild.path = path
	})
	if cliBuild.err != nil {
		t.Fatalf("building redfence: %v", cliBuild.err)
	}
	return cliBuild.path
}

// cliEnv returns the test process's environment without REDFENCE_*
// variables, plus extra. A binary built with -race would sleep for a second
// before exiting with status 0 (GORACE atexit_sleep_ms): not here.
func cliEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "REDFENCE_") && !strings.HasPrefix(kv, "GORACE=") {
			env = append(env, kv)
		}
	}
	env = append(env, "GORACE=atexit_sleep_ms=0")
	return append(env, extra...)
}

// cliResult is the outcome of one redfence run.
type cliResult struct {
	code           int
	stdout, stderr string
	elapsed        time.Duration
}

// cliProc is a redfence process started by startCLI.
type cliProc struct {
	t              *testing.T
	cmd            *exec.Cmd
	stdout, stderr *bytes.Buffer
	start          time.Time
}

// startCLI starts redfence with args and env (see cliEnv), killed if it
// runs longer than cliTimeout. Call wait for its result.
func startCLI(t *testing.T, env []string, args ...string) *cliProc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, redfenceBinary(t), args...)
	cmd.Env = env
	cmd.WaitDelay = 5 * time.Second
	p := &cliProc{t: t, cmd: cmd, stdout: new(bytes.Buffer), stderr: new(bytes.Buffer)}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	p.start = time.Now()
	require.NoError(t, cmd.Start())
	return p
}

// wait waits for the process and returns its result. A process that died
// by a signal, or whose race detector reported a race, fails the test.
func (p *cliProc) wait() cliResult {
	p.t.Helper()
	err := p.cmd.Wait()
	r := cliResult{code: p.cmd.ProcessState.ExitCode(), stdout: p.stdout.String(), stderr: p.stderr.String(), elapsed: time.Since(p.start)}
	p.t.Logf("redfence %s\n-> exit %d after %v\nstdout:\n%s\nstderr:\n%s",
		strings.Join(p.cmd.Args[1:], " "), r.code, r.elapsed.Round(time.Millisecond), r.stdout, r.stderr)
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		p.t.Fatalf("running redfence: %v", err)
	}
	require.NotEqual(p.t, -1, r.code, "redfence died by a signal (timeout?)")
	assert.NotContains(p.t, r.stderr, "WARNING: DATA RACE")
	return r
}

// runCLI runs redfence with args and env and returns its result.
func runCLI(t *testing.T, env []string, args ...string) cliResult {
	t.Helper()
	return startCLI(t, env, args...).wait()
}

// nodeList returns the nodes' addresses as a -nodes value.
func nodeList(nodes []*redisnode.Node) string {
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr()
	}
	return strings.Join(addrs, ",")
}

// assertKeyGone checks that no client's node holds key.
func assertKeyGone(t *testing.T, clients []redis.UniversalClient, key string) {
	t.Helper()
	for i, c := range clients {
		n, err := c.Exists(t.Context(), key).Result()
		require.NoError(t, err, "node %d", i)
		assert.Zero(t, n, "node %d still holds %s", i, key)
	}
}

// holdersOf returns the indices of the clients' nodes that hold key, and of
// those that do not.
func holdersOf(t *testing.T, clients []redis.UniversalClient, key string) (held, free []int) {
	t.Helper()
	for i, c := range clients {
		n, err := c.Exists(t.Context(), key).Result()
		require.NoError(t, err, "node %d", i)
		if n == 1 {
			held = append(held, i)
		} else {
			free = append(free, i)
		}
	}
	return held, free
}

// assertHeldOnMajority checks that a majority of the clients' nodes hold
// key, and returns the holders and the others. A lock is taken once a
// majority has granted it; a straggling SET to another node may land later
// or, past its per-node timeout, never.
func assertHeldOnMajority(t *testing.T, clients []redis.UniversalClient, key string) (held, free []int) {
	t.Helper()
	held, free = holdersOf(t, clients, key)
	require.Greater(t, len(held), len(clients)/2, "the lock is held on %d of %d nodes while the command runs", len(held), len(clients))
	return held, free
}

// holdKey stores value under key on every client's node for ttl, as
// another owner would.
func holdKey(t *testing.T, clients []redis.UniversalClient, key, value string, ttl time.Duration) {
	t.Helper()
	for i, c := range clients {
		require.NoError(t, c.Set(t.Context(), key, value, ttl).Err(), "node %d", i)
	}
}

// readFileEventually waits until path exists and is not empty, failing the
// test after timeout, and returns its content.
func readFileEventually(t *testing.T, path string, timeout time.Duration) string {
	t.Helper()
	var content []byte
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(path)
		content = b
		return err == nil && len(b) > 0
	}, timeout, 10*time.Millisecond, "%s was not written", path)
	return string(content)
}

// newNodes starts n default nodes (no persistence) and returns them with a
// client for each.
func newNodes(t *testing.T, n int, opts ...func(*redisnode.Options)) ([]*redisnode.Node, []redis.UniversalClient) {
	t.Helper()
	nodes := redistest.Nodes(t, n, opts...)
	return nodes, redistest.Clients(t, nodes)
}
