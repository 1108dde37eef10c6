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

	//go:embed scripts/acquire_fenced_single.lua
	acquireFencedSingleSrc string
	//go:embed scripts/acquire_fenced.lua
	acquireFencedSrc string
	//go:embed scripts/fence.lua
	fenceSrc string

	releaseScript             = redis.NewScript(releaseSrc)
	extendScript              = redis.NewScript(extendSrc)
	acquireFencedSingleScript = redis.NewScript(acquireFencedSingleSrc)
	acquireFencedScript       = redis.NewScript(acquireFencedSrc)
	fenceScript               = redis.NewScript(fenceSrc)
)
