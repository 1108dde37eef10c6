package docker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/moby/moby/api/types/container"
	"github.com/testcontainers/testcontainers-go"

	"github.com/redfence/redfence/chaos"
	"github.com/redfence/redfence/chaos/internal/clockshim"
)

// redisArgs builds the redis-server arguments for spec.
func redisArgs(spec chaos.NodeSpec) ([]string, error) {
	args := []string{"--protected-mode", "no", "--dir", "/data", "--save", ""}
	switch spec.Persistence {
	case chaos.NoPersistence:
		args = append(args, "--appendonly", "no")
	case chaos.RDBSnapshot:
		// No automatic saves (--save '' above): only an explicit SAVE writes
		// the dump file, and the next Start loads it.
		args = append(args, "--appendonly", "no", "--dbfilename", "dump.rdb")
	case chaos.AOFAlways:
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	default:
		return nil, fmt.Errorf("docker: StartNodes: unknown persistence %d", spec.Persistence)
	}
	return append(args, spec.Args...), nil
}

// freePorts returns n distinct free TCP ports on 127.0.0.1, holding all
// listeners until every port is chosen so none repeats.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("pick a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// portTaken reports whether something now listens on 127.0.0.1:port.
func portTaken(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return true
	}
	_ = l.Close()
	return false
}

// startNode creates and starts one container and waits until it answers.
func (b *Backend) startNode(ctx context.Context, call int, name string, port int, clock bool, shim string, args []string, files map[string]string) (*Node, error) {
	nd := &Node{
		b:     b,
		name:  name,
		cname: fmt.Sprintf("redfence-%s-%d-%s", b.id, call, name),
		clock: clock,
	}
	env := map[string]string{}
	if clock {
		nd.offsetPath = filepath.Join(b.dir, nd.cname+".offset")
		if err := clockshim.WriteOffset(nd.offsetPath, 0); err != nil {
			return nil, nd.errorf("start", fmt.Errorf("write clock offset file: %w", err))
		}
		if err := os.Chmod(nd.offsetPath, 0o644); err != nil {
			return nil, nd.errorf("start", err)
		}
		env["LD_PRELOAD"] = shim
		env[clockshim.EnvFile] = shimMount + "/" + filepath.Base(nd.offsetPath)
	}

	var errs []error
	for attempt := 1; ; attempt++ {
		nd.port = port
		nd.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		ctr, err := testcontainers.Run(ctx, b.image, b.containerOpts(nd, clock, env, args, files)...)
		if err == nil {
			nd.ctr = ctr
			break
		}
		errs = append(errs, err)
		if ctr != nil {
			errs = append(errs, terminate(ctr)) // removing the failed container must not depend on ctx, which may be why Run failed; bounded by cleanupTimeout
		}
		if attempt >= portAttempts || ctx.Err() != nil || !portTaken(port) {
			nd.removeOffsetFile()
			return nil, nd.errorf("start", errors.Join(errs...))
		}
		// Someone took the port between our pick and Docker's bind.
		ps, perr := freePorts(1)
		if perr != nil {
			return nil, nd.errorf("start", errors.Join(append(errs, perr)...))
		}
		port = ps[0]
	}

	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, nd.errorf("start", errors.Join(ErrClosed, nd.Close())) // the backend closed under us: remove the container regardless of ctx; Close (chaos.Node) takes no context and is bounded by cleanupTimeout
	}
	b.nodes = append(b.nodes, nd)
	b.mu.Unlock()
	return nd, nil
}

// containerOpts is the testcontainers-go request for one node.
func (b *Backend) containerOpts(nd *Node, clock bool, env map[string]string, args []string, files map[string]string) []testcontainers.ContainerCustomizer {
	port := strconv.Itoa(nd.port)
	dir := b.dir
	timeout := b.cfg.startTimeout
	addr := nd.addr
	b.shimMu.Lock()
	binds := b.shimBinds
	b.shimMu.Unlock()
	opts := []testcontainers.ContainerCustomizer{
		testcontainers.WithLogger(b.cfg.logger),
		testcontainers.WithName(nd.cname),
		testcontainers.WithEntrypoint(b.entrypoint),
		// The node's own port and address last: they win over args.
		testcontainers.WithCmd(append(slices.Clone(args), "--port", port, "--bind", "127.0.0.1")...),
		testcontainers.WithLabels(map[string]string{LabelBackend: b.id, labelNode: nd.name}),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			// The host's network (see doc.go, Networking): the node keeps
			// its address across Kill and Start, no container ever takes
			// another's, and the engine keeps no network endpoints.
			hc.NetworkMode = "host"
			if clock {
				hc.Binds = append(hc.Binds, dir+":"+shimMount+":ro")
				hc.Binds = append(hc.Binds, binds...)
			}
		}),
		// Not WithWaitStrategy: that wraps the strategy in a 60s ForAll.
		testcontainers.CustomizeRequestOption(func(req *testcontainers.GenericContainerRequest) error {
			req.WaitingFor = pingWait{addr: addr, timeout: timeout}
			return nil
		}),
	}
	if len(env) > 0 {
		opts = append(opts, testcontainers.WithEnv(env))
	}
	for path, content := range files {
		// A fresh reader per container: each request reads it once.
		opts = append(opts, testcontainers.WithFiles(testcontainers.ContainerFile{
			Reader: strings.NewReader(content), ContainerFilePath: path, FileMode: 0o600,
		}))
	}
	return opts
}
