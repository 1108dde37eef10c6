package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
)

// dispatchCase is one command line given to run, and what it must give.
type dispatchCase struct {
	name       string
	args       []string
	wantCode   int
	wantStdout string // substring; "" means stdout must be empty
	wantStderr string // substring; "" means stderr must be empty
}

// checkDispatch runs each case through run.
func checkDispatch(t *testing.T, tests []dispatchCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(t.Context(), tt.args, &stdout, &stderr)
			assert.Equal(t, tt.wantCode, code)
			checkOutput(t, "stdout", stdout.String(), tt.wantStdout)
			checkOutput(t, "stderr", stderr.String(), tt.wantStderr)
		})
	}
}

func TestRunDispatch(t *testing.T) {
	checkDispatch(t, []dispatchCase{
		{"no command", nil, exitUsage, "", "redfence: no command given"},
		{"--help", []string{"--help"}, exitOK, "exec  ", ""},
		{"-h", []string{"-h"}, exitOK, "Commands:", ""},
		{"help", []string{"help"}, exitOK, "version  ", ""},
		{"help exec", []string{"help", "exec"}, exitOK, "-grace", ""},
		{"help version", []string{"help", "version"}, exitOK, "Usage: redfence version", ""},
		{"help unknown", []string{"help", "nope"}, exitUsage, "", `unknown command "nope"`},
		{"help too many", []string{"help", "exec", "x"}, exitUsage, "", "at most one command"},
		{"unknown command", []string{"nope"}, exitUsage, "", "redfence: unknown command \"nope\"\nredfence: tools"},
		{"chaos moved", []string{"chaos", "-backend", "all"}, exitUsage, "",
			"redfence: unknown command \"chaos\"\nredfence: chaos moved to the chaos module's binary: redfence-chaos scenarios (and soak for chaos -soak)"},
		{"demo moved", []string{"demo"}, exitUsage, "", "redfence: demo moved to the chaos module's binary: redfence-chaos demo"},
		{"exec -h", []string{"exec", "-h"}, exitOK, "", "Usage: redfence exec"},
		{"exec bad flag", []string{"exec", "-bogus"}, exitUsage, "", "flag provided but not defined: -bogus"},
		{"nodes moved hint only at the top", []string{"nodes", "demo"}, exitUsage, "", "redfence nodes: unknown subcommand \"demo\"\nUsage: redfence nodes"},
		{"nodes", []string{"nodes"}, exitUsage, "", "redfence nodes: no subcommand given\nUsage: redfence nodes"},
		{"nodes -h", []string{"nodes", "-h"}, exitOK, "", "Usage: redfence nodes <subcommand>"},
		{"nodes help", []string{"nodes", "help", "check"}, exitOK, "", "vouch  "},
		{"help nodes", []string{"help", "nodes"}, exitOK, "Usage: redfence nodes", ""},
		{"nodes unknown", []string{"nodes", "fix"}, exitUsage, "", "redfence nodes: unknown subcommand \"fix\"\nUsage: redfence nodes"},
	})
}

func checkOutput(t *testing.T, name, got, want string) {
	t.Helper()
	if want == "" {
		assert.Empty(t, got, name)
		return
	}
	assert.Contains(t, got, want, name)
}

// TestEveryCommandHasSummaryAndRun checks the commands and the nodes
// subcommands, and that no moved command is still one.
func TestEveryCommandHasSummaryAndRun(t *testing.T) {
	for _, cmds := range []map[string]command{commands, nodesSubcommands} {
		for name, c := range cmds {
			assert.NotEmpty(t, c.summary, name)
			assert.NotNil(t, c.run, name)
		}
	}
	for name := range movedCommands {
		assert.NotContains(t, commands, name)
	}
}
