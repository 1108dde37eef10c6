package link

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redfence/redfence/bench/internal/rig"
)

// Link is a network path from this process's network namespace to a
// namespace of its own, where nodes started on Host run, with a delay added
// each way. Its methods are safe for concurrent use.
type Link struct {
	latency          time.Duration
	mtu              int
	hostIP, nodeIP   string
	hostDev, nodeDev string
	nsenter          string

	cmd    *exec.Cmd
	ctl    *os.File      // the wire's stdin: closing it stops the wire
	lines  chan string   // the wire's stdout, line by line; closed at its end
	exited chan struct{} // closed once the wire has exited (cmd.Wait returned)
	stderr *bytes.Buffer // the wire's stderr, to read once exited is closed
	pid    int           // the wire's process, which holds the namespace
	nsIno  uint64        // the namespace's inode (tests)
	ports  atomic.Int32  // the last port handed out by Host
	once   sync.Once
	err    error
	stats  Stats
}

// Option configures Open.
type Option interface{ apply(*config) }

type config struct{ mtu int }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithMTU sets the MTU of both devices, in bytes, from 1280 to 65535. The
// default is 1500, an Ethernet's.
func WithMTU(n int) Option { return optionFunc(func(c *config) { c.mtu = n }) }

// devicePrefix starts the name of every device a link makes.
const devicePrefix = "lbwire"

// basePort is the first port Host hands out: in the link's namespace every
// port is free.
const basePort = 7000

// seq tells apart the links of one process.
var seq atomic.Int32

// Open makes a link that delays every packet by latency (0 or more) each
// way. ctx bounds the setup only. On error nothing is left behind. Without
// the privileges it needs the error matches ErrNotPermitted.
func Open(ctx context.Context, latency time.Duration, opts ...Option) (_ *Link, err error) {
	cfg := config{mtu: 1500}
	for _, o := range opts {
		o.apply(&cfg)
	}
	switch {
	case latency < 0:
		return nil, fmt.Errorf("link: negative latency %v", latency)
	case cfg.mtu < 1280 || cfg.mtu > 65535:
		return nil, fmt.Errorf("link: MTU %d outside 1280..65535", cfg.mtu)
	}
	if err := Check(); err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("link: finding this program to start the wire: %w", err)
	}
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		return nil, fmt.Errorf("link: %w", err)
	}
	hostIP, nodeIP, err := pickAddrs()
	if err != nil {
		return nil, err
	}
	l := &Link{latency: latency, mtu: cfg.mtu, hostIP: hostIP, nodeIP: nodeIP, nsenter: nsenter,
		lines: make(chan string, 4), exited: make(chan struct{}), stderr: new(bytes.Buffer)}
	host, hostDev, err := openTUN(devicePrefix + "%d")
	if err != nil {
		return nil, err
	}
	l.hostDev = hostDev
	defer func() {
		if err != nil {
			_ = l.stop()
		}
	}()
	err = l.startWire(self, host, wireConfig{Latency: latency, MTU: cfg.mtu, NodeDev: devicePrefix + "%d", NodeIP: nodeIP, HostIP: hostIP})
	// The wire holds the device now: it lives as long as the wire does.
	_ = host.Close()
	if err != nil {
		return nil, err
	}
	if err := l.awaitReady(ctx); err != nil {
		return nil, err
	}
	if err := configure(ctx, hostDev, hostIP, nodeIP, cfg.mtu, false); err != nil {
		return nil, err
	}
	var st syscall.Stat_t
	if err := syscall.Stat(l.nsPath(), &st); err != nil {
		return nil, fmt.Errorf("link: the wire's namespace: %w", err)
	}
	l.nsIno = st.Ino
	if testHookOpened != nil {
		if err := testHookOpened(l); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// testHookOpened, when set (tests), runs at the end of Open; an error from
// it fails Open.
var testHookOpened func(*Link) error

// startWire starts the wire process in a network namespace of its own,
// with the host device as its file descriptor 3.
func (l *Link) startWire(self string, host *os.File, wc wireConfig) error {
	conf, err := json.Marshal(wc)
	if err != nil {
		return err
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return err
	}
	cmd := exec.Command(self)
	// A race-enabled copy (a test binary built with -race) would sleep 1s
	// on exit, for reports from other goroutines; the wire has none to wait for.
	race := "atexit_sleep_ms=0"
	if v := os.Getenv("GORACE"); v != "" {
		race = v + " " + race
	}
	cmd.Env = append(os.Environ(), envWire+"="+string(conf), "GORACE="+race)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, l.stderr
	cmd.ExtraFiles = []*os.File{host}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNET,
		Pdeathsig:  syscall.SIGKILL, // see rig: the wire dies with this process
		Setpgid:    true,            // a ^C in the terminal is the benchmark's to handle
	}
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return permission("starting the wire in a new network namespace", err)
	}
	l.cmd, l.ctl, l.pid = cmd, inW, cmd.Process.Pid
	go func() {
		defer close(l.lines)
		defer outR.Close()
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			l.lines <- sc.Text()
		}
	}()
	go func() {
		_ = cmd.Wait()
		close(l.exited)
	}()
	return nil
}

