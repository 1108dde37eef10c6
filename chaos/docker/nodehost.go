package docker

import (
	"context"
	"errors"
	"fmt"

	"github.com/redfence/redfence/chaos"
)

var _ chaos.NodeHoster = (*Backend)(nil)

// NodeHost implements chaos.NodeHoster: the gateway of the Docker network a
// running node of this backend is attached to, which is where a container
// reaches the host (for a proxy made with chaos.Network.AddLinkOn). It
// needs at least one running node.
func (b *Backend) NodeHost(ctx context.Context) (string, error) {
	b.mu.Lock()
	nodes := append([]*Node(nil), b.nodes...)
	b.mu.Unlock()
	var errs []error
	for _, n := range nodes {
		if n.closed.Load() || n.ctr == nil {
			continue
		}
		info, err := n.ctr.Inspect(ctx)
		if err != nil {
			errs = append(errs, n.errorf("inspect", err))
			continue
		}
		if info.NetworkSettings == nil {
			continue
		}
		for _, ep := range info.NetworkSettings.Networks {
			if ep != nil && ep.Gateway.IsValid() {
				return ep.Gateway.String(), nil
			}
		}
	}
	if len(errs) > 0 {
		return "", fmt.Errorf("docker: node host: %w", errors.Join(errs...))
	}
	return "", errors.New("docker: node host: no running node with a network gateway")
}
