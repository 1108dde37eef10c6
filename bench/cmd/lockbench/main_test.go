package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestQuick runs the command as `-quick` with tiny durations on one scenario
// and checks the text and Markdown output. The lockbench package's TestSmoke
// covers every scenario and row.
func TestQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server processes")
	}
	out := filepath.Join(t.TempDir(), "docs", "performance.md")
	var stdout, stderr bytes.Buffer
	args := []string{"-quick", "-duration", "100ms", "-warmup", "10ms", "-workers", "1,4", "-only", "s2", "-q", "-out", out}
	if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
	}
	md, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"redfence single, defaults", "bsm/redislock, defaults", "redsync, 1 pool, defaults", "GOMAXPROCS", "cycles/s"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
		}
		if !strings.Contains(string(md), want) {
			t.Errorf("Markdown lacks %q", want)
		}
	}
	if !strings.Contains(string(md), "go run ./cmd/lockbench -quick -duration 100ms") {
		t.Errorf("Markdown lacks the command line")
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-workers", "0"}, {"-only", "s9"}, {"-rounds", "0"}, {"extra"}, {"-link-latency", "-1ms"}, {"-link-scenarios", "s9"}} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, &stdout, &stderr); code == 0 {
			t.Errorf("%q: exit 0", args)
		}
	}
}