// awaitReady waits for the wire's "ready NAME" line.
func (l *Link) awaitReady(ctx context.Context) error {
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case line, ok := <-l.lines:
		if name, found := strings.CutPrefix(line, "ready "); ok && found {
			l.nodeDev = name
			return nil
		}
		<-l.exited
		return fmt.Errorf("link: the wire did not start: %q %s", line, strings.TrimSpace(l.stderr.String()))
	case <-ctx.Done():
		return fmt.Errorf("link: waiting for the wire: %w", ctx.Err())
	case <-t.C:
		return errors.New("link: the wire did not start within 10s")
	}
}

// Close stops the wire, which removes the namespace and both devices, and
// checks that the host's device is gone. Stop the nodes on Host first. It is
// safe to call more than once; later calls return the first one's error.
func (l *Link) Close() error {
	l.once.Do(func() { l.err = l.stop() })
	return l.err
}

// stop ends the wire: end of file on its stdin, then SIGKILL after 5s; it
// collects the wire's stats and CPU time.
func (l *Link) stop() error {
	if l.cmd == nil {
		return nil
	}
	hostDropped := txDropped("self", l.hostDev)
	_ = l.ctl.Close()
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	var err error
	select {
	case <-l.exited:
	case <-t.C:
		_ = l.cmd.Process.Kill()
		<-l.exited
		err = errors.New("link: the wire did not stop within 5s; killed")
	}
	for line := range l.lines {
		if v, ok := strings.CutPrefix(line, "stats "); ok {
			var ws wireStats
			if jerr := json.Unmarshal([]byte(v), &ws); jerr == nil {
				l.stats.ToNodes, l.stats.FromNodes = ws.ToNodes, ws.FromNodes
			}
		}
	}
	l.stats.ToNodes.Dropped += hostDropped
	if ps := l.cmd.ProcessState; ps != nil {
		l.stats.UserCPU, l.stats.SysCPU = ps.UserTime(), ps.SystemTime()
		if !ps.Success() && err == nil {
			err = fmt.Errorf("link: the wire exited with %v: %s", ps, strings.TrimSpace(l.stderr.String()))
		}
	}
	if _, ierr := net.InterfaceByName(l.hostDev); ierr == nil {
		err = errors.Join(err, fmt.Errorf("link: device %s still there after the wire stopped", l.hostDev))
	}
	return err
}

// Stats returns what the wire did; complete once Close has returned.
func (l *Link) Stats() Stats { return l.stats }

// Latency returns the delay added each way.
func (l *Link) Latency() time.Duration { return l.latency }

// MTU returns the devices' MTU.
func (l *Link) MTU() int { return l.mtu }

// Addrs returns this side's address and the nodes'.
func (l *Link) Addrs() (host, nodes string) { return l.hostIP, l.nodeIP }

// Devices returns the TUN devices' names: this side's and the nodes' (in
// their namespace).
func (l *Link) Devices() (host, nodes string) { return l.hostDev, l.nodeDev }

func (l *Link) nsPath() string { return "/proc/" + strconv.Itoa(l.pid) + "/ns/net" }

// Host is where to start nodes behind the link: they bind the nodes'
// address in the link's namespace (nsenter, which execs redis-server), on
// ports counted up from 7000.
func (l *Link) Host() rig.Host {
	return rig.Host{
		IP:    l.nodeIP,
		Enter: []string{l.nsenter, "--net=" + l.nsPath(), "--"},
		Port:  func() (int, error) { return basePort + int(l.ports.Add(1)), nil },
	}
}

// pickAddrs returns a pair of addresses in 10.213.0.0/16 that no device of
// this namespace has: one of its 16384 /30 blocks, picked by this process's
// id and link number, so that concurrent benchmarks differ.
func pickAddrs() (host, node string, err error) {
	used := map[string]bool{}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", "", fmt.Errorf("link: listing addresses: %w", err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			used[ipn.IP.String()] = true
		}
	}
	start := os.Getpid()*8 + int(seq.Add(1))
	for i := range 16384 {
		k := (start + i) % 16384
		h := fmt.Sprintf("10.213.%d.%d", k/64, k%64*4+1)
		n := fmt.Sprintf("10.213.%d.%d", k/64, k%64*4+2)
		if !used[h] && !used[n] {
			return h, n, nil
		}
	}
	return "", "", errors.New("link: no free address pair in 10.213.0.0/16")
}
