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

	releaseScript = redis.NewScript(releaseSrc)
	extendScript  = redis.NewScript(extendSrc)
)
