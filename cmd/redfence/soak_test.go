package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/redfence/redfence/chaos"
)

func TestSoakPlan(t *testing.T) {
	assert.Equal(t, []string{chaos.LockRedlock, chaos.LockSingle}, chaosConfig{}.soakLocks())
	assert.Equal(t, []string{"single"}, chaosConfig{lock: "single"}.soakLocks())
	assert.Equal(t, 10*time.Second, soakProgressEvery(10*time.Minute))
	assert.Equal(t, 4*time.Second, soakProgressEvery(16*time.Second))
	assert.Equal(t, time.Second, soakProgressEvery(2*time.Second))
	assert.Equal(t, 2*time.Second, soakSampleEvery(10*time.Minute))
	assert.Equal(t, 750*time.Millisecond, soakSampleEvery(15*time.Second))
}

func TestChaosDocHasSoakSection(t *testing.T) {
	var b strings.Builder
	assert.NoError(t, writeChaosDoc(&b, chaosDocMeta{}, nil))
	doc := b.String()
	assert.Contains(t, doc, "\n## Soak\n")
	assert.Contains(t, doc, "TestMutexWindowsAtTheCut")
	assert.Less(t, strings.Index(doc, "## Soak"), strings.Index(doc, "## What the suite shows"))
}
