package main

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks for leaked goroutines and owns the directory that the
// end-to-end tests build the redfence binary into (see redfenceBinary).
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "redfence-cli-test-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "creating the binary directory: %v\n", err)
		os.Exit(1)
	}
	cliBinDir = dir
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		if err := os.RemoveAll(dir); err != nil {
			fmt.Fprintf(os.Stderr, "removing %s: %v\n", dir, err)
		}
		os.Exit(code)
	}))
}
