package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/redlock"
)

// soakSentinelSettle bounds the wait, after a fault on a node of single
// over Sentinel, until the deployment is whole again (see settle): a
// failover Sentinel started meanwhile takes a few seconds, a full sync of
// the restarted node and Redis 7.0's second before it streams writes to a
// new replica another few.
const soakSentinelSettle = 2 * time.Minute

// soakSentinelScenario is the Scenario of a soak of single over Sentinel: a
// primary n0, its replica n1 and three Sentinels (scenario 15's setup) with
// AOFAlways persistence on both nodes, and in safe runs every client with
// WithReplicaAcks(1, 300ms), which is what makes a failover safe (scenario
// 15b): an acquire counts only once the replica has its key and counter.
func soakSentinelScenario(unsafe bool) Scenario {
	sc := soakScenario(unsafe)
	sc.Name += "-sentinel"
	sc.Locks = []string{LockSingle}
	sc.spec.Args = fastSync().Args
	sc.replica, sc.sentinel = true, true
	if !unsafe {
		sc.singleOpts = []redlock.Option{redlock.WithReplicaAcks(1, scenarioAckTimeout)}
	}
	return sc
}

// soakSentinel drives the Sentinel side of a soak of single over Sentinel:
// it finds the primary the Sentinels agree on, fails over, and puts the
// deployment back together after a fault (settle).
type soakSentinel struct {
	r     *run
	nodes []Node // n0 and n1, in the order of r.peers and the network's nodes
	next  int    // the Sentinel the next SENTINEL FAILOVER goes to

	primary    atomic.Int32 // index in nodes of the primary last agreed on
	promotions atomic.Int32 // how many times that changed: failovers by any cause
}

func newSoakSentinel(r *run) *soakSentinel {
	return &soakSentinel{r: r, nodes: []Node{r.nodes[0], r.replica}}
}

// agreed returns the index of the node every Sentinel names as the
// primary, with no Sentinel seeing it down or failing it over.
func (s *soakSentinel) agreed(ctx context.Context) (int, error) {
	got := -1
	for _, sn := range s.r.sentinels {
		err := s.r.onSentinel(ctx, sn, func(ctx context.Context, sc *redis.SentinelClient) error {
			m, err := sc.Master(ctx, sentinelMaster).Result()
			if err != nil {
				return err
			}
			if f := m["flags"]; f != "master" {
				return fmt.Errorf("flags %q", f)
			}
			i := slices.Index(s.r.peers, m["ip"]+":"+m["port"])
			switch {
			case i < 0:
				return fmt.Errorf("it names %s:%s, not a node of this run", m["ip"], m["port"])
			case got >= 0 && i != got:
				return fmt.Errorf("it names %s, another Sentinel %s", s.r.peers[i], s.r.peers[got])
			}
			got = i
			return nil
		})
		if err != nil {
			return -1, err
		}
	}
	return got, nil
}

// settle waits until the deployment is whole: the Sentinels agree on a
// primary, which answers as one; the other node replicates from it (made
// to by hand, REPLICAOF, if it came back as a primary or still follows
// the old one: Sentinel would do the same after 8 to 18 seconds) and every
// Sentinel sees it up; and the primary's writes are acknowledged by it.
// It counts a change of primary as a promotion.
func (s *soakSentinel) settle(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, soakSentinelSettle)
	defer cancel()
	var last error
	for {
		p, err := s.agreed(ctx)
		if err == nil {
			err = s.joined(ctx, p)
		}
		if err == nil {
			err = s.r.waitAcknowledging(ctx, s.nodes[p])
		}
		if err == nil {
			if old := s.primary.Swap(int32(p)); int(old) != p {
				s.promotions.Add(1)
			}
			return nil
		}
		last = err
		if !sleepUntil(ctx, time.Now().Add(50*time.Millisecond)) {
			return fmt.Errorf("single over Sentinel did not settle within %v: %w", soakSentinelSettle, last)
		}
	}
}

