package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/internal/redisnode"
)

// SentinelBackend is an optional interface of a Backend that can run Redis
// Sentinels (redis-server --sentinel, the same binary as its nodes), as
// scenario 15 needs. Both backends of this module implement it.
type SentinelBackend interface {
	// StartSentinels starts n Sentinels named s0..s(n-1), each with its
	// own writable copy of conf as its sentinel.conf, and returns once each
	// answers PING. Their Addr is reachable from this process, and they
	// reach the backend's nodes at the nodes' Addr. Kill stops one; the
	// backend's Close stops them all.
	StartSentinels(ctx context.Context, n int, conf string) ([]Node, error)
}

var _ SentinelBackend = (*ProcessBackend)(nil)

// StartSentinels implements SentinelBackend: n redis-server processes in
// Sentinel mode on free loopback ports, each in its own temporary directory
// holding its sentinel.conf, which Close removes.
func (b *ProcessBackend) StartSentinels(ctx context.Context, n int, conf string) ([]Node, error) {
	if err := liveCtx(ctx); err != nil {
		return nil, fmt.Errorf("chaos: start sentinels: %w", err)
	}
	if n < 1 {
		return nil, fmt.Errorf("chaos: start sentinels: invalid count %d: want at least 1", n)
	}
	var started []Node
	fail := func(err error) ([]Node, error) {
		for _, s := range started {
			err = errors.Join(err, s.Close())
		}
		return nil, fmt.Errorf("chaos: start sentinels: %w", err)
	}
	for i := range n {
		pn, err := b.startSentinel(ctx, fmt.Sprintf("s%d", i), conf)
		if err != nil {
			return fail(err)
		}
		started = append(started, pn)
	}
	return started, nil
}

func (b *ProcessBackend) startSentinel(ctx context.Context, name, conf string) (*processNode, error) {
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	if closed {
		return nil, ErrBackendClosed
	}
	dir, err := os.MkdirTemp("", "redfence-sentinel-")
	if err != nil {
		return nil, err
	}
	file := filepath.Join(dir, "sentinel.conf")
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	node, err := redisnode.Start(ctx, redisnode.Options{
		Binary:     b.cfg.redisServer,
		Dir:        dir,
		ConfigFile: file,
		Args:       []string{"--sentinel"},
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("%s: %w", name, err), os.RemoveAll(dir))
	}
	pn := &processNode{name: name, node: node, dir: dir}
	return b.keep(pn)
}

// The Sentinels of scenario 15.
const (
	// sentinelMaster is the name scenario 15's Sentinels monitor the
	// primary under.
	sentinelMaster = "redfence-chaos"
	// scenarioSentinels is how many Sentinels scenario 15 runs; a quorum
	// of 2 of them must agree the primary is down, and a majority must
	// elect the one that fails it over.
	scenarioSentinels = 3
	// scenarioDownAfter is the Sentinels' down-after-milliseconds (the
	// default is 30s).
	scenarioDownAfter = 500 * time.Millisecond
	// scenarioFailoverTimeout is the Sentinels' failover-timeout (the
	// default is 3 minutes).
	scenarioFailoverTimeout = 5 * time.Second
	// sentinelConvergeTimeout bounds the wait until the Sentinels agree.
	sentinelConvergeTimeout = 30 * time.Second
)

// sentinelConf is the sentinel.conf of scenario 15's Sentinels.
func sentinelConf(primary string) (string, error) {
	host, port, err := net.SplitHostPort(primary)
	if err != nil {
		return "", fmt.Errorf("primary address %q: %w", primary, err)
	}
	return fmt.Sprintf("sentinel monitor %[1]s %[2]s %[3]s 2\n"+
		"sentinel down-after-milliseconds %[1]s %[4]d\n"+
		"sentinel failover-timeout %[1]s %[5]d\n"+
		"sentinel parallel-syncs %[1]s 1\n",
		sentinelMaster, host, port, scenarioDownAfter.Milliseconds(), scenarioFailoverTimeout.Milliseconds()), nil
}

