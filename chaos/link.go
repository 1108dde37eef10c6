package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
)

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

// newLink starts a link listening on a stable port of 127.0.0.1,
// forwarding to upstream.
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
	return l.locked(func() error {
		if !l.cut {
			l.proxy.Stop()
			l.cut = true
		}
		return nil
	})
}

// Blackhole makes the link swallow all data in both directions: new
// connections are accepted but get no replies, and open ones go silent, so
// requests hang until the client's deadline. Heal closes the connections
// that were open while it lasted (their streams have lost bytes).
func (l *Link) Blackhole() error {
	return l.addFault(&l.blackhole,
		toxic{toxicBlackholeUp, "timeout", "upstream", `{"timeout":0}`},
		toxic{toxicBlackholeDown, "timeout", "downstream", `{"timeout":0}`})
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
	return l.locked(func() error {
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
	})
}

// Reset makes the link reset connections mid command: requests still reach
// the upstream and run there, but the first reply data on each connection
// is replaced by a TCP reset (RST), so the client sees an error and cannot
// tell whether its request happened.
func (l *Link) Reset() error {
	return l.addFault(&l.reset, toxic{toxicReset, "reset_peer", "downstream", `{"timeout":0}`})
}

// toxic is one toxiproxy toxic of a fault: its name, type, stream and
// attributes (JSON).
type toxic struct{ name, typ, stream, attrs string }

// addFault adds toxics to the link unless *on, one of the link's fault
// flags, says they are in place, and then sets it.
func (l *Link) addFault(on *bool, toxics ...toxic) error {
	return l.locked(func() error {
		if *on {
			return nil
		}
		for _, t := range toxics {
			if err := l.addToxic(t.name, t.typ, t.stream, t.attrs); err != nil {
				return err
			}
		}
		*on = true
		return nil
	})
}

// locked runs f with l.mu held, unless the link is closed.
func (l *Link) locked(f func() error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return err
	}
	return f()
}

// Heal removes every fault from the link. Healing a cut, blackholed or
// resetting link closes the connections that were open through it and
// waits until they are torn down, so no request sent during the fault is
// delivered afterwards; healing latency alone keeps connections open.
func (l *Link) Heal() error {
	return l.locked(func() error {
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
	})
}

// Retarget points the link at another upstream address, closing its open
// connections; Addr does not change and faults stay in place. A cut link
// stays cut.
func (l *Link) Retarget(upstream string) error {
	if err := checkUpstream(upstream); err != nil {
		return l.errorf("retarget", err)
	}
	return l.locked(func() error {
		return l.restart(func() {
			// The proxy is stopped, so Update only records the new upstream.
			_ = l.proxy.Update(&toxiproxy.Proxy{Listen: l.addr, Upstream: upstream, Enabled: false})
			l.upstream = upstream
		}, !l.cut)
	})
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
