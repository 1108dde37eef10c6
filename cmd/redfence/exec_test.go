//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redisnode"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
)

// processGone reports whether process pid has ended: it does not exist, or
// is a zombie waiting for a parent (init, say) to reap it.
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return os.IsNotExist(err)
	}
	// The state follows the command name, which is in parentheses.
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] == 'Z' || b[i+2] == 'X'
	}
	return false
}

// readPID waits for path to hold a pid and returns it.
func readPID(t *testing.T, path string) int {
	t.Helper()
	s := readFileEventually(t, path, 10*time.Second)
	pid, err := strconv.Atoi(strings.TrimSpace(s))
	require.NoError(t, err, "pid file %s", path)
	return pid
}

// tokenLine parses the "KEY TOKEN" line written by the test command.
func tokenLine(t *testing.T, path string) (string, uint64) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err, "the command did not run")
	f := strings.Fields(string(b))
	require.Len(t, f, 2, "content %q", b)
	tok, err := strconv.ParseUint(f[1], 10, 64)
	require.NoError(t, err)
	return f[0], tok
}

// writeEnv is a command that writes "$REDFENCE_KEY $REDFENCE_TOKEN" to file.
func writeEnv(file string) []string {
	return []string{"sh", "-c", `echo "$REDFENCE_KEY $REDFENCE_TOKEN" > "$1"`, "sh", file}
}

func TestExecRunsCommand(t *testing.T) {
	t.Parallel()
	nodes, clients := newNodes(t, 3)
	dir := t.TempDir()
	key := redistest.Key(t)
	base := []string{"exec", "-nodes", nodeList(nodes), "-key", key, "-prefix", "p:", "-ttl", "2s"}

	// Fresh nodes: -vouch, as a user of a brand-new set would.
	out1 := filepath.Join(dir, "1")
	r := runCLI(t, cliEnv(), append(append(base, "-vouch", "-fencing", "--"), writeEnv(out1)...)...)
	require.Equal(t, 0, r.code)
	gotKey, tok1 := tokenLine(t, out1)
	assert.Equal(t, "p:"+key, gotKey, "REDFENCE_KEY is the full key")
	assert.Positive(t, tok1, "-fencing gives a token")
	assertKeyGone(t, clients, "p:"+key)

	out2 := filepath.Join(dir, "2")
	r = runCLI(t, cliEnv(), append(append(base, "-fencing", "--"), writeEnv(out2)...)...)
	require.Equal(t, 0, r.code)
	_, tok2 := tokenLine(t, out2)
	assert.Greater(t, tok2, tok1, "tokens increase across acquisitions")
	assertKeyGone(t, clients, "p:"+key)

	out3 := filepath.Join(dir, "3")
	r = runCLI(t, cliEnv(), append(append(base, "--"), writeEnv(out3)...)...)
	require.Equal(t, 0, r.code)
	_, tok3 := tokenLine(t, out3)
	assert.Zero(t, tok3, "no token without -fencing")

	// The command's exit status, and 128+signal.
	r = runCLI(t, cliEnv(), append(base, "--", "sh", "-c", "exit 7")...)
	assert.Equal(t, 7, r.code)
	r = runCLI(t, cliEnv(), append(base, "--", "sh", "-c", "kill -TERM $$")...)
	assert.Equal(t, 128+int(syscall.SIGTERM), r.code)
	assertKeyGone(t, clients, "p:"+key)

	// Output and stdin pass through; the environment is the parent's plus ours.
	r = runCLI(t, cliEnv("EXTRA=kept"), append(base, "--", "sh", "-c", `echo "out $EXTRA"; echo err >&2`)...)
	assert.Equal(t, 0, r.code)
	assert.Equal(t, "out kept\n", r.stdout)
	assert.Equal(t, "err\n", r.stderr)

	// A missing command is found out before the lock is taken.
	r = runCLI(t, cliEnv(), append(base, "--", "no-such-command-redfence")...)
	assert.Equal(t, exitNotFound, r.code)
	assert.Contains(t, r.stderr, "no-such-command-redfence")
}

