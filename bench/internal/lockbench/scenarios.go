package lockbench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/redfence/redfence/redlock"
)

// Row labels, shared by scenarios, ratios and the smoke test.
const (
	NameRFRedlockQ0      = "redfence redlock, quarantine off"
	NameRFRedlockDefault = "redfence redlock, defaults (quarantine 60s)"
	NameRedsync5         = "redsync, 5 pools, defaults"
	NameRFSingle         = "redfence single, defaults"
	NameRFRedlockTel     = "redfence redlock, quarantine off, telemetry on (OTel SDK)"
	NameBSM              = "bsm/redislock, defaults"
	NameRedsync1         = "redsync, 1 pool, defaults"
	NameRFDefaultRetry   = "redfence redlock, defaults (retry 20ms x1.6 to 500ms)"
	NameRFTunedRetry     = "redfence redlock, retry 1-5ms"
	NameRSDefaultRetry   = "redsync, defaults (32 tries, 50-250ms)"
	NameRSTunedRetry     = "redsync, retry 1-5ms, 1M tries"
	NameRFWakeOff        = "redfence redlock, defaults, wake-up off"
	NameRFPerWorker      = "redfence redlock, defaults, one Client per worker"
	NameRFPerWorkerOff   = "redfence redlock, wake-up off, one Client per worker"
	NameRSPerWorker      = "redsync, defaults, one instance per worker"
	NameRFPerWorkerTuned = "redfence redlock, retry 1-5ms, one Client per worker"
	NameRSPerWorkerTuned = "redsync, retry 1-5ms, 1M tries, one instance per worker"
	NameUnfenced         = "redfence redlock, unfenced (defaults)"
	NameFenced           = "redfence redlock, fenced (defaults + WithFencing)"
	NameRFSingleNoAcks   = "redfence single, defaults, on a primary with a replica"
	NameRFSingleAcks     = "redfence single, WithReplicaAcks(1, 100ms)"
)

// shortNames label the ratio rows.
var shortNames = map[string]string{
	NameRFRedlockQ0:      "redfence q=off",
	NameRFRedlockDefault: "redfence defaults",
	NameRedsync5:         "redsync",
	NameRFSingle:         "redfence single",
	NameRFRedlockTel:     "redfence q=off+telemetry",
	NameBSM:              "bsm/redislock",
	NameRedsync1:         "redsync 1 pool",
	NameRFDefaultRetry:   "redfence default retry",
	NameRFTunedRetry:     "redfence 1-5ms",
	NameRSDefaultRetry:   "redsync default retry",
	NameRSTunedRetry:     "redsync 1-5ms",
	NameRFWakeOff:        "redfence wake-up off",
	NameRFPerWorker:      "redfence per-worker clients",
	NameRFPerWorkerOff:   "redfence per-worker, wake-up off",
	NameRSPerWorker:      "redsync per-worker clients",
	NameRFPerWorkerTuned: "redfence per-worker, 1-5ms",
	NameRSPerWorkerTuned: "redsync per-worker, 1-5ms",
	NameBound:            "no server",
	NameUnfenced:         "unfenced",
	NameFenced:           "fenced",
	NameRFSingleNoAcks:   "without acks",
	NameRFSingleAcks:     "with acks",
	NameRFRueidisQ0:      "redfence q=off over rueidis",
	NameRFRueidisQ0Pool:  "redfence q=off over rueidis, no auto-pipelining",
	NameRFRueidisSingle:  "redfence single over rueidis",
}

func short(name string) string {
	if s, ok := shortNames[name]; ok {
		return s
	}
	return name
}

