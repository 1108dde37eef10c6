package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// ErrNetworkClosed is wrapped by errors from a Network or Link that has been
// closed.
var ErrNetworkClosed = errors.New("chaos: network is closed")

// linkDrainTimeout bounds the wait for a stopped proxy's connections to be
// torn down.
const linkDrainTimeout = 5 * time.Second

// linkRebindTimeout bounds the retries of a proxy's listening address that
// is still in use; linkRebindPoll is the pause between them.
const (
	linkRebindTimeout = 2 * time.Second
	linkRebindPoll    = 5 * time.Millisecond
)

// maxLatency bounds the delay Latency accepts.
const maxLatency = time.Hour

// Toxic names used on every proxy.
const (
	toxicLatency       = "redfence-latency"
	toxicBlackholeUp   = "redfence-blackhole-up"
	toxicBlackholeDown = "redfence-blackhole-down"
	toxicReset         = "redfence-reset"
)

// Network puts a TCP proxy (toxiproxy, run in this process) on every
// (client, node) pair, so that faults can be injected per link: client c
// dials Addr(c, n) instead of node n's own address. Every fault is
// reversible and applies to one direction of reachability only (client c to
// node n), so asymmetric partitions, isolation and bridges are expressible.
// It works with any Backend: it only needs each node's Addr.
//
// A Network adds a little latency of its own (one extra loopback hop) and
// only affects traffic that goes through its proxies, not replication
// between nodes (proxy that with AddLink). Through a proxy a killed node
// looks slightly different: the proxy accepts the client's connection and
// then closes it (EOF) instead of the node refusing it. The proxy dials its
// upstream with no timeout of its own, so upstreams should be addresses
// that answer or refuse at once (loopback, a local bridge), not ones that
// drop packets.
//
// All methods are safe for concurrent use; indices out of range are
// reported as errors. Close stops every proxy and waits until their
// connection goroutines have ended.
type Network struct {
	srv     *toxiproxy.ApiServer
	clients int
	nodes   int
	links   [][]*Link // [client][node]

	mu     sync.Mutex
	extra  map[string]*Link // guarded by mu
	closed bool             // guarded by mu
}

// Link is one proxied TCP path: connections to Addr are forwarded to the
// upstream address unless a fault says otherwise. Its faults add up (a
// link can be slow and cut) until Heal removes them all. It is safe for
// concurrent use.
type Link struct {
	name  string
	addr  string // the proxy's listen address, stable for the Link's life
	port  int    // reserved with reserveStablePort, 0 if none
	proxy *toxiproxy.Proxy

	mu        sync.Mutex
	upstream  string        // guarded by mu
	cut       bool          // guarded by mu: proxy stopped
	blackhole bool          // guarded by mu
	reset     bool          // guarded by mu
	latency   time.Duration // guarded by mu
	closed    bool          // guarded by mu
}

// NewNetwork starts one proxy on a free 127.0.0.1 port for each pair of a
// client index 0..clients-1 and a node, forwarding to node.Addr(). Nodes
// keep their order: node index n is nodes[n].
func NewNetwork(nodes []Node, clients int) (*Network, error) {
	if len(nodes) == 0 {
		return nil, errors.New("chaos: new network: no nodes")
	}
	if clients < 1 {
		return nil, fmt.Errorf("chaos: new network: invalid client count %d: want at least 1", clients)
	}
	for i, n := range nodes {
		if n == nil || isNilNode(n) {
			return nil, fmt.Errorf("chaos: new network: node %d is nil", i)
		}
	}
	nw := &Network{
		srv:     toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop()),
		clients: clients,
		nodes:   len(nodes),
		links:   make([][]*Link, clients),
		extra:   make(map[string]*Link),
	}
	for c := range clients {
		nw.links[c] = make([]*Link, len(nodes))
		for n, node := range nodes {
			l, err := newLink(nw.srv, fmt.Sprintf("c%d-%s", c, node.Name()), node.Addr())
			if err != nil {
				return nil, errors.Join(fmt.Errorf("chaos: new network: %w", err), nw.Close())
			}
			nw.links[c][n] = l
		}
	}
	return nw, nil
}

