package main

import "github.com/redfence/redfence/chaos"

// clientAll is -client all: go-redis on every backend, then rueidis on the
// process backend (one more pass of about half make chaos's time, not two).
const clientAll = "all"

// pass is one backend's runs over one client.
type pass struct {
	backend, client string
}

func (p pass) label() string { return backendRun{name: p.backend, client: p.client}.label() }

// passes lists the passes of -client over backends.
func (c chaosConfig) passes(backends []string) []pass {
	var out []pass
	switch c.client {
	case clientAll:
		for _, b := range backends {
			out = append(out, pass{b, chaos.ClientGoRedis})
		}
		out = append(out, pass{backendProcess, chaos.ClientRueidis})
	default:
		for _, b := range backends {
			out = append(out, pass{b, c.client})
		}
	}
	return out
}

// forClient keeps the runs that apply to client (chaos.Scenario.SupportsClient).
func forClient(runs []chaosRun, client string) []chaosRun {
	var out []chaosRun
	for _, r := range runs {
		if r.sc.SupportsClient(client) {
			out = append(out, r)
		}
	}
	return out
}

// label names a pass in progress lines and the report: the backend, with
// the client when it is not go-redis.
func (br backendRun) label() string {
	if br.client == "" || br.client == chaos.ClientGoRedis {
		return br.name
	}
	return br.name + " over " + br.client
}
