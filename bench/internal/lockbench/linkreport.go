package lockbench

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The link run's part of the report: a section of its own after the
// loopback scenarios, with the link's setup, the targets' ratios over the
// link beside loopback's, the cycles in round trips, and every scenario's
// tables as above.

// linkTitle is the link section's heading.
func (r *Report) linkTitle() string {
	return "Over a link with " + fmtLatency(r.Config.LinkLatency) + " added each way"
}

// linkSetupRow is the main setup table's row about the link run, or false
// when none was asked for.
func (r *Report) linkSetupRow() (kv, bool) {
	if r.Config.LinkLatency <= 0 {
		return kv{}, false
	}
	k := "run over a link"
	if r.LinkSkipped != nil {
		return kv{k, "skipped: " + r.LinkSkipped.Error()}, true
	}
	if r.Link == nil || r.Link.link == nil {
		return kv{}, false
	}
	li := r.Link.link
	return kv{k, fmt.Sprintf("%v added each way: PING round trip p50 %s over the link, %s on loopback; its figures are in %q below (total time %s)",
		li.latency, fmtDur(li.rtt.p50), fmtDur(li.loopRTT.p50), r.linkTitle(), r.Link.Finished.Sub(r.Link.Started).Round(time.Second))}, true
}

// linkEnv is the link section's setup table: the link, then the rows of the
// link run's own setup that differ from the loopback run's kind.
func (r *Report) linkEnv() []kv {
	l := r.Link
	li := l.link
	w := li.wire
	packets := w.ToNodes.Packets + w.FromNodes.Packets
	cpu := w.UserCPU + w.SysCPU
	perPacket := "-"
	if packets > 0 {
		perPacket = fmtDur(cpu / time.Duration(packets))
	}
	env := []kv{
		{"link", fmt.Sprintf("%v added each way by a wire process between two TUN devices, MTU %d: %s (%s) in the benchmark's network namespace, %s (%s) in the nodes'",
			li.latency, li.mtu, li.hostIP, li.hostDev, li.nodeIP, li.nodeDev)},
		{"round trip over the link", fmt.Sprintf("%v (%d PINGs one after the other on one go-redis connection, before the scenarios)", li.rtt, li.rtt.n)},
		{"round trip on loopback", fmt.Sprintf("%v (the same, to a node on loopback, measured right after)", li.loopRTT)},
		{"wire, to the nodes", w.ToNodes.String()},
		{"wire, from the nodes", w.FromNodes.String()},
		{"wire CPU", fmt.Sprintf("%s user + %s system over the run, %s per packet (the system time includes the kernel's receive path of every packet the wire writes, which on loopback the sender pays)",
			fmtDur(w.UserCPU), fmtDur(w.SysCPU), perPacket)},
	}
	for _, e := range l.Env {
		switch e.K {
		case "nodes", "node age", "load average at start", "load average at end":
			env = append(env, e)
		}
	}
	return append(env, kv{"total time", l.Finished.Sub(l.Started).Round(time.Second).String()})
}

// linkWhy says what the network changes in each scenario of the link run.
var linkWhy = map[string]string{
	"s1": "uncontended cycles on 5 nodes: an acquire and a release, each at least one round trip",
	"s2": "the same on 1 node",
	"s3": "hand-overs under contention, where waking a waiter competes with polling",
	"s4": "fencing's second round",
	"s6": "the rate limiter's one call",
}

