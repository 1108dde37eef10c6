package chaos

import (
	"context"
)

// Scenarios returns the suite: fifteen scenarios, each with what it does,
// the outcome it expects and why (scenario 6 has three variants, 14 has
// four, 15 has two). Run plays one and checks its expectation. Scenarios that provoke an unsafe case do
// it with scripted steps, not by luck, and expect the unsafe outcome.
func Scenarios() []Scenario {
	scs := []Scenario{
		scenario1(),
		scenario2(),
		scenario3(),
		scenario4(),
		scenario5(),
		scenario6(),
		scenario7(),
		scenario8(),
		scenario9(),
		scenario10(),
		scenario11(),
		scenario12(),
		scenario13(),
		scenario14(),
		scenario15(),
	}
	for i, sc := range scs {
		scs[i] = sc.family()
	}
	return scs
}

// scenario1 is scenario 1, baseline, no faults.
func scenario1() Scenario {
	return Scenario{
		Name:   "1",
		Title:  "baseline, no faults",
		Steps:  "Four clients contend for one lock for the whole run; nothing is disturbed.",
		Expect: "0 double grants, 0 fenced-resource violations, 0 lost updates, unique increasing tokens, no lock key left after its TTL.",
		Why:    "The control experiment: without faults the lock must exclude and the checkers must find nothing; a failure here is a bug in the lock or the harness.",
		Locks:  []string{LockRedlock, LockSingle},
		script: newScript(func(ctx context.Context, r *run, _ *noState) error {
			return r.workload(ctx, scenarioClients, r.opts.Duration, nil)
		}, noCheck),
	}
}