func TestExecSingle(t *testing.T) {
	t.Parallel()
	nodes, clients := newNodes(t, 1)
	dir := t.TempDir()
	key := redistest.Key(t)
	var last uint64
	for i := range 2 {
		out := filepath.Join(dir, strconv.Itoa(i))
		// single's quarantine is off by default: no -vouch needed.
		r := runCLI(t, cliEnv(), append([]string{"exec", "-single", "-fencing", "-nodes", nodes[0].Addr(), "-key", key, "--"}, writeEnv(out)...)...)
		require.Equal(t, 0, r.code)
		_, tok := tokenLine(t, out)
		assert.Greater(t, tok, last)
		last = tok
	}
	assertKeyGone(t, clients, key)
}

func TestExecHeldByAnotherOwner(t *testing.T) {
	t.Parallel()
	nodes, clients := newNodes(t, 3)
	key := redistest.Key(t)
	holdKey(t, clients, key, "another-owner", time.Minute)
	marker := filepath.Join(t.TempDir(), "ran")
	args := []string{"exec", "-nodes", nodeList(nodes), "-key", key, "-quarantine", "0"}
	cmd := []string{"--", "touch", marker}

	r := runCLI(t, cliEnv(), append(args, cmd...)...)
	assert.Equal(t, exitLockHeld, r.code)
	assert.Less(t, r.elapsed, 3*time.Second, "-wait 0 makes one attempt")
	assert.Contains(t, r.stderr, "is held by another owner")

	r = runCLI(t, cliEnv(), append(append(args, "-wait", "300ms"), cmd...)...)
	assert.Equal(t, exitLockHeld, r.code)
	assert.GreaterOrEqual(t, r.elapsed, 300*time.Millisecond, "-wait 300ms waits")
	assert.Less(t, r.elapsed, 3*time.Second)
	assert.Contains(t, r.stderr, "is held by another owner")

	assert.NoFileExists(t, marker, "the command must not run without the lock")
	for i, c := range clients {
		v, err := c.Get(t.Context(), key).Result()
		require.NoError(t, err)
		assert.Equal(t, "another-owner", v, "node %d: the holder's key is untouched", i)
	}
}

func TestExecNodesUnavailable(t *testing.T) {
	t.Parallel()
	nodes, _ := newNodes(t, 3)
	key := redistest.Key(t)
	marker := filepath.Join(t.TempDir(), "ran")

	// Brand-new nodes, not vouched for: the default quarantine holds them back.
	r := runCLI(t, cliEnv(), "exec", "-nodes", nodeList(nodes), "-key", key, "--", "touch", marker)
	assert.Equal(t, exitUnavailable, r.code)
	assert.Contains(t, r.stderr, "restart quarantine")
	assert.Contains(t, r.stderr, "-vouch")

	// A majority down.
	require.NoError(t, nodes[1].Kill())
	require.NoError(t, nodes[2].Kill())
	r = runCLI(t, cliEnv(), "exec", "-nodes", nodeList(nodes), "-key", key, "-quarantine", "0", "--", "touch", marker)
	assert.Equal(t, exitUnavailable, r.code)
	assert.Contains(t, r.stderr, "was not acquired")
	assert.NoFileExists(t, marker)
}

// trapScript is a command that records SIGTERM in dir/term instead of
// dying, starts a background sleep (its pid in dir/gc), writes its own pid to
// dir/pid and loops. With exitOnTerm it exits 0 after recording SIGTERM.
func trapScript(dir string, exitOnTerm bool) []string {
	onTerm := `echo term >> "$1/term"`
	if exitOnTerm {
		onTerm += "; exit 0"
	}
	script := `trap '` + onTerm + `' TERM
sleep 30 &
echo $! > "$1/gc"
echo $$ > "$1/pid.tmp" && mv "$1/pid.tmp" "$1/pid"
while :; do sleep 0.1; done`
	return []string{"sh", "-c", script, "sh", dir}
}

// startTrapped starts "redfence exec -nodes NODES flags -- script", script
// being trapScript(dir, ...) or a variant, and waits for the pids of the
// command and of its background sleep. The command's group gets SIGKILL when
// the test ends, whatever the outcome.
func startTrapped(t *testing.T, nodes []*redisnode.Node, dir string, script []string, flags ...string) (p *cliProc, pid, gc int) {
	t.Helper()
	args := append(append([]string{"exec", "-nodes", nodeList(nodes)}, flags...), "--")
	p = startCLI(t, cliEnv(), append(args, script...)...)
	pid = readPID(t, filepath.Join(dir, "pid"))
	gc = readPID(t, filepath.Join(dir, "gc"))
	t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })
	return p, pid, gc
}

