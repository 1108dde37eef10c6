package chaos

import (
	"context"
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
	return nw.addLink(name, host, upstream)
}
