package docker

import (
	"context"
	"fmt"

	"github.com/redfence/redfence/chaos"
)

// sentinelConf is where a Sentinel container keeps its sentinel.conf.
const sentinelConf = "/data/sentinel.conf"

var _ chaos.SentinelBackend = (*Backend)(nil)

// StartSentinels implements chaos.SentinelBackend: n containers of the
// backend's image named redfence-<ID>-<call>-s<i>, each running
//
//	redis-server /data/sentinel.conf --sentinel --protected-mode no --dir /data --port <port> --bind 127.0.0.1
//
// with conf copied into the container as /data/sentinel.conf (Sentinel
// rewrites it), on a pinned port of 127.0.0.1 like a node. A Sentinel
// reaches the nodes, and the other Sentinels, at their Addr: every
// container is on the host's network.
func (b *Backend) StartSentinels(ctx context.Context, n int, conf string) ([]chaos.Node, error) {
	if n <= 0 {
		return nil, fmt.Errorf("docker: StartSentinels: n must be positive, got %d", n)
	}
	args := []string{sentinelConf, "--sentinel", "--protected-mode", "no", "--dir", "/data"}
	return b.start(ctx, "StartSentinels", n, "s", false, args, map[string]string{sentinelConf: conf})
}