// assertTermedAndGone checks that trapScript's command (pid) recorded one
// SIGTERM in dir and is gone, and that its background sleep (gc) goes too.
func assertTermedAndGone(t *testing.T, dir string, pid, gc int) {
	t.Helper()
	term, err := os.ReadFile(filepath.Join(dir, "term"))
	require.NoError(t, err, "the command did not get SIGTERM")
	assert.Equal(t, "term\n", string(term))
	assert.True(t, processGone(pid), "the command must be gone")
	assert.Eventually(t, func() bool { return processGone(gc) }, 5*time.Second, 10*time.Millisecond,
		"the command's background process must be gone")
}

// assertInterrupted checks the outcome r of a redfence exec that a signal
// stopped while it ran trapScript(dir, true): exit 130 with its message, the
// command stopped with SIGTERM, the lock released.
func assertInterrupted(t *testing.T, r cliResult, dir string, pid, gc int, clients []redis.UniversalClient, key string) {
	t.Helper()
	assert.Equal(t, exitInterrupted, r.code)
	assert.Contains(t, r.stderr, "redfence: interrupted; stopping the command")
	assertTermedAndGone(t, dir, pid, gc)
	assertKeyGone(t, clients, key)
}

func TestExecLockLost(t *testing.T) {
	t.Parallel()
	nodes, _ := newNodes(t, 5)
	t.Cleanup(func() {
		for _, n := range nodes[:3] {
			assert.NoError(t, n.Resume())
		}
	})
	dir := t.TempDir()
	p, pid, gc := startTrapped(t, nodes, dir, trapScript(dir, false),
		"-key", redistest.Key(t), "-quarantine", "0", "-ttl", "2s", "-grace", "500ms")

	paused := time.Now()
	for _, n := range nodes[:3] {
		require.NoError(t, n.Pause())
	}
	r := p.wait()
	sincePause := time.Since(paused)
	t.Logf("redfence exited %v after the pause", sincePause.Round(time.Millisecond))

	assert.Equal(t, exitLockLost, r.code)
	assert.Contains(t, r.stderr, "redfence: lock lost: ")
	assert.Contains(t, r.stderr, "; stopping the command\n")
	assert.Contains(t, r.stderr, "sending SIGKILL", "the command ignored SIGTERM")
	assert.Less(t, sincePause, 10*time.Second, "the loss must be acted on within about one TTL")
	assertTermedAndGone(t, dir, pid, gc)
}

func TestExecInterrupted(t *testing.T) {
	t.Parallel()
	nodes, clients := newNodes(t, 3)
	dir := t.TempDir()
	key := redistest.Key(t)
	// A -grace of 5s (it was the default): the group's killed background
	// process counts until init has reaped it, which can take a while on a
	// loaded machine.
	p, pid, gc := startTrapped(t, nodes, dir, trapScript(dir, true), "-key", key, "-quarantine", "0", "-ttl", "6s", "-grace", "5s")
	assertHeldOnMajority(t, clients, key)

	require.NoError(t, p.cmd.Process.Signal(os.Interrupt))
	r := p.wait()
	assertInterrupted(t, r, dir, pid, gc, clients, key)
	assert.NotContains(t, r.stderr, "sending SIGKILL", "the command exits on SIGTERM")
}

// TestExecHangupAndQuit checks that SIGHUP (the terminal or SSH session went
// away) and SIGQUIT are treated as SIGTERM: the command is stopped and the
// lock released before redfence exits 130. Before, either signal killed
// redfence at once and left the command running, no longer extended.
func TestExecHangupAndQuit(t *testing.T) {
	t.Parallel()
	nodes, clients := newNodes(t, 3)
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGQUIT} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			key := redistest.Key(t)
			p, pid, gc := startTrapped(t, nodes, dir, trapScript(dir, true), "-key", key, "-quarantine", "0", "-ttl", "2s")

			require.NoError(t, p.cmd.Process.Signal(sig))
			assertInterrupted(t, p.wait(), dir, pid, gc, clients, key)
		})
	}
}