func isNilNode(n Node) bool {
	v := reflect.ValueOf(n)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// Clients returns the number of clients the Network was made for.
func (nw *Network) Clients() int { return nw.clients }

// Nodes returns the number of nodes the Network was made for.
func (nw *Network) Nodes() int { return nw.nodes }

// Addr returns the address client c dials to reach node n. It stays the
// same for the Network's life, whatever faults come and go. It returns ""
// for indices out of range.
func (nw *Network) Addr(c, n int) string {
	l, err := nw.Link(c, n)
	if err != nil {
		return ""
	}
	return l.Addr()
}

// Addrs returns the addresses client c dials, one per node, in node order,
// or nil for a client index out of range.
func (nw *Network) Addrs(c int) []string {
	if c < 0 || c >= nw.clients {
		return nil
	}
	addrs := make([]string, nw.nodes)
	for n, l := range nw.links[c] {
		addrs[n] = l.Addr()
	}
	return addrs
}

// Link returns the link from client c to node n.
func (nw *Network) Link(c, n int) (*Link, error) {
	if c < 0 || c >= nw.clients {
		return nil, fmt.Errorf("chaos: client index %d out of range [0, %d)", c, nw.clients)
	}
	if n < 0 || n >= nw.nodes {
		return nil, fmt.Errorf("chaos: node index %d out of range [0, %d)", n, nw.nodes)
	}
	return nw.links[c][n], nil
}

// Cut takes the link from client c to node n down: its open connections
// are closed and new ones are refused, so requests fail fast.
func (nw *Network) Cut(c, n int) error { return nw.on(c, n, (*Link).Cut) }

// Blackhole makes the link from client c to node n swallow traffic in both
// directions: connections are accepted but requests hang until the
// client's own deadline, as in a real partition.
func (nw *Network) Blackhole(c, n int) error { return nw.on(c, n, (*Link).Blackhole) }

// Latency delays every reply from node n to client c by d, so each round
// trip takes at least d longer; d = 0 removes the delay.
func (nw *Network) Latency(c, n int, d time.Duration) error {
	return nw.on(c, n, func(l *Link) error { return l.Latency(d) })
}

// Reset makes the link from client c to node n reset connections mid
// command: each request still reaches the node and runs there, but its
// reply is replaced by a TCP reset, so the client cannot tell whether it
// happened.
func (nw *Network) Reset(c, n int) error { return nw.on(c, n, (*Link).Reset) }

// Heal removes every fault from the link from client c to node n.
func (nw *Network) Heal(c, n int) error { return nw.on(c, n, (*Link).Heal) }

// Retarget points the link from client c to node n at another address,
// closing its open connections; Addr(c, n) does not change. This models a
// failover that moves a client's "primary" to a promoted replica.
func (nw *Network) Retarget(c, n int, upstream string) error {
	return nw.on(c, n, func(l *Link) error { return l.Retarget(upstream) })
}

func (nw *Network) on(c, n int, f func(*Link) error) error {
	l, err := nw.Link(c, n)
	if err != nil {
		return err
	}
	return f(l)
}

// HealAll removes every fault from every link, including those made by
// AddLink.
func (nw *Network) HealAll() error {
	var errs []error
	for _, l := range nw.allLinks() {
		errs = append(errs, l.Heal())
	}
	return errors.Join(errs...)
}

// Isolate cuts client c off from every node.
func (nw *Network) Isolate(c int) error { return nw.Partition(c) }

// Partition lets client c reach only the reachable nodes: its links to
// every other node are cut and its links to the reachable ones are healed
// (which removes any latency or other fault on them too). Other clients are
// unaffected, so a partition between groups is one Partition call per
// client. For example, Jepsen's "bridge" over five nodes, where group A
// sees nodes {0,1,2} and group B sees {2,3,4} (node 2 talks to both):
//
//	for _, c := range groupA {
//		err = errors.Join(err, nw.Partition(c, 0, 1, 2))
//	}
//	for _, c := range groupB {
//		err = errors.Join(err, nw.Partition(c, 2, 3, 4))
//	}
//
// For a partition that hangs rather than refuses, call Blackhole on the
// links instead.
func (nw *Network) Partition(c int, reachable ...int) error {
	if c < 0 || c >= nw.clients {
		return fmt.Errorf("chaos: client index %d out of range [0, %d)", c, nw.clients)
	}
	keep := make([]bool, nw.nodes)
	for _, n := range reachable {
		if n < 0 || n >= nw.nodes {
			return fmt.Errorf("chaos: node index %d out of range [0, %d)", n, nw.nodes)
		}
		keep[n] = true
	}
	var errs []error
	for n, l := range nw.links[c] {
		if keep[n] {
			errs = append(errs, l.Heal())
		} else {
			errs = append(errs, l.Cut())
		}
	}
	return errors.Join(errs...)
}

// AddLink starts an extra proxy on a free 127.0.0.1 port forwarding to
// upstream, with the same faults as the client links, for paths that are
// not client to node: for example point a replica's REPLICAOF at the
// returned Link's Addr and Blackhole it to partition replication. name
// identifies it in errors and must be unique within the Network. Close
// stops it; HealAll heals it.
func (nw *Network) AddLink(name, upstream string) (*Link, error) {
	if name == "" {
		return nil, errors.New("chaos: add link: empty name")
	}
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if nw.closed {
		return nil, fmt.Errorf("chaos: add link %s: %w", name, ErrNetworkClosed)
	}
	if _, dup := nw.extra[name]; dup {
		return nil, fmt.Errorf("chaos: add link %s: a link with that name exists", name)
	}
	l, err := newLink(nw.srv, name, upstream)
	if err != nil {
		return nil, fmt.Errorf("chaos: add link: %w", err)
	}
	nw.extra[name] = l
	return l, nil
}

func (nw *Network) allLinks() []*Link {
	var all []*Link
	for _, row := range nw.links {
		for _, l := range row {
			if l != nil {
				all = append(all, l)
			}
		}
	}
	nw.mu.Lock()
	for _, l := range nw.extra {
		all = append(all, l)
	}
	nw.mu.Unlock()
	return all
}

// Close stops every proxy, closing all connections through them, and waits
// (up to a few seconds) until the proxies' goroutines have ended. Every
// later fault call fails with ErrNetworkClosed. Calling it again returns
// nil.
func (nw *Network) Close() error {
	nw.mu.Lock()
	if nw.closed {
		nw.mu.Unlock()
		return nil
	}
	nw.closed = true
	nw.mu.Unlock()

	all := nw.allLinks()
	for _, l := range all {
		l.stop()
	}
	deadline := time.Now().Add(linkDrainTimeout)
	var errs []error
	for _, l := range all {
		errs = append(errs, l.drain(deadline))
	}
	return errors.Join(errs...)
}

func newLink(srv *toxiproxy.ApiServer, name, upstream string) (*Link, error) {
	if err := checkUpstream(upstream); err != nil {
		return nil, fmt.Errorf("link %s: %w", name, err)
	}
	var lastErr error
	for range stablePortAttempts {
		port, err := reserveStablePort()
		if err != nil {
			return nil, fmt.Errorf("link %s: %w", name, err)
		}
		p := toxiproxy.NewProxy(srv, name, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), upstream)
		if err := p.Start(); err != nil {
			releaseStablePort(port)
			lastErr = err
			if port != 0 && errors.Is(err, syscall.EADDRINUSE) {
				continue // taken since reserveStablePort probed it
			}
			break
		}
		p.Lock()
		addr := p.Listen // the bound address, even for port 0
		p.Unlock()
		return &Link{name: name, addr: addr, port: port, proxy: p, upstream: upstream}, nil
	}
	return nil, fmt.Errorf("link %s: starting proxy: %w", name, lastErr)
}

