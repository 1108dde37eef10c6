package ratelimit

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed gcra.lua
	gcraSrc string
	//go:embed fixed.lua
	fixedSrc string
	//go:embed sliding.lua
	slidingSrc string
	//go:embed reset.lua
	resetSrc string

	gcraScript    = redis.NewScript(gcraSrc)
	fixedScript   = redis.NewScript(fixedSrc)
	slidingScript = redis.NewScript(slidingSrc)
	resetScript   = redis.NewScript(resetSrc)
)
