package main

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/redfence/redfence/internal/redistest"
)

// One server under two addresses would count twice: with the other node
// held by another owner, exec ran the command. The CLI refuses the node list
// before taking any lock, naming the two addresses.
func TestExecRefusesSameServerTwice(t *testing.T) {
	t.Parallel()
	nodes, clients := newNodes(t, 2)
	key := redistest.Key(t)
	holdKey(t, clients[1:], key, "another-owner", time.Minute)
	alias := fmt.Sprintf("localhost:%d", nodes[0].Port())
	marker := filepath.Join(t.TempDir(), "ran")
	list := nodes[0].Addr() + "," + alias + "," + nodes[1].Addr()

	r := runCLI(t, cliEnv(), "exec", "-nodes", list, "-key", key, "-quarantine", "0", "--", "touch", marker)
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.stderr, "clients 0 ("+nodes[0].Addr()+") and 1 ("+alias+") reach the same Redis server")
	assert.NoFileExists(t, marker, "the command must not run")

	r = runCLI(t, cliEnv(), "nodes", "check", "-nodes", list)
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.stderr, "reach the same Redis server")
}
