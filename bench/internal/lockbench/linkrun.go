package lockbench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/bench/internal/link"
	"github.com/redfence/redfence/bench/internal/rig"
)

// The run over a link (Config.LinkLatency): the same scenarios with every
// node in a network namespace of its own, behind a wire that holds each
// packet for the latency each way (package link), so that every round trip
// costs what it would across a network.

// LinkScenarioIDs are the scenarios a link run runs unless told otherwise:
// those whose figures the network's round trips decide.
var LinkScenarioIDs = []string{"s1", "s2", "s3", "s4", "s6"}

// linkNotRun says why a scenario is left out of the link run by default.
var linkNotRun = map[string]string{
	"s5": "allocations per cycle count the work a cycle does, not how long it waits: a run of s5 over the link (`-only s5 -link-scenarios s5 -link-latency 1ms -rounds 3`) gave every row's allocations per cycle within 0.1 of loopback's, so scenario 5's figures above stand",
	"s8": "scenario 3's rows of one Client per worker run over the link already, with 16 workers; 64 of them wait on the same hand-overs, only longer",
	"s7": "its replica would run in the nodes' namespace beside its primary, so the acknowledgement it waits for would not cross the link",
}

// errNoLinkScenario: the scenarios asked for (-only) include none that the
// link run runs; nothing failed.
var errNoLinkScenario = errors.New("none of the scenarios asked for runs over the link")

// linkInfo is what a link run's report says about its link.
type linkInfo struct {
	latency          time.Duration
	mtu              int
	hostIP, nodeIP   string
	hostDev, nodeDev string
	rtt, loopRTT     rttStats // PING round trips over the link and over loopback
	wire             link.Stats
}

// rttStats are n round trips' minimum, median and 99th percentile.
type rttStats struct {
	n             int
	min, p50, p99 time.Duration
}

func (s rttStats) String() string {
	return fmt.Sprintf("min %s, p50 %s, p99 %s", fmtDur(s.min), fmtDur(s.p50), fmtDur(s.p99))
}

func (cfg Config) checkLink() error {
	if cfg.checkLinkFunc != nil {
		return cfg.checkLinkFunc()
	}
	return link.Check()
}

// linkPool is the scenarios the link run may run.
func (cfg Config) linkPool() []string {
	if len(cfg.LinkOnly) > 0 {
		return cfg.LinkOnly
	}
	return LinkScenarioIDs
}

// linkIDs are the scenarios the link run runs, in order.
func (cfg Config) linkIDs() []string {
	var out []string
	for _, id := range ScenarioIDs {
		if slices.Contains(cfg.linkPool(), id) && cfg.runs(id) {
			out = append(out, id)
		}
	}
	return out
}

// runLink sets up the link, measures its round trip, runs the link
// scenarios behind it and tears it down (also on error and when ctx is
// cancelled).
func (cfg Config) runLink(ctx context.Context) (_ *Report, err error) {
	ids := cfg.linkIDs()
	if len(ids) == 0 {
		return nil, fmt.Errorf("%w (those that do: %s)", errNoLinkScenario, strings.Join(cfg.linkPool(), ", "))
	}
	progress := func(format string, args ...any) { fmt.Fprintf(cfg.Progress, "lockbench: link: "+format+"\n", args...) }
	progress("setting up a link with %v added each way", cfg.LinkLatency)
	l, err := link.Open(ctx, cfg.LinkLatency)
	if err != nil {
		return nil, err
	}
	closed := false
	defer func() {
		if !closed {
			_ = l.Close()
		}
	}()
	info := &linkInfo{latency: l.Latency(), mtu: l.MTU()}
	info.hostIP, info.nodeIP = l.Addrs()
	info.hostDev, info.nodeDev = l.Devices()
	if info.rtt, info.loopRTT, err = measureRTT(ctx, l.Host(), cfg.RTTPings); err != nil {
		return nil, fmt.Errorf("measuring the link: %w", err)
	}
	progress("up: %s (%s) to %s (%s in the nodes' namespace); PING round trip %v, on loopback %v", info.hostIP, info.hostDev, info.nodeIP, info.nodeDev, info.rtt, info.loopRTT)

	lcfg := cfg
	lcfg.Only = ids
	rep, err := lcfg.runOn(ctx, l.Host(), fmt.Sprintf("in a network namespace of their own at %s, behind the link", info.nodeIP))
	if err != nil {
		return nil, err
	}
	closed = true
	if err := l.Close(); err != nil {
		return nil, fmt.Errorf("tearing the link down: %w", err)
	}
	info.wire = l.Stats()
	rep.link = info
	progress("torn down; the wire forwarded %d packets to the nodes and %d back", info.wire.ToNodes.Packets, info.wire.FromNodes.Packets)
	return rep, nil
}

// measureRTT starts a node on host and one on loopback and returns the
// round trips of n PINGs to each, one after the other on one connection.
func measureRTT(ctx context.Context, host rig.Host, n int) (over, loop rttStats, err error) {
	for _, h := range []struct {
		host rig.Host
		out  *rttStats
	}{{host, &over}, {rig.Loopback, &loop}} {
		nd, err := h.host.Start(ctx)
		if err != nil {
			return over, loop, err
		}
		*h.out, err = pingRTT(ctx, nd.Addr(), n)
		_ = nd.Close()
		if err != nil {
			return over, loop, err
		}
	}
	return over, loop, nil
}

// pingRTT times n PINGs to addr, one after the other on one go-redis
// connection, after one that opens it.
func pingRTT(ctx context.Context, addr string, n int) (rttStats, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1, MaxRetries: -1, ContextTimeoutEnabled: true})
	defer c.Close()
	if err := c.Ping(ctx).Err(); err != nil {
		return rttStats{}, fmt.Errorf("PING %s: %w", addr, err)
	}
	ds := make([]time.Duration, n)
	for i := range ds {
		t0 := time.Now()
		if err := c.Ping(ctx).Err(); err != nil {
			return rttStats{}, fmt.Errorf("PING %s: %w", addr, err)
		}
		ds[i] = time.Since(t0)
	}
	slices.Sort(ds)
	return rttStats{n: n, min: ds[0], p50: ds[n/2], p99: ds[min(n-1, n*99/100)]}, nil
}

// fmtLatency writes a latency for prose: "1 ms", "500 µs".
func fmtLatency(d time.Duration) string {
	s := d.String()
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i <= 0 {
		return s
	}
	return s[:i] + " " + s[i:]
}
