package lockbench

import (
	"fmt"
	"slices"
	"strings"
)

// noiseFindings lists the targets the medians miss but some round of the
// run met: for them the run cannot tell a miss from its own noise.
func (r *Report) noiseFindings(b *strings.Builder) {
	var near []targetResult
	for _, res := range r.checkTargets() {
		if !res.met && res.roundsMet() > 0 {
			near = append(near, res)
		}
	}
	if len(near) == 0 {
		return
	}
	b.WriteString("\n### Missed by the medians, met in some rounds\n\n")
	b.WriteString("Each round runs the two rows of a target back to back, so a round's ratio compares them under the same load. " +
		"These targets were missed by the medians of this run but met in at least one of its rounds: the run cannot tell their miss from its own noise " +
		"(the paragraphs below still say what the measurements show where one covers them).\n\n")
	for _, res := range near {
		fmt.Fprintf(b, "- %s, %s: %.2f (%s %g); rounds %.2f to %.2f, %d of %d met.\n", res.scenario, res.what, res.ratio, res.op, res.bound,
			slices.Min(res.rounds), slices.Max(res.rounds), res.roundsMet(), len(res.rounds))
	}
}

// redsyncFindings explains two ratios against redsync that no other
// paragraph covers: uncontended throughput at 64 workers with the
// quarantine off (from the CPU a cycle costs), and grants/s against
// redsync's default retry when workers share one Client (from how evenly
// each served its workers).
func (r *Report) redsyncFindings(b *strings.Builder) {
	q0, rs, ok1 := r.rowPair("s1", 64, NameRFRedlockQ0, NameRedsync5, mRate)
	rf, rsd, ok2 := r.rowPair("s3", 0, NameRFDefaultRetry, NameRSDefaultRetry, mRate)
	if !ok1 && !ok2 {
		return
	}
	b.WriteString("\n### Against redsync: 64 workers uncontended, and one key shared\n\n")
	if ok1 {
		b.WriteString("Uncontended at 64 workers with the quarantine off, both cores are busy, so cycles/s follows the CPU a cycle costs. ")
		cpuPrediction(b, "a cycle cost the client %s with redsync and %s with redfence, and the nodes %s and %s",
			"ratio", cpu{rs.M[mCliCPU], rs.M[mSrvCPU]}, cpu{q0.M[mCliCPU], q0.M[mSrvCPU]}, q0.M[mRate]/rs.M[mRate])
		b.WriteString(" (redsync's cost over redfence's): redfence's batcher sends a node's queued commands as one pipeline (one write and one read for many), " +
			"where redsync makes a round trip per command on a connection of its own. ")
		fmt.Fprintf(b, "redsync's throughput at 64 workers varied by %.0f%% between rounds in this run (its spread), redfence's by %.0f%%. ", 100*rs.M[mSpread], 100*q0.M[mSpread])
	}
	if ok2 {
		fmt.Fprintf(b, "With one key shared through one Client, redfence serves the waiters in turn: in this run its workers got %.0f to %.0f grants each (Jain's index %.3f), "+
			"redsync's default (retry 50-250ms) %.0f to %.0f (Jain's index %.3f), at %.0f against %.0f grants/s. "+
			"A redsync worker that releases can take the key again at once while the others sleep out their retry delay, so many of its grants need no hand-over to another waiter; "+
			"each of redfence's does (the next waiter's acquire round after the release), which is the price of its fairness and of its p99 wait (the ratios above).\n",
			rf.M[mMinGrants], rf.M[mMaxGrants], rf.M[mJain], rsd.M[mMinGrants], rsd.M[mMaxGrants], rsd.M[mJain], rf.M[mRate], rsd.M[mRate])
	} else {
		b.WriteString("\n")
	}
}