func (b *runner) s1(ctx context.Context) (*Section, error) {
	libs := []lib{
		redfenceRedlock(NameRFRedlockQ0, false, redlock.WithQuarantine(0)),
		redfenceRedlock(NameRFRedlockDefault, true),
		redfenceRedlock(NameRFRedlockTel, false, append([]redlock.Option{redlock.WithQuarantine(0)}, telemetryOptions()...)...),
		redsyncLib(NameRedsync5),
		redfenceRueidis(NameRFRueidisQ0, false, true, redlock.WithQuarantine(0)),
		redfenceRueidis(NameRFRueidisQ0Pool, false, false, redlock.WithQuarantine(0)),
	}
	pairs := []pair{{NameRFRedlockQ0, NameRedsync5}, {NameRFRedlockDefault, NameRedsync5}, {NameRFRedlockTel, NameRFRedlockQ0},
		{NameRFRueidisQ0, NameRFRedlockQ0}, {NameRFRueidisQ0Pool, NameRFRueidisQ0}}
	return b.uncontended(ctx, "s1", "1. Uncontended lock+release, 5 nodes (Redlock)", libs, b.five, pairs)
}

func (b *runner) s2(ctx context.Context) (*Section, error) {
	libs := []lib{
		redfenceSingle(NameRFSingle),
		bsmLib(NameBSM),
		redsyncLib(NameRedsync1),
		redfenceRueidis(NameRFRueidisSingle, true, true),
	}
	pairs := []pair{{NameRFSingle, NameBSM}, {NameRFSingle, NameRedsync1}, {NameRFRueidisSingle, NameRFSingle}}
	return b.uncontended(ctx, "s2", "2. Uncontended lock+release, 1 node", libs, b.one, pairs)
}

func (b *runner) s4(ctx context.Context) (*Section, error) {
	libs := []lib{
		redfenceRedlock(NameUnfenced, true),
		redfenceRedlock(NameFenced, true, redlock.WithFencing()),
	}
	return b.uncontended(ctx, "s4", "4. Fenced vs unfenced redfence redlock, 5 nodes", libs, b.five, []pair{{NameFenced, NameUnfenced}})
}

func (b *runner) s7(ctx context.Context) (*Section, error) {
	libs := []lib{
		redfenceSingle(NameRFSingleNoAcks),
		redfenceSingle(NameRFSingleAcks, redlock.WithReplicaAcks(1, 100*time.Millisecond)),
	}
	return b.uncontended(ctx, "s7", "7. redfence single with and without replica acknowledgement, 1 primary + 1 replica", libs, b.replicated, []pair{{NameRFSingleAcks, NameRFSingleNoAcks}})
}

func (b *runner) s3(ctx context.Context) (*Section, error) {
	const lo, hi = time.Millisecond, 5 * time.Millisecond
	w := b.cfg.ContendedWorkers
	libs := []lib{
		rfCounted(NameRFDefaultRetry, true, nil),
		rfCounted(NameRFTunedRetry, true, redfenceJitter(lo, hi)),
		redsyncLib(NameRSDefaultRetry),
		rsCounted(NameRSTunedRetry, lo, hi),
		rfCounted(NameRFWakeOff, true, nil, redlock.WithWakeup(false)),
		rfCounted(NameRFRedlockQ0, false, nil, redlock.WithQuarantine(0)),
		perWorker(NameRFPerWorker, rfCounted("", true, nil), w, perWorkerPool),
		perWorker(NameRFPerWorkerTuned, rfCounted("", true, redfenceJitter(lo, hi)), w, perWorkerPool),
		perWorker(NameRFPerWorkerOff, rfCounted("", true, nil, redlock.WithWakeup(false)), w, perWorkerPool),
		perWorker(NameRSPerWorker, redsyncLib(""), w, perWorkerPool),
		perWorker(NameRSPerWorkerTuned, rsCounted("", lo, hi), w, perWorkerPool),
		boundLib(NameBound),
	}
	return b.contended(ctx, "s3", fmt.Sprintf("3. Contended: %d workers, one key, 5 nodes", w), w, libs,
		[]pair{{NameRFDefaultRetry, NameRSDefaultRetry}, {NameRFTunedRetry, NameRSTunedRetry}, {NameRFDefaultRetry, NameRSTunedRetry},
			{NameRFWakeOff, NameRSDefaultRetry}, {NameRFRedlockQ0, NameRSDefaultRetry}, {NameRFPerWorker, NameRSPerWorker}, {NameRFPerWorker, NameRFPerWorkerOff},
			{NameRFPerWorker, NameRSPerWorkerTuned}, {NameRFPerWorkerTuned, NameRSPerWorkerTuned}, {NameRFPerWorker, NameBound}, {NameRSPerWorkerTuned, NameBound}})
}

