package main

// chaosDocSoak is the Soak section of docs/chaos.md (writeChaosDoc).
const chaosDocSoak = `
## Soak

The scenarios above are short scripted stories; the soak is the long
randomized run (issue 19). ` + "`redfence-chaos soak -duration DURATION`" + ` runs, on each backend, each
configuration: redlock, single, and single over Sentinel (` + "`single+sentinel`" + `;
` + "`-lock single`" + ` keeps both of single's). Each has the scenarios' setup (AOFAlways
nodes, four clients with their own proxied links, TTL 1s, fencing on, the guard
on a node no fault touches; for single+sentinel scenario 15's primary, replica
and three Sentinels, every client over its own failover client) for DURATION,
while a seeded nemesis starts a fault every 200-500ms, each lasting 200-900ms:

- kill and restart with persistence; pause; a cut, blackholed or resetting
  link from one client; latency on every client's link to a node;
- restart without persistence: kill, then start the node without what it
  held. The backends fix a node's persistence when they start it, so on the
  process backend the soak deletes the node's AOF directory and RDB file
  before the start; on Docker, where the files live in the container, it
  starts the node with its links from every client cut until FLUSHALL has
  emptied it (a node Sentinel had demoted comes back a replica, refuses
  FLUSHALL and is left to the full resync that replaces what it held;
  TestSoakRestartEmptyReplica). Either way the clients find what a restart without persistence
  leaves: an empty node with a new run id and an uptime from zero
  (TestSoakRestartEmpty, both ways);
- FLUSHALL; a forward clock jump of 2s (for good: a clock set back would make
  keys outlive their TTL);
- on Sentinel, ` + "`SENTINEL FAILOVER`" + `: the replica is promoted, and the old
  primary made its replica by hand once the Sentinels agree (Sentinel itself
  would do it 8 to 18 seconds later). Once the last fault on a node has
  healed, the nemesis waits until the deployment is whole again: the
  Sentinels agree on a primary, the other node replicates from it, every
  Sentinel sees it up, and it acknowledges a write (WAIT 1)
  (TestSoakInjectorSettlesAfterLastNodeFault). A kill or a pause of the primary longer
  than the Sentinels' down-after-milliseconds (500ms) makes Sentinel fail over
  on its own; "Sentinel promotions" counts every change of primary.

What each run may inject (soakPolicy; TestSoakPolicy, and TestSoakNemesisLimits
drives the nemesis for 30 simulated minutes per run against an injector that
checks every start):

| configuration | safe run | ` + "`-unsafe`" + ` adds |
|---|---|---|
| redlock, 5 nodes | at most 2 nodes disturbed at once; a node restarted (with or without persistence) or wiped counts until its restart quarantine (2s) ends, which is what makes restarts without persistence and FLUSHALL safe here (scenarios 6b, 14c) | clock jumps; 3 nodes at once |
| single, 1 node | one fault at a time; restarts only with persistence | FLUSHALL, restarts without persistence, clock jumps |
| single+sentinel, primary and replica | one fault at a time on either node, and failovers, each started with no other fault; the clients use ` + "`WithReplicaAcks(1, 300ms)`" + `, so a failover keeps every lock it granted (docs/topologies.md, Replica acknowledgement; scenario 15b) | clients without replica acknowledgements, so a failover can lose a lock (scenario 15a); FLUSHALL (on the primary; it reaches the replica); restarts without persistence; clock jumps of both nodes at once (one host's clock: the fencing tokens' clock floor assumes the nodes' clocks agree, docs/fencing.md); both nodes disturbed at once |

docs/design.md's assumptions exclude any failover for a lease on one Redis;
the failovers are in the safe run of single+sentinel only because they come
with replica acknowledgements and one replica that keeps what it acknowledged
(AOFAlways, never restarted empty in the safe run), the configuration
docs/topologies.md documents as keeping the key and scenario 15b passes as
safe.

Checked as the run goes, in every run: no fenced-resource violation; tokens
unique and increasing in real-time order; no lock key left a TTL after the
run; goroutines flat (the floor of the samples' last half, after a warm-up
quarter, within 50 or half of the first half's); the live heap flat (below);
every node's used_memory within 8 MiB of its first sample (fence retention);
at least one grant. In safe runs also: no double grant, porcupine's mutex
model over 5s windows, and no more nodes disturbed at once than the policy
allows.

The history is not kept in memory. Every 250ms the checks take the operations
completed so far (History.drain: IDs are given in Call order, and each drain
comes with a watermark before which every operation has been taken), check
them in Call order and drop them, each check keeping only what operations
still to come can change (soak_checks.go): a lease's believed-held interval
until the watermark passes its end, when it is compared with the intervals
still kept (a later lease starts after the watermark); fenced writes and
grants until they have returned before the operations still to come were
called; a mutex-model window until every lease in it has ended. The windows: a
lease (a granted acquire with the releases called before its validity ends)
spans its acquire's call to its validity's end and goes into every window it
meets, so two leases that overlap are both in the window holding the later
one's grant, and no overlap is lost at a cut (TestMutexWindowsAtTheCut,
TestMutexWindowsAgreeWithOverlaps). The streaming checks find what the batch
checks over the whole history find (TestStreamingChecksAgreeWithBatch: 400
random histories with overlaps, stale and fresh fenced writes, repeated and
lower tokens, fed in random chunks: the same double grants, fenced violations,
token regressions and windows; a token repeated after the grant that first had
it returned is counted once, as a regression, where tokenProblems counts it
twice), and each violation fed alone is caught (TestStreamingChecksCatch).
Acquire percentiles come from a histogram with buckets of 1/128 of the value
(TestLatencyHistogram). With -artifacts the history is appended to a hidden
file there as it drains, and kept, as history.json, only if the run fails.

The heap verdict: every 2s the soak samples the live heap (bytes marked live
by the last garbage collection, runtime/metrics /gc/heap/live:bytes), and the
floor of the samples' last half (after a warm-up quarter) may exceed the first
half's by at most the larger of 8 MiB and half of it (TestHeapVerdict); peaks
of garbage or of operations in flight do not move a floor, a leak does.
docs/soak.md has the measurements the bound comes from.

Lost updates of the unfenced control and acquires past their deadline are
reported, not checked. Progress lines every 10s give operations, faults and
the violations so far; the summary table gives operations, grants, faults by
kind, the most nodes disturbed at once, Sentinel promotions, violations,
p50/p99 acquire latency, availability, goroutines, heap and Redis memory. A
run with a violation exits 1 and saves history.json, the timelines of its
first failing windows (window-N.html) and summary.txt with the seed under
-artifacts. ` + "`make soak`" + ` runs each backend in turn (SOAK_BACKENDS, default process
then docker), the safe and the unsafe soak of every lock at once (-parallel),
SOAK_DURATION each (default 30m; SOAK_FLAGS, default -seed 19; scripts/soak.sh
keeps each command's log); ` + "`make soak-smoke`" + ` runs 12s per
run on the process backend, and CI runs it. With -parallel every soak of the
command runs at once: the load slows acquires, so its latency and
availability figures describe the loaded machine (docs/soak.md, -parallel).
The runs the last ` + "`make soak`" + ` recorded (docs/soak/) follow; docs/soak.md has
the earlier measurements and notes on them.
`
