package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// heavyDependencies are the import path prefixes that the CLI must not
// build: the chaos harness and what it brings (Docker, testcontainers,
// toxiproxy, porcupine), and the demo's Prometheus endpoint. They belong to
// the chaos module's binary, redfence-chaos.
var heavyDependencies = []string{
	"github.com/redfence/redfence/chaos",
	"github.com/docker/",
	"github.com/moby/",
	"github.com/containerd/",
	"github.com/testcontainers/",
	"github.com/Shopify/toxiproxy",
	"github.com/anishathalye/porcupine",
	"github.com/prometheus/",
	"go.opentelemetry.io/otel/exporters/prometheus",
	"go.opentelemetry.io/otel/sdk",
}

// goList runs go list with args in this package's directory and returns its
// output's lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, append([]string{"list"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list %s: %s", strings.Join(args, " "), stderr.String())
	return strings.Fields(string(out))
}

// TestNoHeavyDependencies is issue 29's check: `go list -deps .` of the CLI
// holds none of Docker, testcontainers, toxiproxy, porcupine, Prometheus
// (nor the chaos module that brings them).
func TestNoHeavyDependencies(t *testing.T) {
	t.Parallel()
	deps := goList(t, "-deps", ".")
	require.NotEmpty(t, deps)
	assert.Contains(t, deps, "github.com/redfence/redfence/redlock", "the list is the CLI's")
	var heavy []string
	for _, dep := range deps {
		for _, prefix := range heavyDependencies {
			if strings.HasPrefix(dep, prefix) {
				heavy = append(heavy, dep)
			}
		}
	}
	assert.Empty(t, heavy, "the CLI builds these: move what needs them to redfence-chaos")
	t.Logf("go list -deps .: %d packages", len(deps))
}

// TestImportsPublicPackagesOnly: the CLI's code (its tests aside, which use
// the test rig) imports only the root module's public packages, so that a
// newer library release under the same CLI release still builds it
// (docs/design.md, Packages).
func TestImportsPublicPackagesOnly(t *testing.T) {
	t.Parallel()
	imports := goList(t, "-f", `{{join .Imports "\n"}}`, ".")
	require.Contains(t, imports, "github.com/redfence/redfence/redlock")
	var internal []string
	for _, imp := range imports {
		if strings.HasPrefix(imp, "github.com/redfence/redfence/internal/") {
			internal = append(internal, imp)
		}
	}
	assert.Empty(t, internal, "the CLI imports internal packages of the root module")
}
