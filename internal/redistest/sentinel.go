package redistest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redisnode"
)

// The settings of the Sentinels started by Sentinel.
const (
	// SentinelMaster is the name the Sentinels monitor the primary under.
	SentinelMaster = "redfence"
	// SentinelSentinels is how many Sentinels Sentinel starts.
	SentinelSentinels = 3
	// SentinelQuorum is how many Sentinels must agree that the primary is
	// down before one of them may fail it over (a majority of them must
	// also elect that one).
	SentinelQuorum = 2
	// SentinelDownAfter is down-after-milliseconds: how long the primary
	// must not answer before a Sentinel deems it down. Sentinel's default
	// is 30s.
	SentinelDownAfter = 500 * time.Millisecond
	// SentinelFailoverTimeout is failover-timeout. Sentinel's default is 3
	// minutes.
	SentinelFailoverTimeout = 5 * time.Second
	// SentinelConvergeTimeout bounds the waits of Sentinel and
	// SentinelRig.WaitPrimary.
	SentinelConvergeTimeout = 20 * time.Second
)

// SentinelRig is a primary, its replicas and three Sentinels monitoring
// them, all on 127.0.0.1, as started by Sentinel.
type SentinelRig struct {
	// Primary is the node that was primary at the start; after a failover
	// it is no longer (see WaitPrimary).
	Primary *redisnode.Node
	// Replicas replicate from Primary at the start.
	Replicas []*redisnode.Node
	// Sentinels are redis-server processes in Sentinel mode, each with its
	// own sentinel.conf (which it rewrites) in its own directory.
	Sentinels []*redisnode.Node
}

// Sentinel starts a primary, replicas replicas of it and SentinelSentinels
// Sentinels (redis-server --sentinel, the same binary) that monitor it as
// SentinelMaster with SentinelQuorum, SentinelDownAfter and
// SentinelFailoverTimeout. Each process has its own free loopback port and
// temporary directory. It waits until the primary reports every replica
// online (Replicated), then, bounded by SentinelConvergeTimeout, until
// every Sentinel names the primary, sees every replica (not down) and knows the other Sentinels.
// Everything is closed when the test ends.
func Sentinel(t testing.TB, replicas int) *SentinelRig {
	t.Helper()
	if replicas < 1 {
		t.Fatalf("redistest: Sentinel: %d replicas: a failover needs at least 1", replicas)
	}
	ctx := t.Context()
	primary, replicaNodes := Replicated(t, replicas)
	rig := &SentinelRig{Primary: primary, Replicas: replicaNodes}

	// Started once the replicas are up, so that each Sentinel's first INFO
	// of the primary already lists them (it asks again only every 10s).
	conf := fmt.Sprintf("sentinel monitor %[1]s 127.0.0.1 %[2]d %[3]d\n"+
		"sentinel down-after-milliseconds %[1]s %[4]d\n"+
		"sentinel failover-timeout %[1]s %[5]d\n"+
		"sentinel parallel-syncs %[1]s 1\n",
		SentinelMaster, rig.Primary.Port(), SentinelQuorum, SentinelDownAfter.Milliseconds(), SentinelFailoverTimeout.Milliseconds())
	for i := range SentinelSentinels {
		dir := t.TempDir()
		file := filepath.Join(dir, "sentinel.conf")
		require.NoError(t, os.WriteFile(file, []byte(conf), 0o600))
		s, err := redisnode.Start(ctx, redisnode.Options{Dir: dir, ConfigFile: file, Args: []string{"--sentinel"}})
		if err != nil {
			t.Fatalf("redistest: Sentinel: starting Sentinel %d: %v", i+1, err)
		}
		closeAtEnd(t, s, "Sentinel "+s.Addr())
		rig.Sentinels = append(rig.Sentinels, s)
	}
	want := make([]string, 0, replicas)
	for _, r := range rig.Replicas {
		want = append(want, r.Addr())
	}
	scs := sentinelClients(t, rig.Sentinels)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for i, s := range rig.Sentinels {
			sc := scs[i]
			addr, err := sc.GetMasterAddrByName(ctx, SentinelMaster).Result()
			if assert.NoError(c, err, "Sentinel %s", s.Addr()) {
				assert.Equal(c, rig.Primary.Addr(), strings.Join(addr, ":"), "the primary, says Sentinel %s", s.Addr())
			}
			assert.ElementsMatch(c, want, upInstances(c, sc.Replicas(ctx, SentinelMaster)), "the replicas, says Sentinel %s", s.Addr())
			assert.Len(c, upInstances(c, sc.Sentinels(ctx, SentinelMaster)), SentinelSentinels-1, "the other Sentinels, says Sentinel %s", s.Addr())
		}
	}, SentinelConvergeTimeout, 50*time.Millisecond, "redistest: Sentinel: the Sentinels did not agree")
	return rig
}