// TestExecHangupWithClosedOutput is the SSH session that went away with
// redfence's stderr a pipe (ssh without a terminal): the hangup arrives and
// the reader of stderr is gone. Writing the "interrupted" line must not kill
// redfence (SIGPIPE) before it has stopped the command and released the lock.
func TestExecHangupWithClosedOutput(t *testing.T) {
	t.Parallel()
	nodes, clients := newNodes(t, 3)
	dir := t.TempDir()
	key := redistest.Key(t)
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	// The command's own stderr must not be the dead pipe: a shell that
	// writes to it dies of SIGPIPE itself.
	script := trapScript(dir, true)
	script[2] = "exec 2>/dev/null\n" + script[2]
	cmd := exec.CommandContext(ctx, redfenceBinary(t), append([]string{"exec", "-nodes", nodeList(nodes), "-key", key,
		"-quarantine", "0", "-ttl", "2s", "--"}, script...)...)
	cmd.Env = cliEnv()
	errR, errW, err := os.Pipe()
	require.NoError(t, err)
	cmd.Stderr = errW
	require.NoError(t, cmd.Start())
	require.NoError(t, errW.Close())
	pid := readPID(t, filepath.Join(dir, "pid"))
	t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL) }) // whatever the outcome
	// The session is gone: nobody reads stderr.
	require.NoError(t, errR.Close())

	require.NoError(t, cmd.Process.Signal(syscall.SIGHUP))
	err = cmd.Wait()
	var ee *exec.ExitError
	if err != nil {
		require.ErrorAs(t, err, &ee)
	}
	assert.Equal(t, exitInterrupted, cmd.ProcessState.ExitCode(), "redfence must not die of SIGPIPE: %v", cmd.ProcessState)
	term, err := os.ReadFile(filepath.Join(dir, "term"))
	require.NoError(t, err, "the command did not get SIGTERM")
	assert.Equal(t, "term\n", string(term))
	assert.True(t, processGone(pid), "the command must be gone")
	assertKeyGone(t, clients, key)
}

// TestExecStopsCommandBeforeLockExpires checks when the command gets SIGTERM
// after the lease is lost: before the lock's keys expire on the nodes that
// stopped extending them, that is, before another client could take the lock.
// Three of five nodes refuse the extend script from then on (an ACL change,
// so that the test can still read their keys' TTL); TestExecLockLost only
// bounds the whole run, so a SIGTERM one TTL late passed it.
func TestExecStopsCommandBeforeLockExpires(t *testing.T) {
	t.Parallel()
	nodes, clients := newNodes(t, 5)
	dir := t.TempDir()
	key := redistest.Key(t)
	const ttl = 5 * time.Second
	script := `trap 'date +%s%N > "$1/term"; exit 0' TERM
echo $$ > "$1/pid.tmp" && mv "$1/pid.tmp" "$1/pid"
while :; do sleep 0.05; done`
	p := startCLI(t, cliEnv(), "exec", "-nodes", nodeList(nodes), "-key", key, "-quarantine", "0",
		"-ttl", ttl.String(), "-grace", "500ms", "--", "sh", "-c", script, "sh", dir)
	pid := readPID(t, filepath.Join(dir, "pid"))
	t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL) }) // whatever the outcome

	// From here on the keys on nodes 0-2 keep the expiry of the last extend
	// that reached them: the earliest of them is no later than when the lock
	// can be taken by another client (3 of 5 free). A node that a straggling
	// SET never reached holds no key (PTTL -2) and is free already; the lock
	// was granted by a majority, so at least one of nodes 0-2 holds it.
	assertHeldOnMajority(t, clients, key)
	expires := time.Now().Add(time.Hour)
	for i, c := range clients[:3] {
		require.NoError(t, c.Do(t.Context(), "ACL", "SETUSER", "default", "-eval", "-evalsha").Err(), "node %d", i)
	}
	holders := 0
	for i, c := range clients[:3] {
		before := time.Now() // the key expires no earlier than before + its PTTL
		left, err := c.PTTL(t.Context(), key).Result()
		require.NoError(t, err, "node %d", i)
		if left == -2*time.Nanosecond { // go-redis passes PTTL's -2 (no key) through as is
			continue
		}
		require.Positive(t, left, "node %d holds the lock with a TTL", i)
		holders++
		if e := before.Add(left); e.Before(expires) {
			expires = e
		}
	}
	require.Positive(t, holders, "a majority of 5 includes one of nodes 0-2")

	r := p.wait()
	require.Equal(t, exitLockLost, r.code)
	b, err := os.ReadFile(filepath.Join(dir, "term"))
	require.NoError(t, err, "the command did not get SIGTERM")
	ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	require.NoError(t, err)
	term := time.Unix(0, ns)
	t.Logf("SIGTERM reached the command %v before the keys expired", expires.Sub(term).Round(time.Millisecond))
	assert.True(t, term.Before(expires), "the command got SIGTERM %v after the lock's keys expired", term.Sub(expires))
	assert.True(t, processGone(pid), "the command must be gone")
}

