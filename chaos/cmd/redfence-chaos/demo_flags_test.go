package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestParseDemoFlags(t *testing.T) {
	def := demoConfig{nodes: 5, workers: 4, duration: 6 * time.Second, ttl: 2 * time.Second, hold: 5 * time.Millisecond, killAfter: 2 * time.Second}
	with := func(f func(*demoConfig)) demoConfig { c := def; f(&c); return c }
	checkParse(t, parseDemoFlags, nil, []parseCase[demoConfig]{
		{"defaults", nil, def, ""},
		{"kill-after follows duration", []string{"-duration", "1500ms"}, with(func(c *demoConfig) { c.duration, c.killAfter = 1500*time.Millisecond, 500*time.Millisecond }), ""},
		{"explicit kill-after", []string{"-kill-after", "1s"}, with(func(c *demoConfig) { c.killAfter = time.Second }), ""},
		{"kill-after zero kills at once", []string{"-kill-after", "0"}, with(func(c *demoConfig) { c.killAfter = 0 }), ""},
		{"all flags", []string{"-nodes", "3", "-workers", "1", "-duration", "1s", "-ttl", "100ms", "-hold", "0", "-kill-after", "10ms", "-redis-server", "/x/redis-server"},
			demoConfig{nodes: 3, workers: 1, duration: time.Second, ttl: 100 * time.Millisecond, killAfter: 10 * time.Millisecond, redisServer: "/x/redis-server"}, ""},
		{"too few nodes", []string{"-nodes", "2"}, demoConfig{}, "-nodes must be between 3 and 25"},
		{"too many nodes", []string{"-nodes", "26"}, demoConfig{}, "-nodes must be between 3 and 25"},
		{"no workers", []string{"-workers", "0"}, demoConfig{}, "-workers must be between 1"},
		{"zero duration", []string{"-duration", "0"}, demoConfig{}, "-duration must be positive"},
		{"short ttl", []string{"-ttl", "5ms"}, demoConfig{}, "-ttl must be at least 10ms"},
		{"negative hold", []string{"-hold", "-1ms"}, demoConfig{}, "-hold must not be negative"},
		{"kill after the end", []string{"-kill-after", "6s"}, demoConfig{}, "-kill-after must be at least 0 and less than -duration (6s)"},
		{"negative kill-after", []string{"-kill-after", "-1s"}, demoConfig{}, "-kill-after must be at least 0"},
		{"bad duration", []string{"-duration", "soon"}, demoConfig{}, `invalid value "soon" for flag -duration`},
		{"stray argument", []string{"extra"}, demoConfig{}, `unexpected arguments: ["extra"]`},
	})
}

func TestParseDemoFlagsHelp(t *testing.T) {
	checkParseHelp(t, parseDemoFlags, "Usage: redfence-chaos demo [flags]")
}

func TestDemoConfigDerived(t *testing.T) {
	c := demoConfig{nodes: 5, ttl: 2 * time.Second}
	assert.Equal(t, 50*time.Millisecond, c.nodeTimeout())
	assert.Equal(t, 4*time.Second, c.lockTimeout())
	assert.Equal(t, 4, c.killedNode())
	c.ttl = 100 * time.Millisecond
	assert.Equal(t, 10*time.Millisecond, c.nodeTimeout())
}