// startSentinels makes the replica replicate from the primary, starts the
// Sentinels and waits until they agree on the primary, see the replica and
// know each other. It records the nodes' addresses as the Sentinels see
// them (r.peers) for the clients' dialers.
func (r *run) startSentinels(ctx context.Context) error {
	sb, ok := r.backend.(SentinelBackend)
	if !ok {
		return invalidScenario("backend %s cannot run Sentinels (no StartSentinels)", r.backend.Name())
	}
	ctx, cancel := context.WithTimeout(ctx, 2*nodeOpTimeout)
	defer cancel()
	// Every backend's nodes reach each other where this process reaches
	// them: a replica announces, and a Sentinel hands out, the node's Addr.
	pp, rp := r.nodes[0].Addr(), r.replica.Addr()
	r.peers = []string{pp, rp}
	rc := adminClient(rp)
	r.conns = append(r.conns, rc)
	if err := replicate(ctx, rc, pp); err != nil {
		return err
	}
	// Started once the replica is up, so that each Sentinel's first INFO
	// of the primary already lists it (it asks again only every 10s).
	conf, err := sentinelConf(pp)
	if err != nil {
		return err
	}
	if r.sentinels, err = sb.StartSentinels(ctx, scenarioSentinels, conf); err != nil {
		return err
	}
	r.all = append(r.all, r.sentinels...)
	deadline := time.Now().Add(sentinelConvergeTimeout)
	for {
		err := r.sentinelsAgree(ctx, pp, rp)
		if err == nil {
			return nil
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("the Sentinels did not agree within %v: %w", sentinelConvergeTimeout, err)
		}
		if !sleepUntil(ctx, time.Now().Add(50*time.Millisecond)) {
			return ctx.Err()
		}
	}
}

// sentinelsAgree reports, as an error, the first Sentinel that does not
// name primary, see replica up, or know the other Sentinels.
func (r *run) sentinelsAgree(ctx context.Context, primary, replica string) error {
	for _, s := range r.sentinels {
		err := r.onSentinel(ctx, s, func(ctx context.Context, sc *redis.SentinelClient) error {
			got, err := r.sentinelPrimary(ctx, sc)
			if err != nil {
				return err
			}
			if got != primary {
				return fmt.Errorf("it names %s as the primary, want %s", got, primary)
			}
			if up, err := upInstances(sc.Replicas(ctx, sentinelMaster)); err != nil || !slices.Equal(up, []string{replica}) {
				return errors.Join(err, fmt.Errorf("it sees replicas %v up, want [%s]", up, replica))
			}
			if up, err := upInstances(sc.Sentinels(ctx, sentinelMaster)); err != nil || len(up) != len(r.sentinels)-1 {
				return errors.Join(err, fmt.Errorf("it knows %d other Sentinels, want %d", len(up), len(r.sentinels)-1))
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// onSentinel runs f with a fresh client to Sentinel s, closed afterwards.
func (r *run) onSentinel(ctx context.Context, s Node, f func(ctx context.Context, sc *redis.SentinelClient) error) error {
	sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr(), Protocol: 2, DisableIdentity: true, MaxRetries: -1,
		ContextTimeoutEnabled: true, DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
	return withClient(ctx, 5*time.Second, "sentinel "+s.Name(), sc, f)
}

// sentinelPrimary is the primary's address as the Sentinel names it.
func (r *run) sentinelPrimary(ctx context.Context, sc *redis.SentinelClient) (string, error) {
	addr, err := sc.GetMasterAddrByName(ctx, sentinelMaster).Result()
	if err != nil {
		return "", err
	}
	if len(addr) != 2 {
		return "", fmt.Errorf("GET-MASTER-ADDR-BY-NAME answered %v", addr)
	}
	return net.JoinHostPort(addr[0], addr[1]), nil
}

// upInstances returns ip:port of every instance in a SENTINEL REPLICAS or
// SENTINELS answer that no flag marks down or disconnected.
func upInstances(cmd *redis.MapStringStringSliceCmd) ([]string, error) {
	list, err := cmd.Result()
	if err != nil {
		return nil, err
	}
	var up []string
	for _, m := range list {
		if f := m["flags"]; strings.Contains(f, "s_down") || strings.Contains(f, "o_down") || strings.Contains(f, "disconnected") {
			continue
		}
		up = append(up, net.JoinHostPort(m["ip"], m["port"]))
	}
	return up, nil
}

// newSentinelLockClient is client slot c's single lock over its own
// go-redis failover client. The client asks the Sentinels, which it dials
// directly, for the primary; Sentinel answers with a node's Addr, which
// the client's dialer maps to the client's own proxy link to that
// node, so that the run's network faults apply; any other address is
// refused rather than dialled past the proxies.
func (r *run) newSentinelLockClient(c int, quarantine time.Duration) (*lockClient, error) {
	routes := map[string]string{}
	sentinels := make([]string, len(r.sentinels))
	for i, s := range r.sentinels {
		sentinels[i] = s.Addr()
		routes[s.Addr()] = s.Addr()
	}
	for i, p := range r.peers {
		routes[p] = r.nw.Addr(c, i)
	}
	var d net.Dialer
	o := lockClientOptions()
	o.MasterName, o.Addrs = sentinelMaster, sentinels
	o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		to, ok := routes[addr]
		if !ok {
			return nil, fmt.Errorf("chaos: client %d: %s is neither a Sentinel nor a node of this run", c, addr)
		}
		return d.DialContext(ctx, network, to)
	}
	fc := redis.NewFailoverClient(o.Failover())
	r.conns = append(r.conns, fc)
	return r.singleLockClient(fc, quarantine)
}
