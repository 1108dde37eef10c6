package lockbench

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/redfence/redfence/bench/internal/rig"
)

type kv struct{ K, V string }

// environment is the setup table's first rows; where says where the nodes
// run ("loopback", or behind the link).
func environment(cfg Config, where string) []kv {
	env := []kv{
		{"command", cfg.Command},
		{"date", time.Now().UTC().Format("2006-01-02 15:04 UTC")},
		{"go", runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH},
		{"GOMAXPROCS / NumCPU", fmt.Sprintf("%d / %d", runtime.GOMAXPROCS(0), runtime.NumCPU())},
		{"cpu", cpuModel()},
		{"nodes", fmt.Sprintf("%d redis-server for Redlock scenarios, %d for single-node (%s, %s, --save '' --appendonly no)", redlockNodes, singleNodes, rig.Version(), where)},
		{"libraries", libVersions()},
		{"go-redis clients", fmt.Sprintf("one *redis.Client per node per library, PoolSize %d, ContextTimeoutEnabled, other options default", cfg.PoolSize)},
		{"measurements", fmt.Sprintf("%v each, rounds: %d (figures are medians), warm-up %v per library and part", cfg.Duration, cfg.Rounds, cfg.Warmup)},
		{"load average at start", loadAvg()},
	}
	return env
}

func libVersions() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	want := map[string]string{
		"github.com/redfence/redfence":     "redfence",
		"github.com/go-redsync/redsync/v4": "redsync",
		"github.com/bsm/redislock":         "bsm/redislock",
		"github.com/redis/go-redis/v9":     "go-redis",
		"github.com/cenkalti/backoff/v4":   "backoff",
	}
	var parts []string
	for _, d := range bi.Deps {
		name, ok := want[d.Path]
		if !ok {
			continue
		}
		v := d.Version
		if d.Replace != nil {
			v = "working tree (" + d.Replace.Path + ")"
		}
		parts = append(parts, name+" "+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