func checkUpstream(upstream string) error {
	host, port, err := net.SplitHostPort(upstream)
	if err != nil || host == "" || port == "" {
		return fmt.Errorf("invalid upstream address %q: want host:port", upstream)
	}
	return nil
}

// Name returns the link's name ("c0-n1" for client 0 to node n1, or the
// name given to AddLink).
func (l *Link) Name() string { return l.name }

// Addr returns the address to dial instead of the upstream. It never
// changes.
func (l *Link) Addr() string { return l.addr }

// Upstream returns the address the link forwards to.
func (l *Link) Upstream() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.upstream
}

// Cut takes the link down: open connections are closed and new ones
// refused, so requests fail fast. The listening port is released while the
// link is cut and bound again by Heal. It lies outside the kernel's
// ephemeral port range, so no outgoing connection or port-0 listener takes
// it meanwhile; only a program binding that very port could, and then Heal
// fails. (A child process this process is forking holds a copy of the
// listener until it execs, so for that moment connections may still be
// accepted, then reset.)
func (l *Link) Cut() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return err
	}
	if !l.cut {
		l.proxy.Stop()
		l.cut = true
	}
	return nil
}

// Blackhole makes the link swallow all data in both directions: new
// connections are accepted but get no replies, and open ones go silent, so
// requests hang until the client's deadline. Heal closes the connections
// that were open while it lasted (their streams have lost bytes).
func (l *Link) Blackhole() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return err
	}
	if l.blackhole {
		return nil
	}
	for _, t := range []struct{ name, stream string }{
		{toxicBlackholeUp, "upstream"},
		{toxicBlackholeDown, "downstream"},
	} {
		if err := l.addToxic(t.name, "timeout", t.stream, `{"timeout":0}`); err != nil {
			return err
		}
	}
	l.blackhole = true
	return nil
}

