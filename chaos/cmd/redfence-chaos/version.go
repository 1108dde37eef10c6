package main

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
)

const versionUsage = `Usage: redfence-chaos version

Prints the version of the module this binary was built from: the release
(v0.1.0) when it was installed with go install ...@VERSION, "(devel)" when it
was built in a checkout (go build, go run, go install .), followed by the
commit when the build recorded one and the Go version. Needs no Redis.
`

// runVersionCommand implements "redfence-chaos version".
func runVersionCommand(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("redfence-chaos version", versionUsage, stderr)
	if err := parseNoArgs(fs, args); err != nil {
		return parseCode(err)
	}
	fmt.Fprintln(stdout, versionLine(debug.ReadBuildInfo))
	return exitOK
}

// versionLine describes the build that readBuildInfo (debug.ReadBuildInfo)
// reports: "redfence-chaos VERSION (go1.26.0)", with the commit when the build
// stamped one ("(devel) (commit 2119efc-dirty, go1.26.0)").
func versionLine(readBuildInfo func() (*debug.BuildInfo, bool)) string {
	info, ok := readBuildInfo()
	if !ok {
		return "redfence-chaos unknown (the binary carries no build information)"
	}
	version := info.Main.Version
	if version == "" {
		version = "(devel)"
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value[:min(len(s.Value), 12)]
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "-dirty"
		}
	}
	if rev != "" {
		return fmt.Sprintf("redfence-chaos %s (commit %s%s, %s)", version, rev, dirty, info.GoVersion)
	}
	return fmt.Sprintf("redfence-chaos %s (%s)", version, info.GoVersion)
}
