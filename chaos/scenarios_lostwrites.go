package chaos

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/internal/keys"
)

// --- 14: a node loses writes: older snapshot, FLUSHALL ---

// scenario14 is scenario 14, a node loses writes under a lease: older snapshot, FLUSHALL.
func scenario14() Scenario {
	return Scenario{
		Name:   "14",
		Title:  "a node loses writes under a lease: older snapshot, FLUSHALL",
		Steps:  "Scenario 6's script (A reaches only {n0,n1,n2}, B only {n2,n3,n4}; A acquires and writes; n2 loses A's key and counter; B tries while A's lease is valid, and writes once it has; A writes again with its token), with two more ways for n2 to lose them: a restart from an RDB snapshot taken before A acquired (14a, 14b), and FLUSHALL while n2 keeps running (14c, 14d).",
		Expect: "With the restart quarantine (14a, 14c): 0 double grants. Without it (14b, 14d): a double grant, expected and asserted. In all four B's token is above A's, A's late write is REJECTED and no fenced write is judged wrong (asserted).",
		Why:    "Two ways of losing writes that docs/fencing.md (The guarantee) covers besides a restart without persistence: a restart from an older RDB snapshot, and FLUSHALL. The quarantine catches the first by the node's uptime and the second by its missing marker; the clock floor keeps tokens increasing in both.",
		Locks:  []string{LockRedlock},
		Variants: []Scenario{
			{
				Name:       "14a",
				Title:      "restart from an older RDB snapshot, restart quarantine on",
				Steps:      "Nodes run with RDBSnapshot persistence (no AOF, no automatic saves). After the warm-up n2 is told to SAVE; then A acquires {n0,n1,n2}; n2 is killed (SIGKILL, docker kill: nothing is saved on the way down) and started again from that snapshot, which the script checks: n2's quarantine marker and its fence counter as of the SAVE are back, A's key is not. n2 sits out the 2s quarantine.",
				Expect:     "0 double grants: n2 refuses B (restart quarantine) although its marker survived, so B acquires only after A's validity; B's token is above A's and A's late write is REJECTED; 0 fenced violations.",
				Why:        "A marker restored from an old snapshot does not vouch for the keys written after it: the acquire script quarantines a node whose run id changed until its uptime reaches the quarantine (docs/design.md: restart quarantine). n2's counter is behind A's token; the clock floor puts B's token above A's anyway (docs/fencing.md, The proof), and the quarantine is what meets assumption (D) for it across machines (docs/fencing.md, The guarantee).",
				spec:       NodeSpec{Persistence: RDBSnapshot},
				quarantine: scenarioQuarantine,
				script:     newScript(playOlderSnapshot, checkOlderSnapshot),
			},
			{
				Name:     "14b",
				Title:    "restart from an older RDB snapshot, no quarantine",
				Steps:    "Scenario 14a with WithQuarantine(0), so no node has a marker, and a TTL of 2s (as in 6a: on Docker the restart takes a good part of A's lease): n2 comes back with its fence counter as of the SAVE and without A's key, and votes at once.",
				Expect:   "Double grant EXPECTED and asserted: B acquires {n2,n3,n4} while A's lease is valid. Fencing still holds (asserted): B's token is above A's, A's late write is REJECTED, 0 fenced violations.",
				Why:      "A snapshot loses every write made after it, lock keys included, and without the quarantine a second majority forms (docs/design.md: restart quarantine). The counter lost with it is covered by the clock floor: n2 restarts on the machine's one clock, already past A's token (docs/fencing.md, The guarantee: with the quarantine off nothing enforces assumption (D)).",
				spec:     NodeSpec{Persistence: RDBSnapshot},
				ttl:      2 * time.Second,
				noQuaran: true,
				unsafe:   true,
				script:   newScript(playOlderSnapshot, checkOlderSnapshot),
			},
			{
				Name:       "14c",
				Title:      "FLUSHALL on a node, restart quarantine on",
				Steps:      "NoPersistence nodes. While A holds {n0,n1,n2}, n2 gets FLUSHALL and keeps running: A's key, n2's fence counter and its quarantine marker are gone.",
				Expect:     "0 double grants: finding no marker at B's first request, n2 quarantines itself for 2s and refuses, so B acquires only after A's validity; B's token is above A's and A's late write is REJECTED; 0 fenced violations.",
				Why:        "A node without a marker may have lost keys whether or not it restarted, so it sits out one quarantine (docs/design.md: restart quarantine), which also meets assumption (D) for its lost counter (docs/fencing.md, The guarantee); the clock floor puts B's token above A's (docs/fencing.md, The proof).",
				quarantine: scenarioQuarantine,
				script:     newScript(playFlushAll, checkCrashRestart),
			},
			{
				Name:     "14d",
				Title:    "FLUSHALL on a node, no quarantine",
				Steps:    "Scenario 14c with WithQuarantine(0): n2 votes at once after the FLUSHALL.",
				Expect:   "Double grant EXPECTED and asserted: B acquires {n2,n3,n4} while A's lease is valid. Fencing still holds (asserted): B's token is above A's, A's late write is REJECTED, 0 fenced violations.",
				Why:      "FLUSHALL deletes lock keys and fence counters alike, and without the quarantine nothing notices (docs/design.md: restart quarantine). The clock floor keeps B's token above A's: n2 keeps running on a clock already past A's token, the machine's one clock (docs/fencing.md, The proof).",
				noQuaran: true,
				unsafe:   true,
				script:   newScript(playFlushAll, checkCrashRestart),
			},
		},
	}
}

