package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/redfence/redfence/internal/redisnode"
)

// errNoRedis is returned when redis-server is not on PATH and cannot be
// installed automatically.
var errNoRedis = errors.New("redis-server not found: install it with `sudo apt-get install redis-server` (Debian/Ubuntu) or set " + redisnode.EnvBinary)

// installTimeout bounds the apt-get update and install together.
const installTimeout = 10 * time.Minute

// redisFinder locates the redis-server executable, installing it with
// apt-get when it is missing and that is possible. Its fields are the
// environment it depends on, so tests can replace them.
type redisFinder struct {
	lookPath func(file string) (string, error)
	getenv   func(key string) string
	isRoot   func() bool
	// install runs the package installation, passing its output through.
	install func(ctx context.Context, stdout, stderr io.Writer) error
}

// systemRedisFinder looks at the real PATH and environment and installs with
// the real apt-get.
func systemRedisFinder() redisFinder {
	return redisFinder{
		lookPath: exec.LookPath,
		getenv:   os.Getenv,
		isRoot:   func() bool { return os.Geteuid() == 0 },
		install:  aptInstallRedis,
	}
}

// find returns the path of redis-server. explicit is the -redis-server flag
// (empty when not given), which takes precedence over $REDFENCE_REDIS_SERVER.
// An explicitly named binary that does not exist is an error: installing a
// package would not fix it. A redis-server missing from PATH is installed
// with apt-get when running as root on a system that has it; otherwise the
// error says what to install. Progress goes to stderr.
func (f redisFinder) find(ctx context.Context, explicit string, stdout, stderr io.Writer) (string, error) {
	name, source := explicit, "-redis-server"
	if name == "" {
		name, source = f.getenv(redisnode.EnvBinary), "$"+redisnode.EnvBinary
	}
	if name != "" {
		path, err := f.lookPath(name)
		if err != nil {
			return "", fmt.Errorf("redis-server %q (from %s) is not an executable: %w; fix the path, or leave %s and $%s unset to use redis-server from PATH",
				name, source, err, "-redis-server", redisnode.EnvBinary)
		}
		return path, nil
	}
	if path, err := f.lookPath("redis-server"); err == nil {
		return path, nil
	}
	if !f.isRoot() {
		return "", errNoRedis
	}
	if _, err := f.lookPath("apt-get"); err != nil {
		return "", errNoRedis
	}
	fmt.Fprintln(stderr, "redis-server not found; installing it with apt-get")
	if err := f.install(ctx, stdout, stderr); err != nil {
		return "", fmt.Errorf("installing redis-server with apt-get: %w", err)
	}
	path, err := f.lookPath("redis-server")
	if err != nil {
		return "", fmt.Errorf("apt-get install redis-server finished but redis-server is still not on PATH (%w); set %s to its path", err, redisnode.EnvBinary)
	}
	return path, nil
}

// aptInstallRedis runs apt-get update and apt-get install redis-server,
// passing their output through, bounded by ctx and installTimeout.
func aptInstallRedis(ctx context.Context, stdout, stderr io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, installTimeout)
	defer cancel()
	steps := [][]string{
		{"apt-get", "update", "-qq"},
		{"apt-get", "install", "-y", "-qq", "redis-server"},
	}
	for _, argv := range steps {
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		cmd.Stdout, cmd.Stderr = stdout, stderr
		// On cancellation ask apt-get to stop (SIGTERM lets it release its
		// locks); SIGKILL follows after WaitDelay, which also bounds the wait
		// for output copying if a grandchild still holds the pipes.
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
		cmd.WaitDelay = 5 * time.Second
		if err := cmd.Run(); err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return fmt.Errorf("%s: %w (%w)", strings.Join(argv, " "), ctxErr, err)
			}
			return fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
		}
	}
	return nil
}