// linkScenarios says which scenarios the link run ran and why the others
// were left out.
func (r *Report) linkScenarios() string {
	var ran, parts []string
	for _, s := range r.Link.Sections {
		ran = append(ran, s.ID)
		if why, ok := linkWhy[s.ID]; ok {
			parts = append(parts, s.ID+" ("+why+")")
		} else {
			parts = append(parts, s.ID)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Run over the link: %s", strings.Join(parts, ", "))
	if slices.Equal(r.Config.linkPool(), LinkScenarioIDs) {
		b.WriteString(": the scenarios whose figures depend on the network's round trips")
	}
	b.WriteString(".")
	// The scenarios left out, grouped by reason, in order.
	var reasons []string
	left := map[string][]string{}
	for _, id := range ScenarioIDs {
		if slices.Contains(ran, id) {
			continue
		}
		why, ok := linkNotRun[id]
		switch {
		case !r.Config.runs(id):
			why = "not asked for in this run: -only"
		case !ok:
			why = "left out of the link run: -link-scenarios"
		}
		if _, seen := left[why]; !seen {
			reasons = append(reasons, why)
		}
		left[why] = append(left[why], id)
	}
	var parts2 []string
	for _, why := range reasons {
		parts2 = append(parts2, strings.Join(left[why], ", ")+" ("+why+")")
	}
	if len(parts2) > 0 {
		b.WriteString(" Not run: " + strings.Join(parts2, "; ") + ".")
	}
	return b.String()
}

// linkTargetsTable is the targets table of the link run, with the loopback
// run's ratio of each target beside it.
func (r *Report) linkTargetsTable() table {
	t := r.Link.targetsTable()
	t.header = append(t.header, "loopback ratio")
	loop := map[string]string{}
	for _, row := range r.targetsTable().rows {
		loop[row[0]+"\x00"+row[1]] = row[2]
	}
	for i, row := range t.rows {
		v, ok := loop[row[0]+"\x00"+row[1]]
		if !ok {
			v = "-"
		}
		t.rows[i] = append(row, v)
	}
	return t
}

// roundTripsTable puts each one-worker throughput row of the link run in
// round trips: its p50 over the link less its p50 on loopback, divided by
// the PING round trip over the link less loopback's, is about how many
// round trips one after the other a cycle makes.
func (r *Report) roundTripsTable() table {
	t := table{header: []string{"library (1 worker)", "scenario", "p50 over the link", "p50 on loopback", "round trips per cycle"}}
	li := r.Link.link
	extra := float64(li.rtt.p50 - li.loopRTT.p50)
	if extra <= 0 {
		return table{}
	}
	for _, s := range r.Link.Sections {
		if s.Kind != kindThroughput {
			continue
		}
		for _, row := range s.Rows {
			if row.Workers != 1 {
				continue
			}
			lo, ok := r.rowOf(s.ID, row.Name, 1)
			if !ok || lo.M[mP50] == 0 {
				continue
			}
			t.rows = append(t.rows, []string{row.Name, s.ID, fmtNs(row.M[mP50]), fmtNs(lo.M[mP50]),
				fmt.Sprintf("%.2f", (row.M[mP50]-lo.M[mP50])/extra)})
		}
	}
	return t
}

// linkMarkdown is the link section of docs/performance.md; "" when no link
// run was asked for.
func (r *Report) linkMarkdown() string {
	if r.Config.LinkLatency <= 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n## %s\n\n", r.linkTitle())
	if r.LinkSkipped != nil {
		fmt.Fprintf(&b, "**Not run: %s.** The loopback figures above are complete.\n", strings.ReplaceAll(r.LinkSkipped.Error(), "|", "\\|"))
		return b.String()
	}
	if r.Link == nil || r.Link.link == nil {
		return ""
	}
	lat := fmtLatency(r.Config.LinkLatency)
	fmt.Fprintf(&b, "The scenarios again, with every node behind a network link that adds %s each way, so that a round trip costs what it would between machines. "+
		"On loopback a round trip takes tens of microseconds and the CPU on its path decides most ratios; across a network the round trips do, and a library's extra CPU matters less than an extra round trip.\n\n", lat)
	fmt.Fprintf(&b, "The nodes run in a network namespace of their own, joined to the benchmark's by two TUN devices, one in each namespace, "+
		"with a wire process between them (`bench/internal/link`) that reads every IP packet from one device and writes it to the other once it has held it for %s, each direction in order. "+
		"Both sides use their kernels' whole TCP/IP stack over non-loopback interfaces, so every segment, acknowledgement and handshake pays the delay; nothing is proxied at the TCP level. "+
		"The kernel's own delay (`tc qdisc ... netem`) is not used: it needs the sch_netem module, which not every kernel has (the project's 2-core benchmark and CI machine has neither it nor fq or etf for timestamp pacing, as checked on 2026-12-04); "+
		"the wire needs only /dev/net/tun, network namespaces, iproute2 and root. "+
		"The wire's threads ask for a real-time priority (SCHED_FIFO), so that a packet that is due waits for a core as little as a network would make it. "+
		"It is software on the same cores as everything else: on a busy machine it holds a packet a little longer than %s, and it costs CPU, in a process of its own (so not in the client CPU columns); the table gives both. "+
		"Nodes, clients, rounds, durations and worker counts are as above, and the ratios read the same way.\n\n", lat, lat)
	b.WriteString(r.linkScenarios() + "\n\n")
	b.WriteString("| | |\n|---|---|\n")
	for _, e := range r.linkEnv() {
		fmt.Fprintf(&b, "| %s | %s |\n", e.K, strings.ReplaceAll(e.V, "|", "\\|"))
	}
	if t := r.linkTargetsTable(); len(t.rows) > 0 {
		b.WriteString("\n### Targets over the link\n\n")
		b.WriteString("The targets of the loopback run, checked against the medians of the run over the link, with the loopback run's ratio beside each. " +
			"The targets were set for loopback; over a link they say how much of each difference survives the round trips.\n\n")
		writeMarkdownTable(&b, t)
	}
	if t := r.roundTripsTable(); len(t.rows) > 0 {
		b.WriteString("\n### One worker: a cycle in round trips\n\n")
		fmt.Fprintf(&b, "A one-worker cycle's p50 over the link less its p50 on loopback, divided by the PING round trip over the link less loopback's (%s less %s): "+
			"about how many round trips one after the other a cycle makes (a Redlock round sends to the five nodes in parallel, so it costs one round trip, not five).\n\n",
			fmtDur(r.Link.link.rtt.p50), fmtDur(r.Link.link.loopRTT.p50))
		writeMarkdownTable(&b, t)
	}
	for _, s := range r.Link.Sections {
		main, ratios := s.tables()
		fmt.Fprintf(&b, "\n### %s, over the link\n\n", s.Title)
		writeMarkdownTable(&b, main)
		if len(ratios.rows) > 0 {
			b.WriteString("\n")
			writeMarkdownTable(&b, ratios)
		}
		if notes := s.errorNotes(); len(notes) > 0 {
			b.WriteString("\n")
			for _, n := range notes {
				fmt.Fprintf(&b, "- %s\n", strings.ReplaceAll(n, "|", "\\|"))
			}
		}
	}
	return b.String()
}

// linkText is the link run in the plain-text report; "" when none was
// asked for.
func (r *Report) linkText() string {
	if r.Config.LinkLatency <= 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n== %s\n", strings.ToLower(r.linkTitle()[:1])+r.linkTitle()[1:])
	if r.LinkSkipped != nil {
		fmt.Fprintf(&b, "  skipped: %v\n", r.LinkSkipped)
		return b.String()
	}
	if r.Link == nil || r.Link.link == nil {
		return b.String()
	}
	for _, e := range r.linkEnv() {
		fmt.Fprintf(&b, "  %s: %s\n", e.K, e.V)
	}
	fmt.Fprintf(&b, "  %s\n", r.linkScenarios())
	for _, s := range r.Link.Sections {
		main, ratios := s.tables()
		fmt.Fprintf(&b, "\n[link %s] %s\n", s.ID, s.Title)
		writeText(&b, main)
		if len(ratios.rows) > 0 {
			b.WriteString("\n")
			writeText(&b, ratios)
		}
		for _, n := range s.errorNotes() {
			fmt.Fprintf(&b, "  note: %s\n", n)
		}
	}
	if t := r.roundTripsTable(); len(t.rows) > 0 {
		b.WriteString("\n[link round trips] one-worker cycles: (p50 over the link - p50 on loopback) / (PING round trip over the link - on loopback)\n")
		writeText(&b, t)
	}
	if t := r.linkTargetsTable(); len(t.rows) > 0 {
		b.WriteString("\n[link targets] the project's goals, from the link run's medians, beside the loopback run's ratio\n")
		writeText(&b, t)
	}
	return b.String()
}