// joined checks that node p answers as a primary and the other as its
// replica with its link up, seen up by every Sentinel; it points the other
// node at p if it follows no one or someone else.
func (s *soakSentinel) joined(ctx context.Context, p int) error {
	q := 1 - p
	err := s.r.onNode(ctx, s.nodes[p], func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "replication").Result()
		if err == nil && !strings.Contains(info, "role:master") {
			err = errors.New("the agreed primary answers as a replica")
		}
		return err
	})
	if err != nil {
		return err
	}
	err = s.r.onNode(ctx, s.nodes[q], func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		field := func(name string) string {
			for line := range strings.SplitSeq(info, "\n") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
					return v
				}
			}
			return ""
		}
		if field("role") != "slave" || field("master_host")+":"+field("master_port") != s.r.peers[p] {
			if err := replicaOf(ctx, c, s.r.peers[p]); err != nil {
				return err
			}
			return fmt.Errorf("%s made a replica of %s", s.nodes[q].Name(), s.nodes[p].Name())
		}
		if field("master_link_status") != "up" {
			return errors.New("the replica's link is down")
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, sn := range s.r.sentinels {
		if err := s.r.onSentinel(ctx, sn, func(ctx context.Context, sc *redis.SentinelClient) error {
			up, err := upInstances(sc.Replicas(ctx, sentinelMaster))
			if err == nil && !slices.Equal(up, []string{s.r.peers[q]}) {
				err = fmt.Errorf("it sees replicas %v up", up)
			}
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

// soakFailoverRetry is how long failover waits for the promotion a
// SENTINEL FAILOVER asked for before it asks again: a Sentinel aborts a
// failover whose replica does not answer as a primary within its
// failover-timeout (5s here), or finds no good replica at that moment, and
// the Sentinels then go on agreeing on the old primary.
const soakFailoverRetry = 4 * scenarioFailoverTimeout

// failover settles the deployment, then has a Sentinel fail the primary
// over to its replica (SENTINEL FAILOVER: no node is stopped), asking
// again (the next Sentinel) while none promotes it, and settles again once
// the Sentinels agree on the replica. It returns the index of the old
// primary.
func (s *soakSentinel) failover(ctx context.Context) (int, error) {
	if err := s.settle(ctx); err != nil {
		return -1, err
	}
	p := int(s.primary.Load())
	deadline := time.Now().Add(soakSentinelSettle)
	for {
		err := s.askFailover(ctx, deadline)
		if err != nil {
			return p, err
		}
		retry := time.Now().Add(soakFailoverRetry)
		for {
			q, err := s.agreed(ctx)
			if err == nil && q != p {
				return p, s.settle(ctx)
			}
			if !time.Now().Before(deadline) || !sleepUntil(ctx, time.Now().Add(50*time.Millisecond)) {
				if err == nil {
					err = fmt.Errorf("they still agree on %s", s.nodes[p].Name())
				}
				return p, fmt.Errorf("the Sentinels did not promote %s within %v: %w", s.nodes[1-p].Name(), soakSentinelSettle, err)
			}
			if !time.Now().Before(retry) {
				break // ask again
			}
		}
	}
}

// askFailover sends SENTINEL FAILOVER to the next Sentinel until one
// accepts it or deadline passes. A Sentinel may refuse for a moment after
// the last fault (-NOGOODSLAVE while its view of the replica is older than
// that of the others, -INPROG): the next one is asked.
func (s *soakSentinel) askFailover(ctx context.Context, deadline time.Time) error {
	for {
		sn := s.r.sentinels[s.next%len(s.r.sentinels)]
		s.next++
		err := s.r.onSentinel(ctx, sn, func(ctx context.Context, sc *redis.SentinelClient) error {
			return sc.Failover(ctx, sentinelMaster).Err()
		})
		if err == nil {
			return nil
		}
		if !time.Now().Before(deadline) || !sleepUntil(ctx, time.Now().Add(200*time.Millisecond)) {
			return fmt.Errorf("SENTINEL FAILOVER: %w", err)
		}
	}
}
