package chaos

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/redlock"
)

// --- 15: Sentinel fails over a killed primary (single) ---

// scenario15 is scenario 15, Sentinel fails over a killed primary (single).
func scenario15() Scenario {
	return Scenario{
		Name:   "15",
		Title:  "Sentinel fails over a killed primary (single)",
		Steps:  "A primary n0, a replica n1 and three Sentinels (redis-server --sentinel, the same binary; down-after-milliseconds 500, failover-timeout 5s, quorum 2); every client runs single over its own go-redis failover client (redis.NewFailoverClient), as users run it. After a warm-up the primary is killed (SIGKILL, docker kill) while client A holds the lock; the Sentinels agree it is down and promote n1; every failover client follows; a cool-down runs the workload on the promoted replica. How clients reach the nodes: a failover client asks the Sentinels (dialled directly) for the primary, and Sentinel answers with the address the nodes know each other by (the node's own 127.0.0.1:port: containers run on the host's network); each client's dialer maps that address to the client's own proxy link to that node, so the run's network faults still apply, and refuses any other address rather than dial past the proxies. Announcing the proxies through Sentinel (announce-ip) would not do: every client has its own link to each node, and Sentinel hands out one address.",
		Expect: "See the variants: the double grant or not; in every variant B's token is above A's, A's late write is REJECTED, 0 fenced violations, Sentinel promotes n1 and every client gets an answer from it after the promotion (the recovery time, from the kill to the next grant, is reported).",
		Why:    "Sentinel's failover is the real version of scenario 7's: replication is asynchronous, so a promoted replica may miss what the lock wrote (docs/design.md, single vs redlock; docs/topologies.md, Sentinel).",
		Locks:  []string{LockSingle},
		Variants: []Scenario{
			sentinelVariant(Scenario{
				Name:   "15a",
				Title:  "Sentinel failover, the replica link held up, no replica acknowledgement",
				Steps:  "Scenario 15 with the replica's link held up before A acquires: once the replica has caught up (WAIT), n1 is paused (SIGSTOP, docker pause) and the primary drops its link (CLIENT KILL TYPE replica); A acquires and writes; n0 is killed and n1 resumed, with nothing to sync from; B tries while A's lease is valid and writes once it has; A writes again. The TTL is 6s here, so that A's lease outlasts the failover (about 2s).",
				Expect: "Double grant EXPECTED and asserted: the promoted replica never saw A's key. Fencing still holds (asserted): B's token is above A's, A's late write is REJECTED, 0 fenced violations. Grants resume after the promotion, through every client's failover client (asserted; recovery time reported).",
				Why:    "The documented unsafe case of single over Sentinel: an acquire that the replica never received is lost when Sentinel promotes it (Jepsen, Redis 2013; docs/design.md, single vs redlock). The replica missed A's counter write too, but single's token is max(counter + 1, the node's clock in microseconds) (docs/fencing.md, The proof), and the replica's clock is past A's token; across machines this needs the failover to take more than 2s (docs/fencing.md, The guarantee, assumption (D)), which Sentinel's default down-after-milliseconds of 30s gives.",
				unsafe: true,
				script: newScript(playSentinelFailover, checkSentinelFailover),
			}),
			sentinelVariant(Scenario{
				Name:       "15b",
				Title:      "Sentinel failover, the replica link held up, WithReplicaAcks(1, 300ms)",
				Steps:      "Scenario 15 with every client's single built with WithReplicaAcks(1, 300ms): each acquire and extend is followed by WAIT 1 300 in the same pipeline, and each request of a client is bounded by node timeout + acknowledgement timeout, 400ms, below TTL/2 (the failover clients' 500ms ReadTimeout is above it, so it does not cut WAIT short). Once the replica has caught up (WAIT), its link is held up as in 15a (n1 paused, CLIENT KILL TYPE replica) and A tries once; n1 is resumed, and once the primary lists it online and it acknowledges a write (SET, DEL, WAIT 1 on one connection), A acquires and writes, and n1 is read for A's key. n0 is killed (SIGKILL, docker kill); once a Sentinel names n1, B tries, every 50ms while A's lease is valid, until n1 answers; n0 is restarted empty and made a replica of n1 by hand (REPLICAOF to n1's address, as Sentinel would about 10s later), and once n0 acknowledges n1's writes, B retries every 50ms until it acquires, and writes; A writes again. The TTL is 6s, as in 15a.",
				Expect:     "No double grant (asserted): A's acquire with the link held up FAILS with ErrReplicaAcks (0 of 1 replicas) instead of succeeding (asserted); A's acknowledged key is on n1 before the kill (asserted); after the promotion n1 refuses B while A's lease is valid (taken: A's key is there; or too few acknowledgements: n1 has no replica yet; asserted), and B acquires only after A's validity ended (asserted). Fencing holds (asserted): B's token is above A's, A's late write is REJECTED, 0 fenced violations. Sentinel promotes n1 (asserted); grants resume after the promotion, and every client gets an answer from the promoted primary in the cool-down: a grant, taken, or an acknowledgement shortfall (WAIT answered with too few replicas, which only a primary that took the write gives; a failed or timed-out WAIT does not count) (asserted). The recovery time, from the kill to the next grant, is reported: it is the rest of A's lease, since no one may acquire before A's key expires on n1, and n1 grants nothing until n0 has rejoined as its replica.",
				Why:        "What WAIT buys: an acquire counts only once a replica has acknowledged its key and counter, and Sentinel promotes the most up-to-date replica it can reach, so this failover keeps the lock, where 15a's loses it; what the replica cannot acknowledge is refused, not granted and lost, at the price of no grants while the primary has no replica online (docs/topologies.md, Replica acknowledgement). What it does not: WAIT is not fsync (a replica that acknowledged and restarted without persistence forgets the key) and does not make Redis strongly consistent (with more replicas than acknowledgements asked for, a failover to one that did not acknowledge still loses the key; here the only replica is the one that acknowledged). Fencing tokens remain what protects the resource.",
				singleOpts: []redlock.Option{redlock.WithReplicaAcks(1, scenarioAckTimeout)},
				script:     newScript(playSentinelFailoverAcked, checkSentinelFailoverAcked),
			}),
		},
	}
}

