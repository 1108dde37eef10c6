package lockbench

import (
	"bytes"
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redfence/redfence/bench/internal/link"
	"github.com/redfence/redfence/bench/internal/rig"
)

// linkConfig is a short run of s2 and s4 (a 1-node and a 5-node scenario)
// with a link of 1ms each way.
func linkConfig() Config {
	cfg := QuickConfig()
	cfg.Duration = 100 * time.Millisecond
	cfg.Warmup = 20 * time.Millisecond
	cfg.Workers = []int{1, 4}
	cfg.RTTPings = 20
	cfg.Only = []string{"s2", "s4"}
	cfg.LinkLatency = time.Millisecond
	cfg.Command = "link test"
	return cfg
}

// needLink skips the test when this process may not open a link.
func needLink(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts redis-server processes")
	}
	if _, err := rig.Binary(); err != nil {
		t.Fatal(err)
	}
	if err := link.Check(); errors.Is(err, link.ErrNotPermitted) {
		t.Skipf("needs root to open a link: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
}

// linkDevices returns the names of this namespace's devices that a link
// makes.
func linkDevices(t *testing.T) []string {
	t.Helper()
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, i := range ifs {
		if strings.HasPrefix(i.Name, "lbwire") {
			out = append(out, i.Name)
		}
	}
	return out
}

// newDevices returns the link devices there now that were not in before.
func newDevices(t *testing.T, before []string) []string {
	t.Helper()
	var out []string
	for _, d := range linkDevices(t) {
		if !slices.Contains(before, d) {
			out = append(out, d)
		}
	}
	return out
}

// TestLinkRun runs s2 and s4 on loopback and over a 1ms link: the link run
// has every row, a round trip over the link of at least 2ms, cycles of at
// least two such round trips, and its own part of the report; the link is
// gone afterwards.
func TestLinkRun(t *testing.T) {
	needLink(t)
	before := linkDevices(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := linkConfig()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if d := newDevices(t, before); len(d) > 0 {
		t.Errorf("devices left behind: %v", d)
	}
	if rep.LinkSkipped != nil || rep.Link == nil || rep.Link.link == nil {
		t.Fatalf("no link run: skipped %v", rep.LinkSkipped)
	}
	li := rep.Link.link
	if li.rtt.min < 2*cfg.LinkLatency {
		t.Errorf("PING round trip over the link %v, below twice the latency", li.rtt)
	}
	if !(li.loopRTT.min < li.rtt.min) {
		t.Errorf("loopback round trip %v not below the link's %v", li.loopRTT, li.rtt)
	}
	if li.wire.ToNodes.Packets == 0 || li.wire.FromNodes.Packets == 0 {
		t.Errorf("the wire forwarded nothing: %+v", li.wire)
	}
	if got := []string{rep.Link.Sections[0].ID, rep.Link.Sections[len(rep.Link.Sections)-1].ID}; len(rep.Link.Sections) != 2 || got[0] != "s2" || got[1] != "s4" {
		t.Fatalf("link sections %v, want s2 and s4", got)
	}
	for _, s := range rep.Link.Sections {
		for _, name := range scenarioRows[s.ID] {
			for _, w := range cfg.Workers {
				r, ok := s.Find(name, w)
				if !ok {
					t.Errorf("link %s: no row %q with %d workers", s.ID, name, w)
					continue
				}
				checkRow(t, s, r)
				// A cycle is a lock and then a release: two round trips
				// one after the other at least, each held 1ms both ways.
				if p50 := time.Duration(r.M[mP50]); p50 < 4*cfg.LinkLatency {
					t.Errorf("link %s %q (%d workers): p50 %v, below two round trips", s.ID, name, w, p50)
				}
			}
		}
	}
	if rt := rep.roundTripsTable(); len(rt.rows) != len(scenarioRows["s2"])+len(scenarioRows["s4"]) {
		t.Errorf("round trips table has %d rows", len(rt.rows))
	}
	tt := rep.linkTargetsTable()
	if len(tt.rows) == 0 || tt.header[len(tt.header)-1] != "loopback ratio" {
		t.Errorf("link targets table: %v", tt)
	}
	for _, row := range tt.rows {
		if row[len(row)-1] == "-" {
			t.Errorf("link target %q has no loopback ratio", row[1])
		}
	}

	var text, md bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Over a link with 1 ms added each way", "### Targets over the link", "### One worker: a cycle in round trips",
		"### 2. Uncontended lock+release, 1 node, over the link", "### 4. Fenced vs unfenced redfence redlock, 5 nodes, over the link",
		"| run over a link | 1ms added each way: PING round trip", "| round trip over the link |", "| wire CPU |", "Not run: s1, s3, s5, s6, s7, s8 (not asked for in this run: -only)", "## Peer configuration"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("Markdown lacks %q", want)
		}
	}
	for _, want := range []string{"== over a link with 1 ms added each way", "[link s2]", "[link s4]", "[link targets]", "round trip over the link: min"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("report:\n%s", text.String())
	}
}

// cancelOn is a progress writer that cancels a context at the first line
// containing what after a line containing after.
type cancelOn struct {
	mu          sync.Mutex
	after, what string
	cancel      context.CancelFunc
	armed, seen bool
}

func (c *cancelOn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case !c.armed:
		c.armed = bytes.Contains(p, []byte(c.after))
	case !c.seen && bytes.Contains(p, []byte(c.what)):
		c.seen = true
		c.cancel()
	}
	return len(p), nil
}