// TestExecVouchRefusedWhileHeld is the FLUSHALL of three of five nodes while
// A holds the lock: the refusal shows nodes reporting the key held, so exec
// must not suggest vouching, and -vouch must refuse rather than run B next
// to A.
func TestExecVouchRefusedWhileHeld(t *testing.T) {
	t.Parallel()
	nodes, clients := newNodes(t, 5)
	list := nodeList(nodes)
	dir := t.TempDir()
	key := redistest.Key(t)
	r := runCLI(t, cliEnv(), "nodes", "vouch", "-nodes", list)
	require.Equal(t, exitOK, r.code, "brand-new nodes")

	a, _, _ := startTrapped(t, nodes, dir, trapScript(dir, true), "-key", key, "-ttl", "30s")
	// A holds a majority; a straggling SET may have missed a node. Flush
	// three nodes, every node without A's key among them, so that the other
	// two hold it. A straggler landing on a flushed node after the flush
	// changes nothing below: that node has no marker, so it is quarantined.
	held, free := assertHeldOnMajority(t, clients, key)
	flushed := slices.Concat(free, held)[:3]
	for _, i := range flushed {
		require.NoError(t, clients[i].FlushAll(t.Context()).Err(), "node %d", i)
	}

	marker := filepath.Join(t.TempDir(), "b-ran")
	r = runCLI(t, cliEnv(), "exec", "-nodes", list, "-key", key, "--", "touch", marker)
	assert.Equal(t, exitUnavailable, r.code)
	assert.Contains(t, r.stderr, "key held by another owner")
	assert.Contains(t, r.stderr, "in restart quarantine")
	assert.NotContains(t, r.stderr, "-vouch", "no hint to vouch while nodes report the key held")
	assert.Contains(t, r.stderr, "Do not vouch for them")

	r = runCLI(t, cliEnv(), "exec", "-vouch", "-nodes", list, "-key", key, "--", "touch", marker)
	assert.Equal(t, exitUnavailable, r.code)
	assert.Contains(t, r.stderr, "redfence exec: vouching for the nodes: ")
	assert.Contains(t, r.stderr, "node is not brand-new")
	assert.NoFileExists(t, marker, "B must not run while A holds the lock")

	r = runCLI(t, cliEnv(), "nodes", "vouch", "-nodes", list)
	assert.Equal(t, exitUnavailable, r.code)
	assert.Equal(t, 5, strings.Count(r.stdout, ": NOT vouched for: "), "none is vouched for")
	assert.Contains(t, r.stderr, "vouching was refused, for no node")
	locks, err := redlock.New(clients, redlock.WithQuarantine(0))
	require.NoError(t, err)
	defer locks.Close()
	ins, err := locks.Inspect(t.Context(), key)
	require.NoError(t, err)
	for _, i := range flushed {
		n := ins.Nodes[i]
		require.NoError(t, n.Err)
		assert.False(t, n.Quarantine.Vouched, "flushed node %d vouched for", n.Index)
	}

	// A's next extend finds its key gone from the flushed nodes: it may have
	// stopped its command as lost (75) already.
	require.NoError(t, a.cmd.Process.Signal(os.Interrupt))
	assert.Contains(t, []int{exitInterrupted, exitLockLost}, a.wait().code)
}