// sentinelVariant adds to v what both variants of scenario 15 run with: a
// replica, Sentinels, and a 6s TTL (see their Steps).
func sentinelVariant(v Scenario) Scenario {
	// The primary starts the full sync at once instead of waiting 5s for
	// more replicas; in 15b n1 needs it too, to sync the restarted n0 at
	// once.
	v.spec = fastSync()
	v.ttl = 6 * time.Second
	v.replica, v.sentinel = true, true
	return v
}

// sentinelFailover is the state of scenario 15's variants: the duel, and
// what the Sentinels and (15b) the acknowledgements did.
type sentinelFailover struct {
	duel
	promoted    bool   // a Sentinel named n1 as the primary
	coolDown    moment // when the cool-down began
	ackRefused  bool   // 15b: A's acquire with the link held up failed on the acknowledgement
	replicaHasA bool   // 15b: n1 had A's key before the kill
	bRefused    *Op    // 15b: B's refusal by the promoted replica
}

func playSentinelFailover(ctx context.Context, r *run, s *sentinelFailover) error {
	replica := r.replica
	d := r.opts.Duration
	endRepl, err := r.holdUpReplica(ctx)
	if err != nil {
		return err
	}
	a := r.acquireA(ctx)
	if a == nil {
		return nil
	}
	r.writeA(ctx, &s.duel, a)
	endFail, killed, err := r.killPrimary(ctx, "primary n0 killed; the Sentinels fail over to n1")
	if err != nil {
		return err
	}
	if err := r.resume(ctx, replica); err != nil {
		return err
	}
	endRepl()
	b := r.acquire(ctx, 1, a.lease.ValidUntil().Add(r.ttl), false)
	if b != nil {
		r.fact("B acquired %v after the kill", time.Since(killed).Round(time.Millisecond))
	}
	r.writeB(ctx, &s.duel, b)
	s.promoted = r.waitPromoted(ctx)
	endFail()
	r.lateWrite(ctx, &s.duel, a, b)
	s.coolDown.mark(r)
	return r.workload(ctx, scenarioClients, d/3, nil)
}

