package chaos

import (
	"errors"
	"fmt"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/redfence/redfence/internal/nilcheck"
)

// ErrNetworkClosed is wrapped by errors from a Network or Link that has been
// closed.
var ErrNetworkClosed = errors.New("chaos: network is closed")

// Network puts a TCP proxy (toxiproxy, in this process) on every (client,
// node) pair of any Backend's nodes, so that faults can be injected per
// link: client c dials Addr(c, n) instead of node n's own address. Every
// fault is reversible and applies to one direction of reachability only
// (client c to node n), so asymmetric partitions, isolation and bridges are
// expressible.
//
// The proxies add one loopback hop, carry only the clients' traffic (proxy
// replication with AddLink), and dial upstreams with no timeout of their
// own, so upstreams should answer or refuse at once. Through a proxy a
// killed node closes the connection (EOF) instead of refusing it. Methods
// are safe for concurrent use; indices out of range are errors.
type Network struct {
	srv     *toxiproxy.ApiServer
	clients int
	nodes   int
	links   [][]*Link // [client][node]

	mu     sync.Mutex
	extra  map[string]*Link // guarded by mu
	closed bool             // guarded by mu
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
		if nilcheck.IsNil(n) {
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

// Clients returns the number of clients the Network was made for.
func (nw *Network) Clients() int { return nw.clients }

// Nodes returns the number of nodes the Network was made for.
func (nw *Network) Nodes() int { return nw.nodes }

// Addr returns the address client c dials to reach node n. It stays the
// same for the Network's life, whatever faults come and go. It returns ""
// for indices out of range.
func (nw *Network) Addr(c, n int) string {
	l, err := nw.link(c, n)
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

// link returns the link from client c to node n.
func (nw *Network) link(c, n int) (*Link, error) {
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
	l, err := nw.link(c, n)
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
