package ratelimit

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	// argsSrc parses the arguments every limiter script takes; it is put in
	// front of each.
	//go:embed args.lua
	argsSrc string
	//go:embed gcra.lua
	gcraSrc string
	//go:embed fixed.lua
	fixedSrc string
	//go:embed sliding.lua
	slidingSrc string
	//go:embed reset.lua
	resetSrc string

	gcraScript    = redis.NewScript(argsSrc + gcraSrc)
	fixedScript   = redis.NewScript(argsSrc + fixedSrc)
	slidingScript = redis.NewScript(argsSrc + slidingSrc)
	resetScript   = redis.NewScript(resetSrc)
)
