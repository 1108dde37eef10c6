package core

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed scripts/release.lua
	releaseSrc string
	//go:embed scripts/extend.lua
	extendSrc string

	// quarantineSrc is the shared head of the acquire scripts: the restart
	// quarantine and the clock floor (Lua scripts cannot include each other).
	//go:embed scripts/quarantine.lua
	quarantineSrc string
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

	acquireSrc      = quarantineSrc + acquireBody
	multiAcquireSrc = quarantineSrc + multiAcquireBody
	semAcquireSrc   = quarantineSrc + semAcquireBody

	releaseScript = redis.NewScript(releaseSrc)
	extendScript  = redis.NewScript(extendSrc)
	acquireScript = redis.NewScript(acquireSrc)
	vouchScript   = redis.NewScript(vouchSrc)
	fenceScript   = redis.NewScript(fenceSrc)
	probeScript   = redis.NewScript(probeSrc)

	multiAcquireScript = redis.NewScript(multiAcquireSrc)
	multiExtendScript  = redis.NewScript(multiExtendSrc)
	multiReleaseScript = redis.NewScript(multiReleaseSrc)
	multiFenceScript   = redis.NewScript(multiFenceSrc)

	semAcquireScript = redis.NewScript(semAcquireSrc)
	semExtendScript  = redis.NewScript(semExtendSrc)
	semReleaseScript = redis.NewScript(semReleaseSrc)
)

// scriptSource maps each script's SHA1 to its source, to re-send an EVALSHA
// a node did not know as EVAL.
var scriptSource = map[string]string{
	releaseScript.Hash(): releaseSrc,
	extendScript.Hash():  extendSrc,
	acquireScript.Hash(): acquireSrc,
	vouchScript.Hash():   vouchSrc,
	fenceScript.Hash():   fenceSrc,
	probeScript.Hash():   probeSrc,

	multiAcquireScript.Hash(): multiAcquireSrc,
	multiExtendScript.Hash():  multiExtendSrc,
	multiReleaseScript.Hash(): multiReleaseSrc,
	multiFenceScript.Hash():   multiFenceSrc,

	semAcquireScript.Hash(): semAcquireSrc,
	semExtendScript.Hash():  semExtendSrc,
	semReleaseScript.Hash(): semReleaseSrc,
}
