package docker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/redfence/redfence/chaos"
)

// sentinelConf is where a Sentinel container keeps its sentinel.conf.
const sentinelConf = "/data/sentinel.conf"

var (
	_ chaos.SentinelBackend = (*Backend)(nil)
	_ chaos.Peer            = (*Node)(nil)
)

// StartSentinels implements chaos.SentinelBackend: n containers of the
// backend's image named redfence-<ID>-<call>-s<i>, each running
//
//	redis-server /data/sentinel.conf --sentinel --protected-mode no --bind 0.0.0.0 --port 6379 --dir /data
//
// with conf copied into the container as /data/sentinel.conf (Sentinel
// rewrites it), published on a pinned port of 127.0.0.1 like a node. On
// the Docker network a Sentinel reaches the nodes at their PeerAddr and
// announces its own container IP to the other Sentinels.
func (b *Backend) StartSentinels(ctx context.Context, n int, conf string) ([]chaos.Node, error) {
	if n <= 0 {
		return nil, fmt.Errorf("docker: StartSentinels: n must be positive, got %d", n)
	}
	args := []string{sentinelConf, "--sentinel", "--protected-mode", "no", "--bind", "0.0.0.0", "--port", "6379", "--dir", "/data"}
	return b.start(ctx, "StartSentinels", n, "s", false, args, map[string]string{sentinelConf: conf})
}

// PeerAddr implements chaos.Peer: the container's IP on its Docker network
// and Redis's port inside the container, where other containers (a
// replica, a Sentinel) reach it directly. The IP is looked up on every
// call: Docker may give a restarted container another one.
func (n *Node) PeerAddr(ctx context.Context) (string, error) {
	if n.closed.Load() || n.ctr == nil {
		return "", n.errorf("peer address", ErrClosed)
	}
	info, err := n.ctr.Inspect(ctx)
	if err != nil {
		return "", n.errorf("peer address", err)
	}
	if info.NetworkSettings != nil {
		for _, ep := range info.NetworkSettings.Networks {
			if ep != nil && ep.IPAddress.IsValid() {
				return net.JoinHostPort(ep.IPAddress.String(), strings.TrimSuffix(redisPort, "/tcp")), nil
			}
		}
	}
	return "", n.errorf("peer address", errors.New("the container has no IP address (is it running?)"))
}