func checkSentinelFailover(r *run, v *verdict, s *sentinelFailover) {
	v.want(s.promoted, "the Sentinels did not promote n1")
	a, b, late, ok := tokenFacts(v, &s.duel)
	if !ok {
		return
	}
	if r.sc.unsafe {
		wantDoubleGrant(v, a, b)
	} else {
		v.want(b.Return >= a.ValidUntil, "B acquired while A's lease was valid")
	}
	fencingHeld(v, a, b, late)
	checkCoolDownAnswers(v, s.coolDown, false)
}

// waitPromoted asks the Sentinels which node they name as the primary,
// until one names n1 or the failover timeout passes, records what each
// named, and reports whether one named n1. The Sentinel that led the
// failover knows first; the others learn it from its hello messages.
func (r *run) waitPromoted(ctx context.Context) bool {
	deadline := time.Now().Add(scenarioFailoverTimeout)
	var seen []string
	promoted := false
	for !promoted {
		seen = seen[:0]
		for i, s := range r.sentinels {
			if err := r.onSentinel(ctx, s, func(ctx context.Context, sc *redis.SentinelClient) error {
				got, err := r.sentinelPrimary(ctx, sc)
				if err != nil {
					return err
				}
				seen = append(seen, fmt.Sprintf("s%d: %s", i, got))
				promoted = promoted || got == r.peers[1]
				return nil
			}); err != nil {
				seen = append(seen, fmt.Sprintf("s%d: %v", i, err))
			}
		}
		if promoted || !time.Now().Before(deadline) || !sleepUntil(ctx, time.Now().Add(50*time.Millisecond)) {
			break
		}
	}
	r.fact("the Sentinels name as the primary %s (n1 is %s)", strings.Join(seen, ", "), r.peers[1])
	return promoted
}

// checkCoolDownAnswers checks that every client's failover client found the
// promoted replica: each got an answer from it in the cool-down, a grant or
// "taken", and with acks also an acknowledgement shortfall (see
// ackShortfall), which only a primary that took the write gives. There must
// be grants.
func checkCoolDownAnswers(v *verdict, coolDown moment, acks bool) {
	from := coolDown.at
	if !coolDown.ok {
		v.want(false, "the script did not reach the cool-down")
		return
	}
	reached := make([]int, scenarioClients)
	grants, short := 0, 0
	for _, op := range v.ops {
		if op.Kind != Acquire || op.Call < from {
			continue
		}
		switch {
		case op.Status == OK:
			grants++
			reached[op.Client]++
		case strings.Contains(op.Err, redlock.ErrTaken.Error()):
			reached[op.Client]++
		case acks && ackShortfallText(op.Err):
			short++
			reached[op.Client]++
		}
	}
	if acks {
		v.fact("after the promotion %d grants, %d acknowledgement shortfalls; answers per client %v", grants, short, reached)
	} else {
		v.fact("after the promotion %d grants; answers per client %v", grants, reached)
	}
	v.want(grants > 0, "no grant after the promotion")
	for c, n := range reached {
		v.want(n > 0, "client %d never reached the promoted replica", c)
	}
}

// --- 15b: the same failover with redlock.WithReplicaAcks ---

// scenarioAckTimeout is the acknowledgement timeout of 15b's
// WithReplicaAcks(1, ...): with the node timeout, each request of a client
// is bounded by 400ms, below half its 6s TTL. The failover clients'
// ReadTimeout, 500ms, is above that bound, so it does not cut WAIT short:
// go-redis ends a read at the earlier of ReadTimeout and the context's
// deadline, ContextTimeoutEnabled or not.
const scenarioAckTimeout = 300 * time.Millisecond

// ackTimeout bounds the waits until a primary's replica acknowledges writes
// again (a partial resync, or a full one of a restarted node).
const ackTimeout = 20 * time.Second

// ackShortfall reports whether err is a WithReplicaAcks failure in which
// the primary took the write and WAIT answered, counting too few replicas
// (not WAIT's own failure, such as a timeout).
func ackShortfall(err error) bool {
	return errors.Is(err, redlock.ErrReplicaAcks) && ackShortfallText(err.Error())
}

// ackShortfallText is ackShortfall for an error recorded in the history,
// which keeps only its text.
func ackShortfallText(msg string) bool {
	return strings.Contains(msg, redlock.ErrReplicaAcks.Error()) && !strings.Contains(msg, "WAIT failed")
}