// fenceCounter reads the run's fence counter on one node (0 if absent).
func (r *run) fenceCounter(ctx context.Context, c *redis.Client) (int64, error) {
	s, err := c.HGet(ctx, keys.Fence(r.key), "t").Result()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("fence counter %q: %w", s, err)
	}
	return n, nil
}

// snapshotDuel is 14a's and 14b's state: the duel, and whether n2 came
// back as of its snapshot.
type snapshotDuel struct {
	duel
	fromSnapshot bool
}

// playOlderSnapshot plays 14a and 14b: n2 SAVEs after the warm-up, then is
// killed and restarted from that snapshot while A holds the lock.
func playOlderSnapshot(ctx context.Context, r *run, s *snapshotDuel) error {
	n2 := r.nodes[2]
	var saved int64 // n2's fence counter in its snapshot
	snapshot := func(ctx context.Context) error {
		return r.onNode(ctx, n2, func(ctx context.Context, c *redis.Client) error {
			if err := c.Save(ctx).Err(); err != nil {
				return fmt.Errorf("SAVE: %w", err)
			}
			var err error
			if saved, err = r.fenceCounter(ctx, c); err != nil {
				return err
			}
			if saved == 0 {
				return errors.New("no fence counter to snapshot: the warm-up never fenced on n2")
			}
			return nil
		})
	}
	return r.overlapping(ctx, &s.duel, snapshot, func(ctx context.Context) error {
		end := r.fault("n2 killed and restarted from its snapshot taken before A acquired")
		defer end()
		if err := errors.Join(r.kill(ctx, n2), r.restart(ctx, n2)); err != nil {
			return err
		}
		// What n2 came back with, before anyone asks it for anything.
		return r.onNode(ctx, n2, func(ctx context.Context, c *redis.Client) error {
			counter, err := r.fenceCounter(ctx, c)
			if err != nil {
				return err
			}
			held, err := c.Exists(ctx, r.key).Result()
			if err != nil {
				return err
			}
			marker, err := c.Exists(ctx, keys.Marker).Result()
			if err != nil {
				return err
			}
			a := *s.a // overlapping disturbs only once A holds the lock
			wantMarker := int64(0)
			if r.quaran > 0 {
				wantMarker = 1 // vouched for at setup, so in the snapshot
			}
			ok := counter == saved && counter < int64(a.Token) && held == 0 && marker == wantMarker
			s.fromSnapshot = ok
			r.fact("n2 came back with fence counter %d (%d at the SAVE; A's token %d), A's key %s, its quarantine marker %s",
				counter, saved, a.Token, verdictWord(held == 0, "absent", "PRESENT"), verdictWord(marker == 1, "present", "absent"))
			return nil
		})
	}, r.untilAfterQuarantine)
}

func checkOlderSnapshot(r *run, v *verdict, s *snapshotDuel) {
	checkCrashRestart(r, v, &s.duel)
	v.want(s.fromSnapshot, "n2 did not come back as of its snapshot (see what it came back with)")
}

// playFlushAll plays 14c and 14d: n2 gets FLUSHALL while A holds the lock.
func playFlushAll(ctx context.Context, r *run, s *duel) error {
	n2 := r.nodes[2]
	return r.overlapping(ctx, s, nil, func(ctx context.Context) error {
		end := r.fault("FLUSHALL on n2")
		defer end()
		return r.onNode(ctx, n2, func(ctx context.Context, c *redis.Client) error {
			return c.FlushAll(ctx).Err()
		})
	}, r.untilAfterQuarantine)
}
