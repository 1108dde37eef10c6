package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRunDispatch(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string // substring; "" means stdout must be empty
		wantStderr string // substring; "" means stderr must be empty
	}{
		{"no command", nil, exitUsage, "", "redfence-chaos: no command given\nredfence-chaos: the redfence"},
		{"--help", []string{"--help"}, exitOK, "  scenarios  ", ""},
		{"-h", []string{"-h"}, exitOK, "Commands:", ""},
		{"help", []string{"help"}, exitOK, "  soak  ", ""},
		{"help demo", []string{"help", "demo"}, exitOK, "-kill-after", ""},
		{"help soak", []string{"help", "soak"}, exitOK, "-unsafe", ""},
		{"help unknown", []string{"help", "nope"}, exitUsage, "", `redfence-chaos help: unknown command "nope"`},
		{"help too many", []string{"help", "demo", "x"}, exitUsage, "", "at most one command"},
		{"unknown command", []string{"exec"}, exitUsage, "", "redfence-chaos: unknown command \"exec\"\nredfence-chaos: the redfence"},
		{"demo -h", []string{"demo", "-h"}, exitOK, "", "Usage: redfence-chaos demo"},
		{"demo bad flag", []string{"demo", "-bogus"}, exitUsage, "", "flag provided but not defined: -bogus"},
		{"demo bad value", []string{"demo", "-nodes", "2"}, exitUsage, "", "-nodes must be between 3 and 25"},
		{"scenarios -h", []string{"scenarios", "-h"}, exitOK, "", "Usage: redfence-chaos scenarios"},
		{"soak without duration", []string{"soak"}, exitUsage, "", "redfence-chaos soak: -duration is required"},
		{"scenarios take no soak flag", []string{"scenarios", "-soak", "10m"}, exitUsage, "", "flag provided but not defined: -soak"},
		{"the soak's own flags", []string{"scenarios", "-unsafe"}, exitUsage, "", "flag provided but not defined: -unsafe"},
		{"soak runs no scenario", []string{"soak", "-duration", "1m", "-scenario", "1"}, exitUsage, "", "flag provided but not defined: -scenario"},
		{"soak writes no report", []string{"soak", "-duration", "1m", "-out", "x.md"}, exitUsage, "", "flag provided but not defined: -out"},
	}
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

func checkOutput(t *testing.T, name, got, want string) {
	t.Helper()
	if want == "" {
		assert.Empty(t, got, name)
		return
	}
	assert.Contains(t, got, want, name)
}

func TestEveryCommandHasSummaryAndRun(t *testing.T) {
	for name, c := range commands {
		assert.NotEmpty(t, c.summary, name)
		assert.NotNil(t, c.run, name)
	}
}

// TestFlagErrorsAreShort checks that a bad flag value gets one line saying
// what is wrong (for a duration without a unit, that it needs one) and a
// pointer to -h, not the whole help.
func TestFlagErrorsAreShort(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"demo", "-ttl", "2"}, `invalid value "2" for flag -ttl: parse error
redfence-chaos demo: -ttl takes a duration with a unit, such as 300ms, 10s or 1m30s
Run "redfence-chaos demo -h" for the flags.
`},
		{[]string{"soak", "-duration", "30"}, `invalid value "30" for flag -duration: parse error
redfence-chaos soak: -duration takes a duration with a unit, such as 300ms, 10s or 1m30s
Run "redfence-chaos soak -h" for the flags.
`},
		{[]string{"scenarios", "-backend", "vm"}, `redfence-chaos scenarios: -backend must be process, docker or all, got "vm"
Run "redfence-chaos scenarios -h" for the flags.
`},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		code := run(t.Context(), tt.args, &stdout, &stderr)
		assert.Equal(t, exitUsage, code, "%q", tt.args)
		assert.Equal(t, tt.want, stderr.String(), "%q", tt.args)
		assert.Empty(t, stdout.String(), "%q", tt.args)
	}
}
