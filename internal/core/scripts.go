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

	//go:embed scripts/acquire.lua
	acquireSrc string
	//go:embed scripts/vouch.lua
	vouchSrc string
	//go:embed scripts/fence.lua
	fenceSrc string
	//go:embed scripts/probe.lua
	probeSrc string

	releaseScript = redis.NewScript(releaseSrc)
	extendScript  = redis.NewScript(extendSrc)
	acquireScript = redis.NewScript(acquireSrc)
	vouchScript   = redis.NewScript(vouchSrc)
	fenceScript   = redis.NewScript(fenceSrc)
	probeScript   = redis.NewScript(probeSrc)
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
}
