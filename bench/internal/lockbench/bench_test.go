package lockbench

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redfence/redfence/bench/internal/link"
	"github.com/redfence/redfence/bench/internal/rig"
	"github.com/redfence/redfence/redlock"
)

// The benchmarks share lazily started nodes, stopped by TestMain.
var (
	nodesOnce sync.Once
	benchFive []*rig.Node
	benchOne  []*rig.Node
	nodesErr  error
)

func TestMain(m *testing.M) {
	link.RunWireIfChild() // TestLinkSmoke's wire
	code := m.Run()
	_ = rig.CloseAll(benchFive)
	_ = rig.CloseAll(benchOne)
	os.Exit(code)
}

func benchNodes(b *testing.B) (five, one []string) {
	b.Helper()
	nodesOnce.Do(func() {
		ctx := context.Background()
		if benchFive, nodesErr = rig.StartN(ctx, redlockNodes); nodesErr != nil {
			return
		}
		benchOne, nodesErr = rig.StartN(ctx, singleNodes)
	})
	if nodesErr != nil {
		b.Fatal(nodesErr)
	}
	return addrs(benchFive), addrs(benchOne)
}

type benchCase struct {
	name string
	lib  lib
	five bool
}

func benchCases() []benchCase {
	return []benchCase{
		{"redfence-redlock-q0", redfenceRedlock(NameRFRedlockQ0, false, redlock.WithQuarantine(0)), true},
		{"redfence-redlock-default", redfenceRedlock(NameRFRedlockDefault, true), true},
		{"redfence-redlock-fenced", redfenceRedlock(NameFenced, true, redlock.WithFencing()), true},
		{"redsync-5", redsyncLib(NameRedsync5), true},
		{"redfence-single", redfenceSingle(NameRFSingle), false},
		{"bsm-redislock", bsmLib(NameBSM), false},
		{"redsync-1", redsyncLib(NameRedsync1), false},
	}
}

func buildCase(b *testing.B, c benchCase) impl {
	b.Helper()
	five, one := benchNodes(b)
	nodes := one
	if c.five {
		nodes = five
	}
	im, err := c.lib.build(context.Background(), nodes, DefaultConfig().PoolSize)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = im.close() })
	return im
}

func cycle(b *testing.B, ctx context.Context, l locker) {
	if err := l.lock(ctx); err != nil {
		b.Fatal(err)
	}
	if err := l.unlock(ctx); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkCycle is one goroutine locking and releasing its own key: use
// -benchmem for allocations per cycle.
func BenchmarkCycle(b *testing.B) {
	for _, c := range benchCases() {
		b.Run(c.name, func(b *testing.B) {
			im := buildCase(b, c)
			l, err := im.newLocker("lb:gobench:" + c.name)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			start := takeSched()
			for b.Loop() {
				cycle(b, ctx, l)
			}
			reportSched(b, start)
		})
	}
}

// BenchmarkCycleParallel is the same with 32 goroutines per GOMAXPROCS, each
// on its own key.
func BenchmarkCycleParallel(b *testing.B) {
	for _, c := range benchCases() {
		b.Run(c.name, func(b *testing.B) {
			im := buildCase(b, c)
			var n atomic.Int64
			ctx := context.Background()
			b.ReportAllocs()
			b.SetParallelism(32)
			b.RunParallel(func(pb *testing.PB) {
				l, err := im.newLocker(fmt.Sprintf("lb:gobench:par:%s:%d", c.name, n.Add(1)))
				if err != nil {
					b.Error(err)
					return
				}
				for pb.Next() {
					if err := l.lock(ctx); err != nil {
						b.Error(err)
						return
					}
					if err := l.unlock(ctx); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