// Latency delays every chunk of reply data by d (rounded up to a whole
// millisecond), so each request-reply round trip takes at least d longer.
// Calling it again replaces the delay; d = 0 removes it. d may not exceed
// an hour.
func (l *Link) Latency(d time.Duration) error {
	if d < 0 || d > maxLatency {
		return fmt.Errorf("chaos: link %s: latency %v out of range [0, %v]", l.name, d, maxLatency)
	}
	ms := int64((d + time.Millisecond - 1) / time.Millisecond)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return err
	}
	if ms == int64(l.latency/time.Millisecond) {
		return nil
	}
	// Replace rather than update in place: toxiproxy's update rewrites the
	// toxic's settings while connection goroutines may be reading them.
	if l.latency > 0 {
		if err := l.proxy.Toxics.RemoveToxic(context.Background(), toxicLatency); err != nil {
			return l.errorf("remove latency", err)
		}
		l.latency = 0
	}
	if ms > 0 {
		if err := l.addToxic(toxicLatency, "latency", "downstream", fmt.Sprintf(`{"latency":%d}`, ms)); err != nil {
			return err
		}
	}
	l.latency = time.Duration(ms) * time.Millisecond
	return nil
}

// Reset makes the link reset connections mid command: requests still reach
// the upstream and run there, but the first reply data on each connection
// is replaced by a TCP reset (RST), so the client sees an error and cannot
// tell whether its request happened.
func (l *Link) Reset() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return err
	}
	if l.reset {
		return nil
	}
	if err := l.addToxic(toxicReset, "reset_peer", "downstream", `{"timeout":0}`); err != nil {
		return err
	}
	l.reset = true
	return nil
}

// Heal removes every fault from the link. Healing a cut, blackholed or
// resetting link closes the connections that were open through it and
// waits until they are torn down, so no request sent during the fault is
// delivered afterwards; healing latency alone keeps connections open.
func (l *Link) Heal() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return err
	}
	if !l.cut && !l.blackhole && !l.reset {
		if l.latency > 0 {
			if err := l.proxy.Toxics.RemoveToxic(context.Background(), toxicLatency); err != nil {
				return l.errorf("remove latency", err)
			}
			l.latency = 0
		}
		return nil
	}
	return l.restart(func() {
		l.proxy.Toxics.ResetToxics(context.Background())
		l.blackhole, l.reset, l.latency = false, false, 0
	}, true)
}