// s8 is scenario 3's rows of one Client per worker, with 64 workers: the
// hand-over across processes at a larger scale.
func (b *runner) s8(ctx context.Context) (*Section, error) {
	const lo, hi = time.Millisecond, 5 * time.Millisecond
	w := b.cfg.ManyClients
	libs := []lib{
		perWorker(NameRFPerWorker, rfCounted("", true, nil), w, perWorkerPool),
		perWorker(NameRSPerWorker, redsyncLib(""), w, perWorkerPool),
		perWorker(NameRSPerWorkerTuned, rsCounted("", lo, hi), w, perWorkerPool),
	}
	return b.contended(ctx, "s8", fmt.Sprintf("8. Contended across Clients: %d workers, one Client each, one key, 5 nodes", w), w, libs,
		[]pair{{NameRFPerWorker, NameRSPerWorker}, {NameRFPerWorker, NameRSPerWorkerTuned}})
}

// contended runs libs, w workers each, wanting one key on the five nodes,
// round after round, as section id.
func (b *runner) contended(ctx context.Context, id, title string, w int, libs []lib, pairs []pair) (*Section, error) {
	bl, closeAll, err := buildAll(ctx, libs, b.five, b.cfg.PoolSize)
	if err != nil {
		return nil, err
	}
	defer closeAll()
	lockersAt := func(i int, key string) ([]locker, error) {
		keys := make([]string, w)
		for k := range keys {
			keys[k] = key
		}
		return lockersFor(bl[i].impl, keys)
	}
	if b.cfg.Warmup > 0 {
		for i := range bl {
			ls, err := lockersAt(i, fmt.Sprintf("lb:%s:%d:warmup", id, i))
			if err != nil {
				return nil, err
			}
			runContended(ctx, ls, b.cfg.Warmup, b.cfg.Hold, b.cfg.WaitBound, &b.hs)
		}
	}
	res := make([][]contendedResult, len(bl))
	for r := 0; r < b.cfg.Rounds; r++ {
		for _, i := range order(len(bl), r) {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			// A fresh key per round: a lock left behind by one round
			// (redsync does not release on a cancelled context) cannot
			// block the next.
			ls, err := lockersAt(i, fmt.Sprintf("lb:%s:%d:r%d", id, i, r))
			if err != nil {
				return nil, err
			}
			before := retriesOf(bl[i].lib)
			cr := runContended(ctx, ls, b.cfg.Duration, b.cfg.Hold, b.cfg.WaitBound, &b.hs)
			cr.retries = retriesOf(bl[i].lib) - before
			b.progress("%s 5 nodes %d workers round %d/%d %-52s %7.1f grants/s wait p50 %-9s p99 %-9s max %-9s jain %.3f failures %d%s",
				id, w, r+1, b.cfg.Rounds, bl[i].name, cr.rate(), fmtDur(cr.p50), fmtDur(cr.p99), fmtDur(cr.max), jain(cr.perWorker), cr.failures, errNote(cr.err))
			res[i] = append(res[i], cr)
		}
	}
	sec := &Section{Title: title, Kind: kindContended, Pairs: pairs}
	for i, l := range bl {
		rs := res[i]
		var fails, rel, aband int
		var first error
		for _, c := range rs {
			fails += c.failures
			rel += c.releaseErrs
			aband += c.abandoned
			if first == nil {
				first = c.err
			}
		}
		rates := collect(rs, contendedResult.rate)
		p99s := collect(rs, func(c contendedResult) float64 { return float64(c.p99) })
		jains := collect(rs, func(c contendedResult) float64 { return jain(c.perWorker) })
		sec.Rows = append(sec.Rows, Row{
			Name: l.name, Peer: l.peer, Workers: w, Nodes: len(b.five),
			Rounds: map[string][]float64{mRate: rates, mP99: p99s, mJain: jains},
			M: map[string]float64{
				mRate:      median(rates),
				mP50:       median(collect(rs, func(c contendedResult) float64 { return float64(c.p50) })),
				mP99:       median(p99s),
				mMax:       median(collect(rs, func(c contendedResult) float64 { return float64(c.max) })),
				mMinGrants: median(collect(rs, func(c contendedResult) float64 { return float64(slices.Min(c.perWorker)) })),
				mMaxGrants: median(collect(rs, func(c contendedResult) float64 { return float64(slices.Max(c.perWorker)) })),
				mJain:      median(jains),
				mFailures:  float64(fails),
				mRelErrors: float64(rel),
				mSpread:    spread(rates),
				mHold:      median(collect(rs, func(c contendedResult) float64 { return float64(c.hold) })),
			},
			FirstErr: errString(first),
		})
		if l.retries != nil {
			sec.Rows[len(sec.Rows)-1].M[mRetries] = median(collect(rs, contendedResult.retriesPerGrant))
		}
	}
	return sec, nil
}