// waitAcknowledging waits, bounded by ackTimeout, until primary reports a
// replica online and then a replica acknowledges a write: a SET and a DEL
// of a scratch key, then WAIT 1, on one connection (WAIT counts the
// connection's own writes). The order is redistest.WaitOnline's: a write
// made before a replica is online is in the snapshot it loads, so WAIT
// counts the replica for it at once; and after a full sync Redis 7.0
// streams the replica new writes only about a second later.
func (r *run) waitAcknowledging(ctx context.Context, primary Node) error {
	ctx, cancel := context.WithTimeout(ctx, ackTimeout)
	defer cancel()
	c := adminClient(primary.Addr())
	defer c.Close()
	conn := c.Conn()
	defer conn.Close()
	key := r.key + ":online"
	online := false
	var last error
	for {
		if !online {
			info, err := conn.Info(ctx, "replication").Result()
			online = err == nil && strings.Contains(info, ",state=online,")
			last = errors.Join(err, errors.New("no replica online"))
		}
		if online {
			var acked int64
			err := conn.Set(ctx, key, "1", 0).Err()
			if err == nil {
				err = conn.Del(ctx, key).Err()
			}
			if err == nil {
				acked, err = conn.Do(ctx, "WAIT", 1, 100).Int64()
			}
			if err == nil && acked >= 1 {
				return nil
			}
			last = errors.Join(err, fmt.Errorf("WAIT 1 answered %d", acked))
		}
		if !sleepUntil(ctx, time.Now().Add(20*time.Millisecond)) {
			return fmt.Errorf("no replica of %s acknowledged a write within %v: %w", primary.Name(), ackTimeout, last)
		}
	}
}

func playSentinelFailoverAcked(ctx context.Context, r *run, s *sentinelFailover) error {
	primary, replica := r.nodes[0], r.replica
	d := r.opts.Duration
	endRepl, err := r.holdUpReplica(ctx)
	if err != nil {
		return err
	}
	a, _, err := r.attempt(ctx, 0, false)
	held := true // the replica link is still held up
	if err == nil {
		// Without acknowledgements (WithReplicaAcks off, or no WAIT sent):
		// go on as 15a, with the link held up through the kill.
		r.fact("A's acquire SUCCEEDED with the replica link held up")
	} else {
		ok := errors.Is(err, redlock.ErrNotAcquired) && errors.Is(err, redlock.ErrReplicaAcks)
		s.ackRefused = ok
		if ok {
			r.fact("A's acquire with the replica link held up failed on the acknowledgement: %v", err)
		} else {
			r.fact("A's acquire with the replica link held up failed, but not on the acknowledgement: %v", err)
		}
		if err := r.resume(ctx, replica); err != nil {
			return err
		}
		if err := r.waitAcknowledging(ctx, primary); err != nil {
			return err
		}
		endRepl()
		held = false
		if a = r.acquireA(ctx); a == nil {
			return nil
		}
		if err := r.onNode(ctx, replica, func(ctx context.Context, c *redis.Client) error {
			v, err := c.Get(ctx, r.key).Result()
			if errors.Is(err, redis.Nil) {
				v, err = "", nil
			}
			lv, _ := a.lease.(interface{ Value() string })
			has := err == nil && lv != nil && v == lv.Value()
			s.replicaHasA = has
			r.fact("before the kill n1 %s A's key", verdictWord(has, "has", "does NOT have"))
			return err
		}); err != nil {
			return err
		}
	}
	r.writeA(ctx, &s.duel, a)
	endFail, killed, err := r.killPrimary(ctx, "primary n0 killed; the Sentinels fail over to n1; n0 restarted empty as n1's replica")
	if err != nil {
		return err
	}
	if held {
		if err := r.resume(ctx, replica); err != nil {
			return err
		}
		endRepl()
	}
	s.promoted = r.waitPromoted(ctx)
	// B tries while A's lease is valid, until the promoted replica answers:
	// "taken" (A's key is there), or too few acknowledgements (it has no
	// replica yet). Errors of a failover client still looking for the new
	// primary are not answers.
	var b *scriptedAcquire
	for time.Now().Before(a.lease.ValidUntil()) {
		got, op, err := r.attempt(ctx, 1, false)
		if err == nil {
			b = got
			r.fact("B acquired %v after the kill, while A's lease was valid", time.Since(killed).Round(time.Millisecond))
			break
		}
		if errors.Is(err, redlock.ErrTaken) || ackShortfall(err) {
			s.bRefused = &op
			r.fact("B refused %v after the kill: %v", time.Since(killed).Round(time.Millisecond), err)
			break
		}
		if !sleepUntil(ctx, time.Now().Add(50*time.Millisecond)) {
			return ctx.Err()
		}
	}
	// n0 comes back empty and replicates from n1, as Sentinel would make it
	// about 10s later: only then can n1 acknowledge writes.
	if err := r.restart(ctx, primary); err != nil {
		return err
	}
	if err := r.onNode(ctx, primary, func(ctx context.Context, c *redis.Client) error {
		if n, err := c.DBSize(ctx).Result(); err == nil {
			r.fact("n0 restarted with %d keys", n)
		}
		return replicaOf(ctx, c, r.peers[1])
	}); err != nil {
		return err
	}
	if err := r.waitAcknowledging(ctx, replica); err != nil {
		return err
	}
	r.fact("n0 acknowledged n1's writes %v after the kill", time.Since(killed).Round(time.Millisecond))
	endFail()
	if b == nil {
		deadline := a.lease.ValidUntil().Add(r.ttl)
		if m := time.Now().Add(3 * time.Second); m.After(deadline) {
			deadline = m
		}
		if b = r.acquire(ctx, 1, deadline, false); b != nil {
			r.fact("B acquired %v after the kill", time.Since(killed).Round(time.Millisecond))
		}
	}
	r.writeB(ctx, &s.duel, b)
	r.lateWrite(ctx, &s.duel, a, b)
	s.coolDown.mark(r)
	return r.workload(ctx, scenarioClients, d/3, nil)
}

