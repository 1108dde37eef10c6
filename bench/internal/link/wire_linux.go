package link

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// envWire names the variable that makes a copy of the program a wire; its
// value is the wire's configuration (wireConfig, JSON).
const envWire = "LOCKBENCH_LINK_WIRE"

// wireConfig is what Open tells the wire process. The wire gets the host
// side's TUN device as file descriptor 3, and runs in a network namespace
// of its own, where it creates the nodes' device.
type wireConfig struct {
	Latency time.Duration
	MTU     int
	NodeDev string // name of the nodes' device (a %d pattern)
	NodeIP  string
	HostIP  string
}

// wireStats is the wire's last line on stdout: "stats " and this, JSON.
type wireStats struct {
	ToNodes, FromNodes Direction
}

// RunWireIfChild runs the wire and exits if this process was started as one
// by Open, and returns at once otherwise. Call it first thing in main, and
// in TestMain of every package whose tests open a link.
func RunWireIfChild() {
	v, ok := os.LookupEnv(envWire)
	if !ok {
		return
	}
	os.Exit(serveWire(v, os.NewFile(3, "host TUN device"), os.Stdin, os.Stdout, os.Stderr))
}

// serveWire is the wire process: it creates and configures the nodes'
// device, says "ready NAME" on out, forwards packets both ways until ctl
// reaches end of file or SIGTERM comes, then writes its stats on out. It
// returns the exit code.
func serveWire(conf string, host *os.File, ctl io.Reader, out, errw io.Writer) int {
	var cfg wireConfig
	if err := json.Unmarshal([]byte(conf), &cfg); err != nil {
		fmt.Fprintf(errw, "wire: bad configuration %q: %v\n", conf, err)
		return 2
	}
	// Only Close (or SIGTERM) stops the wire: a ^C in the terminal reaches
	// the benchmark, which then tears down in order.
	signal.Ignore(os.Interrupt)
	node, name, err := openTUN(cfg.NodeDev)
	if err != nil {
		fmt.Fprintf(errw, "wire: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	err = configure(ctx, name, cfg.NodeIP, cfg.HostIP, cfg.MTU, true)
	cancel()
	if err != nil {
		fmt.Fprintf(errw, "wire: %v\n", err)
		return 1
	}
	hostFd, nodeFd := int(host.Fd()), int(node.Fd())
	toNodes := newLine(hostFd, nodeFd, cfg.Latency, cfg.MTU)
	fromNodes := newLine(nodeFd, hostFd, cfg.Latency, cfg.MTU)
	// The lines block in read on devices that never reach end of file:
	// they end with the process.
	go func() { _ = toNodes.run() }()
	go func() { _ = fromNodes.run() }()
	fmt.Fprintf(out, "ready %s\n", name)

	stop := make(chan struct{}, 2)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	go func() {
		_, _ = io.Copy(io.Discard, ctl)
		stop <- struct{}{}
	}()
	select {
	case <-stop:
	case <-sig:
	}
	st := wireStats{ToNodes: toNodes.direction(), FromNodes: fromNodes.direction()}
	st.FromNodes.Dropped += txDropped("self", name)
	b, _ := json.Marshal(st)
	fmt.Fprintf(out, "stats %s\n", b)
	// The lines use the raw descriptors: the files must not be finalized
	// (closed) before this.
	runtime.KeepAlive(host)
	runtime.KeepAlive(node)
	return 0
}

// configure gives device dev (in this process's namespace) the address ip
// with peer as the other end, the MTU, and brings it up; with lo set, also
// the loopback device (a fresh namespace has it down). IPv6 is turned off
// on dev, so that the kernel's own router solicitations do not cross the
// wire.
func configure(ctx context.Context, dev, ip, peer string, mtu int, lo bool) error {
	_ = os.WriteFile("/proc/sys/net/ipv6/conf/"+dev+"/disable_ipv6", []byte("1"), 0o644)
	steps := [][]string{
		{"addr", "add", ip, "peer", peer + "/32", "dev", dev},
		{"link", "set", "dev", dev, "mtu", strconv.Itoa(mtu), "txqueuelen", "1000", "up"},
	}
	if lo {
		steps = append([][]string{{"link", "set", "dev", "lo", "up"}}, steps...)
	}
	for _, args := range steps {
		if err := ipCmd(ctx, args...); err != nil {
			return err
		}
	}
	return nil
}

// ipCmd runs ip(8) with args.
func ipCmd(ctx context.Context, args ...string) error {
	var outb bytes.Buffer
	cmd := exec.CommandContext(ctx, "ip", args...)
	cmd.Stdout, cmd.Stderr = &outb, &outb
	if err := cmd.Run(); err != nil {
		return permission("ip "+strings.Join(args, " "), fmt.Errorf("%w: %s", err, bytes.TrimSpace(outb.Bytes())))
	}
	return nil
}