func (b *runner) s5(ctx context.Context) (*Section, error) {
	groups := []struct {
		addrs []string
		libs  []lib
	}{
		{b.five, []lib{redfenceRedlock(NameRFRedlockQ0, false, redlock.WithQuarantine(0)), redfenceRedlock(NameRFRedlockDefault, true), redsyncLib(NameRedsync5)}},
		{b.one, []lib{redfenceSingle(NameRFSingle), bsmLib(NameBSM), redsyncLib(NameRedsync1)}},
	}
	sec := &Section{Title: "5. Heap allocations per lock+release cycle (1 goroutine)", Kind: kindAllocs,
		Pairs: []pair{{NameRFRedlockQ0, NameRedsync5}, {NameRFRedlockDefault, NameRedsync5}, {NameRFSingle, NameBSM}, {NameRFSingle, NameRedsync1}}}
	for gi, g := range groups {
		bl, closeAll, err := buildAll(ctx, g.libs, g.addrs, b.cfg.PoolSize)
		if err != nil {
			return nil, err
		}
		err = func() error {
			defer closeAll()
			ls := make([]locker, len(bl))
			for i := range bl {
				l, err := bl[i].impl.newLocker(fmt.Sprintf("lb:s5:%d:%d", gi, i))
				if err != nil {
					return err
				}
				ls[i] = l
			}
			res := make([][]allocResult, len(bl))
			for r := 0; r < b.cfg.Rounds; r++ {
				for _, i := range order(len(bl), r) {
					if err := ctx.Err(); err != nil {
						return err
					}
					ar := runAllocs(ctx, ls[i], b.cfg.AllocCycles)
					b.progress("s5 %d nodes round %d/%d %-52s %7.1f allocs/cycle %8.0f B/cycle errors %d%s",
						len(g.addrs), r+1, b.cfg.Rounds, bl[i].name, ar.allocs, ar.bytes, ar.errors, errNote(ar.err))
					res[i] = append(res[i], ar)
				}
			}
			for i, l := range bl {
				errs := 0
				var first error
				for _, a := range res[i] {
					errs += a.errors
					if first == nil {
						first = a.err
					}
				}
				sec.Rows = append(sec.Rows, Row{
					Name: l.name, Peer: l.peer, Workers: 1, Nodes: len(g.addrs),
					M: map[string]float64{
						mAllocs: median(collect(res[i], func(a allocResult) float64 { return a.allocs })),
						mBytes:  median(collect(res[i], func(a allocResult) float64 { return a.bytes })),
						mErrors: float64(errs),
					},
					FirstErr: errString(first),
				})
			}
			return nil
		}()
		if err != nil {
			return nil, err
		}
	}
	return sec, nil
}