// Retarget points the link at another upstream address, closing its open
// connections; Addr does not change and faults stay in place. A cut link
// stays cut.
func (l *Link) Retarget(upstream string) error {
	if err := checkUpstream(upstream); err != nil {
		return l.errorf("retarget", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return err
	}
	return l.restart(func() {
		// The proxy is stopped, so Update only records the new upstream.
		_ = l.proxy.Update(&toxiproxy.Proxy{Listen: l.addr, Upstream: upstream, Enabled: false})
		l.upstream = upstream
	}, !l.cut)
}

// restart stops the proxy, waits until its connections are torn down, runs
// change, and starts the proxy again on the same address if start is set.
// l.mu must be held.
func (l *Link) restart(change func(), start bool) error {
	if !l.cut {
		l.proxy.Stop()
		l.cut = true
	}
	drainErr := l.drain(time.Now().Add(linkDrainTimeout))
	change()
	if start {
		if err := l.startProxy(); err != nil {
			return errors.Join(drainErr, l.errorf("restart proxy on "+l.addr, err))
		}
		l.cut = false
	}
	return drainErr
}

// startProxy starts the stopped proxy on its address again. Between fork
// and exec a child process holds copies of all of this process's
// descriptors, so a listener closed while this process forks (to run
// redis-server, say) lingers for a moment; EADDRINUSE is therefore retried
// until linkRebindTimeout.
func (l *Link) startProxy() error {
	deadline := time.Now().Add(linkRebindTimeout)
	for {
		err := l.proxy.Start()
		if err == nil || !errors.Is(err, syscall.EADDRINUSE) || !time.Now().Before(deadline) {
			return err
		}
		time.Sleep(linkRebindPoll)
	}
}

func (l *Link) addToxic(name, typ, stream, attrs string) error {
	body := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"toxicity":1,"attributes":%s}`, name, typ, stream, attrs)
	if _, err := l.proxy.Toxics.AddToxicJson(strings.NewReader(body)); err != nil {
		return l.errorf("add "+typ+" toxic", err)
	}
	return nil
}

// usable reports ErrNetworkClosed once the link is closed. l.mu must be
// held.
func (l *Link) usable() error {
	if l.closed {
		return l.errorf("fault", ErrNetworkClosed)
	}
	return nil
}

// stop closes the link for good.
func (l *Link) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.proxy.Stop()
		l.cut, l.closed = true, true
		releaseStablePort(l.port)
	}
}

// drain waits until a stopped proxy's connections are torn down: Stop
// closes every connection but does not wait for the goroutines that copy
// them. toxiproxy keeps one ToxicLink per connection direction until its
// goroutines finish, in an unexported map; its length is read by reflection
// under the collection's own lock. If that field ever disappears, drain
// does not wait.
func (l *Link) drain(deadline time.Time) error {
	const poll = time.Millisecond
	for {
		n, ok := openToxicLinks(l.proxy)
		if !ok || n == 0 {
			return nil
		}
		if !time.Now().Before(deadline) {
			return l.errorf("close", fmt.Errorf("%d proxied connection directions still open after %v", n, linkDrainTimeout))
		}
		time.Sleep(poll)
	}
}

func openToxicLinks(p *toxiproxy.Proxy) (int, bool) {
	p.Toxics.Lock()
	defer p.Toxics.Unlock()
	v := reflect.ValueOf(p.Toxics).Elem().FieldByName("links")
	if !v.IsValid() || v.Kind() != reflect.Map {
		return 0, false
	}
	return v.Len(), true
}

func (l *Link) errorf(op string, err error) error {
	return fmt.Errorf("chaos: link %s: %s: %w", l.name, op, err)
}

// Ports for listeners that are closed and bound again later (a cut proxy, a
// killed redis-server) come from outside the kernel's ephemeral port range:
// a port from inside it can be taken, while it is free, by any outgoing
// connection or port-0 listener on the machine, and then the rebind fails.
// Ports in use by this process are remembered so two of its listeners never
// share one.
var stablePorts = struct {
	sync.Mutex
	used map[int]bool
}{used: make(map[int]bool)}

// stablePortAttempts bounds the tries to find and bind a free stable port.
const stablePortAttempts = 20

// stablePortRange returns the ports [lo, hi) to choose from, or lo == hi
// when the ephemeral range leaves no room (ports are then picked by the
// kernel).
var stablePortRange = sync.OnceValues(func() (lo, hi int) {
	// Linux's default; IANA's (BSD, macOS, Windows) starts higher.
	ephLo, ephHi := 32768, 60999
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			l, err1 := strconv.Atoi(f[0])
			h, err2 := strconv.Atoi(f[1])
			if err1 == nil && err2 == nil && l <= h {
				ephLo, ephHi = l, h
			}
		}
	}
	const minPorts = 1000
	if lo := max(1024, ephLo-16384); ephLo-lo >= minPorts {
		return lo, ephLo
	}
	if lo := ephHi + 1; 65536-lo >= minPorts {
		return lo, 65536
	}
	return 0, 0
})

// reserveStablePort picks a free 127.0.0.1 port outside the ephemeral range
// and marks it used by this process until releaseStablePort. It returns 0
// (let the kernel pick) when there is no such range.
func reserveStablePort() (int, error) {
	lo, hi := stablePortRange()
	if lo == hi {
		return 0, nil
	}
	stablePorts.Lock()
	defer stablePorts.Unlock()
	for range stablePortAttempts * 5 {
		port := lo + rand.IntN(hi-lo)
		if stablePorts.used[port] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		if err := l.Close(); err != nil {
			continue
		}
		stablePorts.used[port] = true
		return port, nil
	}
	return 0, fmt.Errorf("chaos: no free loopback port in [%d, %d)", lo, hi)
}

// releaseStablePort forgets a port from reserveStablePort; 0 is ignored.
func releaseStablePort(port int) {
	if port == 0 {
		return
	}
	stablePorts.Lock()
	delete(stablePorts.used, port)
	stablePorts.Unlock()
}