// SentinelAddrs returns the Sentinels' addresses.
func (rig *SentinelRig) SentinelAddrs() []string {
	addrs := make([]string, len(rig.Sentinels))
	for i, s := range rig.Sentinels {
		addrs[i] = s.Addr()
	}
	return addrs
}

// FailoverClient returns a go-redis failover client for SentinelMaster
// over the rig's Sentinels, as users run one, with the settings of Client
// (ClientTimeout, context deadlines honoured, no command retries, one dial
// attempt). Each opt may adjust the options. It is closed when the test
// ends.
func (rig *SentinelRig) FailoverClient(t testing.TB, opts ...func(*redis.FailoverOptions)) *redis.Client {
	t.Helper()
	u := universalOptions(rig.SentinelAddrs()...)
	u.MasterName = SentinelMaster
	o := u.Failover()
	for _, opt := range opts {
		if opt != nil {
			opt(o)
		}
	}
	c := redis.NewFailoverClient(o)
	closeAtEnd(t, c, "failover client")
	return c
}

// WaitPrimary waits, bounded by SentinelConvergeTimeout, until every
// running Sentinel names want as the primary, and want reports role
// master.
func (rig *SentinelRig) WaitPrimary(t testing.TB, want *redisnode.Node) {
	t.Helper()
	ctx := t.Context()
	wc := Client(t, want.Addr())
	scs := sentinelClients(t, rig.Sentinels)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for i, s := range rig.Sentinels {
			if !s.Running() {
				continue
			}
			addr, err := scs[i].GetMasterAddrByName(ctx, SentinelMaster).Result()
			if assert.NoError(c, err, "Sentinel %s", s.Addr()) {
				assert.Equal(c, want.Addr(), strings.Join(addr, ":"), "the primary, says Sentinel %s", s.Addr())
			}
		}
		info, err := wc.Info(ctx, "replication").Result()
		if assert.NoError(c, err) {
			assert.Equal(c, "master", parseInfo(info)["role"], "the role of %s", want.Addr())
		}
	}, SentinelConvergeTimeout, 20*time.Millisecond, "redistest: Sentinel: %s did not become the primary", want.Addr())
}

// Node returns the rig's data node (primary or replica) at addr, or nil.
func (rig *SentinelRig) Node(addr string) *redisnode.Node {
	for _, n := range append([]*redisnode.Node{rig.Primary}, rig.Replicas...) {
		if n.Addr() == addr {
			return n
		}
	}
	return nil
}

// sentinelClients returns a Sentinel client per Sentinel, closed when the
// test ends.
func sentinelClients(t testing.TB, sentinels []*redisnode.Node) []*redis.SentinelClient {
	t.Helper()
	scs := make([]*redis.SentinelClient, len(sentinels))
	for i, s := range sentinels {
		sc := redis.NewSentinelClient(ClientOptions(s.Addr()))
		closeAtEnd(t, sc, "Sentinel client for "+s.Addr())
		scs[i] = sc
	}
	return scs
}

// upInstances returns "ip:port" of each instance of a SENTINEL REPLICAS or
// SENTINEL SENTINELS answer that no flag marks down or disconnected.
func upInstances(c *assert.CollectT, cmd *redis.MapStringStringSliceCmd) []string {
	list, err := cmd.Result()
	if !assert.NoError(c, err) {
		return nil
	}
	var addrs []string
	for _, m := range list {
		flags := m["flags"]
		if strings.Contains(flags, "s_down") || strings.Contains(flags, "o_down") || strings.Contains(flags, "disconnected") {
			continue
		}
		addrs = append(addrs, m["ip"]+":"+m["port"])
	}
	return addrs
}