// TestLinkRunInterrupted: a run cancelled (as SIGINT and SIGTERM do)
// while its nodes are behind the link returns the context's error and
// leaves no device behind (the wire holds the host's device, so the wire
// is gone too).
func TestLinkRunInterrupted(t *testing.T) {
	needLink(t)
	before := linkDevices(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := linkConfig()
	// Cancelled after the first measurement over the link.
	w := &cancelOn{after: "link: up", what: " round 1/1 ", cancel: cancel}
	cfg.Progress = w
	_, err := Run(ctx, cfg)
	if !w.seen {
		t.Fatalf("no measurement over the link: %v", err)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run returned %v, want the context's error", err)
	}
	if d := newDevices(t, before); len(d) > 0 {
		t.Errorf("devices left behind: %v", d)
	}
}

// TestLinkSkipped: when the link may not be set up (no root), the loopback
// run is complete and the report says plainly that the link run was skipped
// and why; the command still succeeds (LinkFailed false).
func TestLinkSkipped(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server processes")
	}
	cfg := linkConfig()
	cfg.Only = []string{"s2"}
	cfg.checkLinkFunc = func() error {
		return &link.PrivilegeError{Step: "this process (effective uid 1000) lacks CAP_NET_ADMIN and CAP_SYS_ADMIN"}
	}
	var progress bytes.Buffer
	cfg.Progress = &progress
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Sections) != 1 || rep.Link != nil {
		t.Fatalf("%d loopback sections, link run %v", len(rep.Sections), rep.Link != nil)
	}
	if !errors.Is(rep.LinkSkipped, link.ErrNotPermitted) || rep.LinkFailed() {
		t.Errorf("LinkSkipped %v, LinkFailed %v", rep.LinkSkipped, rep.LinkFailed())
	}
	if !strings.Contains(progress.String(), "will be skipped: link: this process") {
		t.Errorf("progress does not say the link run will be skipped:\n%s", progress.String())
	}
	var md, text bytes.Buffer
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| run over a link | skipped: link: this process", "## Over a link with 1 ms added each way\n\n**Not run: link: this process",
		"a link needs root", "## 2. Uncontended lock+release, 1 node"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("Markdown lacks %q", want)
		}
	}
	if !strings.Contains(text.String(), "skipped: link: this process") {
		t.Errorf("text does not say the link run was skipped")
	}
}

// TestLinkNothingToRun: -only with no scenario the link run runs is a skip
// with its reason, not a failure, and sets up no link.
func TestLinkNothingToRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server processes")
	}
	cfg := linkConfig()
	cfg.Only = []string{"s5"}
	cfg.AllocCycles = 20
	cfg.checkLinkFunc = func() error { return nil }
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(rep.LinkSkipped, errNoLinkScenario) || rep.LinkFailed() || rep.Link != nil {
		t.Errorf("LinkSkipped %v, LinkFailed %v", rep.LinkSkipped, rep.LinkFailed())
	}
}

// TestLinkScenariosText: with the default scenarios, the report says what
// the network changes in each one run, and why s5 and s7 are left out.
func TestLinkScenariosText(t *testing.T) {
	rep := &Report{Config: DefaultConfig(), Link: &Report{}}
	for _, id := range LinkScenarioIDs {
		rep.Link.Sections = append(rep.Link.Sections, &Section{ID: id})
	}
	got := rep.linkScenarios()
	for _, want := range []string{"s3 (hand-overs under contention", "the scenarios whose figures depend on the network's round trips",
		"Not run: s5 (allocations per cycle count the work", "; s7 (its replica would run in the nodes' namespace"} {
		if !strings.Contains(got, want) {
			t.Errorf("lacks %q: %s", want, got)
		}
	}
	rep.Config.LinkOnly = []string{"s1"}
	rep.Link.Sections = rep.Link.Sections[:1]
	if got := rep.linkScenarios(); !strings.Contains(got, "Not run: s2, s3, s4, s6 (left out of the link run: -link-scenarios); s5 (allocations") || strings.Contains(got, "depend on the network") {
		t.Errorf("with -link-scenarios s1: %s", got)
	}
}

func TestLinkConfig(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Only = []string{"s1", "s5", "s7"}
	if got := cfg.linkIDs(); !slices.Equal(got, []string{"s1"}) {
		t.Errorf("link scenarios %v, want [s1]", got)
	}
	cfg.LinkOnly = []string{"s7"}
	if got := cfg.linkIDs(); !slices.Equal(got, []string{"s7"}) {
		t.Errorf("link scenarios %v, want [s7]", got)
	}
	for _, bad := range []func(*Config){
		func(c *Config) { c.LinkLatency = -time.Millisecond },
		func(c *Config) { c.LinkOnly = []string{"s9"} },
		func(c *Config) { c.LinkLatency = time.Millisecond; c.RTTPings = 0 },
	} {
		c := DefaultConfig()
		bad(&c)
		if c.validate() == nil {
			t.Errorf("%+v: valid", c)
		}
	}
	if got := fmtLatency(time.Millisecond); got != "1 ms" {
		t.Errorf("fmtLatency(1ms) = %q", got)
	}
	if got := fmtLatency(1500 * time.Microsecond); got != "1.5 ms" {
		t.Errorf("fmtLatency(1.5ms) = %q", got)
	}
}
