package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redisnode"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
)

func TestNodesCheckEndToEnd(t *testing.T) {
	t.Parallel()
	risky := redistest.Nodes(t, 2)
	r := runCLI(t, cliEnv(), "nodes", "check", "-nodes", nodeList(risky))
	assert.Equal(t, exitFailure, r.code)
	assert.Equal(t, 2, strings.Count(r.stdout, "RISK: appendonly is off"))
	assert.Contains(t, r.stdout, "role:             master")
	assert.Contains(t, r.stdout, "maxmemory-policy: noeviction")
	assert.True(t, strings.HasSuffix(r.stdout, "AT RISK: 2 of 2 nodes have a setting that lets the lock grant a second holder or a token repeat (see each RISK)\n"), "last line")

	safe := redistest.Nodes(t, 2, func(o *redisnode.Options) { o.AppendFsyncAlways = true })
	r = runCLI(t, cliEnv(), "nodes", "check", "-nodes", nodeList(safe))
	assert.Equal(t, exitOK, r.code)
	assert.Contains(t, r.stdout, "appendfsync:      always")
	assert.Equal(t, 2, strings.Count(r.stdout, "\n  no risk found\n"))
	assert.True(t, strings.HasSuffix(r.stdout, "no risk found: all 2 nodes checked\n"), "last line")

	// One node goes through package single.
	r = runCLI(t, cliEnv(), "nodes", "check", "-nodes", safe[0].Addr())
	assert.Equal(t, exitOK, r.code)

	require.NoError(t, safe[1].Kill())
	r = runCLI(t, cliEnv(), "nodes", "check", "-nodes", nodeList(safe))
	assert.Equal(t, exitUnavailable, r.code)
	assert.Contains(t, r.stdout, safe[1].Addr()+"\n  could not check: ")
	assert.True(t, strings.HasSuffix(r.stdout, "UNKNOWN: 1 of 2 nodes could not be checked\n"), "last line")

	// A node that cannot be asked might be the one that shows use: none is
	// vouched for.
	r = runCLI(t, cliEnv(), "nodes", "vouch", "-nodes", nodeList(safe))
	assert.Equal(t, exitUnavailable, r.code)
	assert.Contains(t, r.stdout, safe[0].Addr()+": NOT vouched for: no node is vouched for unless every node answers and none shows it was in use\n")
	assert.Contains(t, r.stdout, safe[1].Addr()+": NOT vouched for: ")
	assert.Contains(t, r.stderr, "2 of 2 nodes could not be vouched for")
}

// An interrupted nodes subcommand says so, and what it may have left,
// and exits 130 without a report.
func TestNodesInterrupted(t *testing.T) {
	t.Parallel()
	args := []string{"-nodes", nodeList(redistest.Nodes(t, 1))}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for _, tc := range []struct {
		run  func(ctx context.Context, args []string, stdout, stderr io.Writer) int
		want string
	}{
		{runNodesCheck, "redfence nodes check: interrupted\n"},
		{runNodesVouch, "redfence nodes vouch: interrupted; some nodes may have been vouched for\n"},
	} {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, exitInterrupted, tc.run(ctx, args, &stdout, &stderr), tc.want)
		assert.Equal(t, tc.want, stderr.String())
		assert.Empty(t, stdout.String(), "no report after %q", tc.want)
	}
}

func TestCredentialsFromEnvironment(t *testing.T) {
	t.Parallel()
	nodes, clients := newNodes(t, 1)
	c := clients[0]
	require.NoError(t, c.Do(t.Context(), "ACL", "SETUSER", "alice", "on", ">alice-pw", "~*", "&*", "+@all").Err())
	require.NoError(t, c.ConfigSet(t.Context(), "requirepass", "default-pw").Err())
	args := []string{"status", "-nodes", nodes[0].Addr(), "-key", "k"}

	r := runCLI(t, cliEnv(), args...)
	assert.Equal(t, exitUnavailable, r.code, "no password")
	assert.Contains(t, r.stdout, "unreachable:")

	r = runCLI(t, cliEnv(envPassword+"=default-pw"), args...)
	assert.Equal(t, exitOK, r.code)
	r = runCLI(t, cliEnv(envUsername+"=alice", envPassword+"=alice-pw"), args...)
	assert.Equal(t, exitOK, r.code)
	r = runCLI(t, cliEnv(envUsername+"=alice", envPassword+"=default-pw"), args...)
	assert.Equal(t, exitUnavailable, r.code, "wrong password for alice")
	assert.NotContains(t, r.stdout+r.stderr, "default-pw", "the password is never printed")

	r = runCLI(t, cliEnv(envPassword+"=default-pw"), "exec", "-single", "-nodes", nodes[0].Addr(), "-key", "k", "--", "true")
	assert.Equal(t, exitOK, r.code)

	for _, flagArgs := range [][]string{{"-password", "x"}, {"--password=x"}} {
		r = runCLI(t, cliEnv(), append([]string{"exec", "-nodes", nodes[0].Addr(), "-key", "k"}, append(flagArgs, "--", "true")...)...)
		assert.Equal(t, exitUsage, r.code)
		assert.Contains(t, r.stderr, "flag provided but not defined: -password")
		assert.Contains(t, r.stderr, "there is no -password flag: set $REDFENCE_PASSWORD")
	}
}

func TestCLIUsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"exec", "-nodes", "127.0.0.1:1", "--", "true"}, "redfence exec: -key is required\nRun \"redfence exec -h\" for the flags."},
		{[]string{"exec", "-nodes", "127.0.0.1:1", "-key", "k"}, "no command given"},
		{[]string{"exec", "-key", "k", "--", "true"}, "no nodes given"},
		{[]string{"exec", "-nodes", "127.0.0.1", "-key", "k", "--", "true"}, `"127.0.0.1" is not host:port`},
		{[]string{"exec", "-single", "-nodes", "a:1,b:1", "-key", "k", "--", "true"}, "-single uses exactly one node, but 2 are given"},
		{[]string{"exec", "-nodes", "a:1", "-key", "k", "-ttl", "2m", "--", "true"}, "exceeds the restart quarantine"},
		{[]string{"exec", "-bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"status", "-nodes", "a:1"}, "-key is required"},
		{[]string{"nodes", "check"}, "no nodes given"},
		{[]string{"nodes", "vouch", "-nodes", "a:1,a:1"}, "given twice"},
		{[]string{"nodes"}, "no subcommand given"},
		{[]string{"nodes", "fix"}, `unknown subcommand "fix"`},
	}
	for _, tt := range tests {
		r := runCLI(t, cliEnv(), tt.args...)
		assert.Equal(t, exitUsage, r.code, "%q", tt.args)
		assert.Contains(t, r.stderr, tt.want, "%q", tt.args)
	}
}

// TestCLIFlagErrorsAreShort checks that a bad flag value gets one line
// saying what is wrong (for a duration without a unit, that it needs one)
// and a pointer to -h, not the whole help.
func TestCLIFlagErrorsAreShort(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"exec", "-nodes", "a:1", "-key", "k", "-ttl", "5", "--", "true"}, `invalid value "5" for flag -ttl: parse error
redfence exec: -ttl takes a duration with a unit, such as 300ms, 10s or 1m30s
Run "redfence exec -h" for the flags.
`},
		{[]string{"status", "-nodes", "a:1", "-key", "k", "-quarantine", "60"}, `invalid value "60" for flag -quarantine: parse error
redfence status: -quarantine takes a duration with a unit, such as 300ms, 10s or 1m30s
Run "redfence status -h" for the flags.
`},
		{[]string{"exec", "-bogus"}, `flag provided but not defined: -bogus
Run "redfence exec -h" for the flags.
`},
		{[]string{"exec", "-nodes", "a:1", "-key", "k", "-ttl", "2s", "-grace", "3s", "--", "true"},
			"redfence exec: -grace (3s) must be shorter than -ttl (2s): once the lock is lost, the command has about ttl/5 to stop before another client can take the lock\n" +
				"Run \"redfence exec -h\" for the flags.\n"},
	}
	for _, tt := range tests {
		r := runCLI(t, cliEnv(), tt.args...)
		assert.Equal(t, exitUsage, r.code, "%q", tt.args)
		assert.Equal(t, tt.want, r.stderr, "%q", tt.args)
	}
}

func TestNodesDispatch(t *testing.T) {
	checkDispatch(t, []dispatchCase{
		{"help lists all", []string{"--help"}, exitOK, "status   show a lock's holder", ""},
		{"help exec", []string{"help", "exec"}, exitOK, "75   the lock was lost", ""},
		{"exec -h", []string{"exec", "-h"}, exitOK, "", "Usage: redfence exec [flags] -- command [args...]"},
		{"status -h", []string{"status", "-h"}, exitOK, "", "Exit status: 0 if every node answered, 69 otherwise"},
		{"help nodes", []string{"help", "nodes"}, exitOK, "vouch  mark brand-new nodes", ""},
		{"nodes -h", []string{"nodes", "-h"}, exitOK, "", "Usage: redfence nodes <subcommand>"},
		{"nodes check -h", []string{"nodes", "check", "-h"}, exitOK, "", "69   a node could not be checked"},
		{"nodes vouch -h", []string{"nodes", "vouch", "-h"}, exitOK, "", "WARNING: only for a BRAND-NEW set of nodes"},
		{"nodes no sub", []string{"nodes"}, exitUsage, "", "redfence nodes: no subcommand given"},
		{"nodes unknown", []string{"nodes", "nope"}, exitUsage, "", `unknown subcommand "nope"`},
	})
}

func TestWriteChecksAndCode(t *testing.T) {
	safe := redlock.NodeCheck{Role: "master", AppendOnly: "yes", AppendFsync: "always", MaxmemoryPolicy: "noeviction"}
	risky := safe
	risky.AppendFsync, risky.Risks = "everysec", []string{"appendfsync is \"everysec\""}
	risky.Maxmemory = 1 << 20
	failed := redlock.NodeCheck{Err: errors.New("CONFIG GET appendonly: ERR unknown command")}
	tests := []struct {
		name   string
		checks []redlock.NodeCheck
		code   int
		want   []string
	}{
		{"all safe", []redlock.NodeCheck{safe, safe}, exitOK, []string{"a:1\n  role:             master\n", "no risk found", "no risk found: all 2 nodes checked\n"}},
		{"risky", []redlock.NodeCheck{safe, risky}, exitFailure, []string{"maxmemory:        1048576 bytes", "  RISK: appendfsync is \"everysec\"\n", "AT RISK: 1 of 2 nodes have a setting that lets the lock grant a second holder or a token repeat (see each RISK)\n"}},
		{"unchecked wins", []redlock.NodeCheck{risky, failed}, exitUnavailable, []string{"a:2\n  could not check: CONFIG GET appendonly: ERR unknown command\n", "AT RISK: 1 of 2 nodes have a setting that lets the lock grant a second holder or a token repeat (see each RISK), and 1 could not be checked\n"}},
		{"unchecked", []redlock.NodeCheck{safe, failed}, exitUnavailable, []string{"UNKNOWN: 1 of 2 nodes could not be checked\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			writeChecks(&b, []string{"a:1", "a:2"}, tt.checks)
			for _, w := range tt.want {
				assert.Contains(t, b.String(), w)
			}
			assert.Equal(t, tt.code, checksCode(tt.checks))
		})
	}
}
