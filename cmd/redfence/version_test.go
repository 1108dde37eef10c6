package main

import (
	"bytes"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestVersionLine(t *testing.T) {
	build := func(version string, settings ...debug.BuildSetting) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) {
			return &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/redfence/redfence/x", Version: version}, Settings: settings}, true
		}
	}
	rev := debug.BuildSetting{Key: "vcs.revision", Value: "2119efc0123456789abcdef0123456789abcdef0"}
	dirty := debug.BuildSetting{Key: "vcs.modified", Value: "true"}
	assert.Equal(t, "redfence v0.1.0 (go1.26.0)", versionLine(build("v0.1.0")), "go install ...@v0.1.0")
	assert.Equal(t, "redfence (devel) (go1.26.0)", versionLine(build("(devel)")), "a checkout without VCS stamping")
	assert.Equal(t, "redfence (devel) (go1.26.0)", versionLine(build("")))
	assert.Equal(t, "redfence (devel) (commit 2119efc01234-dirty, go1.26.0)", versionLine(build("(devel)", rev, dirty)))
	assert.Equal(t, "redfence unknown (the binary carries no build information)",
		versionLine(func() (*debug.BuildInfo, bool) { return nil, false }))
}

func TestVersionCommand(t *testing.T) {
	var stdout, stderr bytes.Buffer
	assert.Equal(t, exitOK, run(t.Context(), []string{"version"}, &stdout, &stderr))
	assert.Regexp(t, `^redfence \S+ \(.*go1\.\d+.*\)\n$`, stdout.String())
	assert.Empty(t, stderr.String())

	stdout.Reset()
	assert.Equal(t, exitUsage, run(t.Context(), []string{"version", "now"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), `redfence version: unexpected arguments: ["now"]`)
	assert.Empty(t, stdout.String())

	stderr.Reset()
	assert.Equal(t, exitOK, run(t.Context(), []string{"version", "-h"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "Usage: redfence version")
}
