package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
)

// NodeHoster is an optional interface of a Backend whose nodes reach this
// host at an address other than 127.0.0.1, such as Docker containers on a
// bridge network. NodeHost returns that address (an IP, no port), for
// proxies that nodes themselves dial, like a replica's link to its primary
// (see Network.AddLinkOn). A Backend without it runs its nodes on this host,
// where 127.0.0.1 works.
type NodeHoster interface {
	NodeHost(ctx context.Context) (string, error)
}

// NodeHost returns the address at which b's nodes reach this host: b's own
// answer if it implements NodeHoster, else "127.0.0.1".
func NodeHost(ctx context.Context, b Backend) (string, error) {
	if nh, ok := b.(NodeHoster); ok {
		return nh.NodeHost(ctx)
	}
	return "127.0.0.1", nil
}

// AddLinkOn is AddLink with the proxy listening on host (an IP of this
// machine, such as a Docker bridge gateway from NodeHost) instead of
// 127.0.0.1, so that nodes running elsewhere can dial it. The port is
// chosen as for every other link; Close stops it and HealAll heals it.
func (nw *Network) AddLinkOn(name, host, upstream string) (*Link, error) {
	if name == "" {
		return nil, errors.New("chaos: add link: empty name")
	}
	if net.ParseIP(host) == nil {
		return nil, fmt.Errorf("chaos: add link %s: listen host %q is not an IP address", name, host)
	}
	if err := checkUpstream(upstream); err != nil {
		return nil, fmt.Errorf("chaos: add link %s: %w", name, err)
	}
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if nw.closed {
		return nil, fmt.Errorf("chaos: add link %s: %w", name, ErrNetworkClosed)
	}
	if _, dup := nw.extra[name]; dup {
		return nil, fmt.Errorf("chaos: add link %s: a link with that name exists", name)
	}
	var lastErr error
	for range stablePortAttempts {
		port, err := reserveStablePort()
		if err != nil {
			return nil, fmt.Errorf("chaos: add link %s: %w", name, err)
		}
		p := toxiproxy.NewProxy(nw.srv, name, net.JoinHostPort(host, strconv.Itoa(port)), upstream)
		if err := p.Start(); err != nil {
			releaseStablePort(port)
			lastErr = err
			if port != 0 && errors.Is(err, syscall.EADDRINUSE) {
				continue
			}
			break
		}
		p.Lock()
		addr := p.Listen
		p.Unlock()
		l := &Link{name: name, addr: addr, port: port, proxy: p, upstream: upstream}
		nw.extra[name] = l
		return l, nil
	}
	return nil, fmt.Errorf("chaos: add link %s: starting proxy on %s: %w", name, host, lastErr)
}
