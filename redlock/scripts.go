package redlock

import (
	"context"
	_ "embed"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/redisconn"
)

var (
	//go:embed scripts/release_fast.lua
	releaseFast string
	//go:embed scripts/release.lua
	releaseBody string
	// queueSrc is the shared head of the scripts that keep a key's queue of
	// waiters (join.lua, release.lua), put after quarantine.lua.
	//go:embed scripts/queue.lua
	queueSrc string
	//go:embed scripts/join.lua
	joinBody string
	//go:embed scripts/extend.lua
	extendSrc string

	// counterSrc is the shared head of the scripts that read or write fence
	// counters (Lua scripts cannot include each other).
	//go:embed scripts/counter.lua
	counterSrc string
	// quarantineSrc is the restart quarantine, in front of every script
	// that lets a node vote; tokenSrc the token rule of fencing and the
	// acquires' replies. acquireHead puts both, after counterSrc, in front
	// of each acquire script.
	//go:embed scripts/quarantine.lua
	quarantineSrc string
	//go:embed scripts/token.lua
	tokenSrc string
	//go:embed scripts/acquire.lua
	acquireBody string
	//go:embed scripts/vouch.lua
	vouchSrc string
	//go:embed scripts/fence.lua
	fenceSrc string
	//go:embed scripts/probe.lua
	probeSrc string

	//go:embed scripts/multi_acquire.lua
	multiAcquireBody string
	//go:embed scripts/multi_extend.lua
	multiExtendSrc string
	//go:embed scripts/multi_release.lua
	multiReleaseSrc string
	//go:embed scripts/multi_fence.lua
	multiFenceSrc string

	//go:embed scripts/sem_acquire.lua
	semAcquireBody string
	//go:embed scripts/sem_extend.lua
	semExtendSrc string
	//go:embed scripts/sem_release.lua
	semReleaseSrc string

	// rwSrc is the shared head of the read-write lock's scripts.
	//go:embed scripts/rw.lua
	rwSrc string
	//go:embed scripts/rw_rlock.lua
	rwReadBody string
	//go:embed scripts/rw_rextend.lua
	rwReadExtendBody string
	//go:embed scripts/rw_runlock.lua
	rwReadReleaseBody string
	//go:embed scripts/rw_lock.lua
	rwWriteBody string

	acquireHead = counterSrc + quarantineSrc + tokenSrc

	releaseScript = newScript(releaseFast + quarantineSrc + queueSrc + releaseBody)
	joinScript    = newScript(quarantineSrc + queueSrc + joinBody)
	extendScript  = newScript(extendSrc)
	acquireScript = newScript(acquireHead + acquireBody)
	vouchScript   = newScript(vouchSrc)
	fenceScript   = newScript(acquireHead + fenceSrc)
	probeScript   = newScript(probeSrc)

	multiAcquireScript = newScript(acquireHead + multiAcquireBody)
	multiExtendScript  = newScript(multiExtendSrc)
	multiReleaseScript = newScript(multiReleaseSrc)
	multiFenceScript   = newScript(acquireHead + multiFenceSrc)

	semAcquireScript = newScript(acquireHead + semAcquireBody)
	semExtendScript  = newScript(semExtendSrc)
	semReleaseScript = newScript(semReleaseSrc)

	rwReadScript        = newScript(acquireHead + rwSrc + rwReadBody)
	rwReadExtendScript  = newScript(rwSrc + rwReadExtendBody)
	rwReadReleaseScript = newScript(rwSrc + rwReadReleaseBody)
	rwWriteScript       = newScript(acquireHead + rwSrc + rwWriteBody)
)

// scriptSource maps each script's SHA1 to its source, to re-send an EVALSHA
// a node did not know as EVAL. newScript fills it.
var scriptSource = map[string]string{}

// newScript returns the script of src and records src in scriptSource.
func newScript(src string) *redis.Script {
	s := redis.NewScript(src)
	scriptSource[s.Hash()] = src
	return s
}

// runScript runs s with keys and args on c, as EVALSHA, and as EVAL when
// the node did not know the script.
func runScript(ctx context.Context, c redisconn.Conn, s *redis.Script, keys []string, args ...any) *redis.Cmd {
	a := make([]any, 0, 3+len(keys)+len(args))
	a = append(a, "evalsha", s.Hash(), len(keys))
	for _, k := range keys {
		a = append(a, k)
	}
	a = append(a, args...)
	cmd := redis.NewCmd(ctx, a...)
	_ = c.Process(ctx, cmd)
	retryScript(ctx, c, cmd)
	return cmd
}