func checkSentinelFailoverAcked(_ *run, v *verdict, s *sentinelFailover) {
	v.want(s.ackRefused, "A's acquire with the replica link held up did not fail with ErrReplicaAcks")
	v.want(s.replicaHasA, "n1 did not have A's acknowledged key before the kill")
	v.want(s.promoted, "the Sentinels did not promote n1")
	a, b, late, ok := tokenFacts(v, &s.duel)
	if !ok {
		return
	}
	v.want(s.bRefused != nil && s.bRefused.Return < a.ValidUntil, "B was not refused by the promoted replica while A's lease was valid")
	v.want(b.Return >= a.ValidUntil, "B acquired while A's lease was valid")
	fencingHeld(v, a, b, late)
	checkCoolDownAnswers(v, s.coolDown, true)
}

// killPrimary starts the failover, a fault described by what, by killing
// the primary n0; the kill is the run's heal, so the recovery time runs
// from it to the next grant. It returns the fault's end and when the kill
// returned.
func (r *run) killPrimary(ctx context.Context, what string) (end func(), killed time.Time, err error) {
	end = r.fault("%s", what)
	if err := r.kill(ctx, r.nodes[0]); err != nil {
		return end, killed, err
	}
	r.healed()
	return end, time.Now(), nil
}

// holdUpReplica runs the warm-up, waits until the replica has every write
// so far (catchUp), and then holds its link up: the replica is frozen and
// the primary drops its link, which the frozen replica cannot dial again, so
// it gets (and acknowledges) nothing from now on. It returns the fault's end.
func (r *run) holdUpReplica(ctx context.Context) (func(), error) {
	pc, replica := adminClient(r.nodes[0].Addr()), r.replica
	r.conns = append(r.conns, pc)
	if err := r.catchUp(ctx, pc, "its link was held up"); err != nil {
		return nil, err
	}
	end := r.fault("replica n1 paused and its replication link closed (CLIENT KILL TYPE replica)")
	if err := r.pause(ctx, replica); err != nil {
		return nil, err
	}
	if err := pc.Do(ctx, "CLIENT", "KILL", "TYPE", "replica").Err(); err != nil {
		return nil, fmt.Errorf("closing the replication link: %w", err)
	}
	return end, nil
}
