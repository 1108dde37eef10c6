package coord

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed claim_inspect.lua
	inspectSrc string
	//go:embed claim_done.lua
	doneSrc string
	//go:embed proclaim.lua
	proclaimSrc string
	//go:embed leader.lua
	leaderSrc string

	inspectScript  = redis.NewScript(inspectSrc)
	doneScript     = redis.NewScript(doneSrc)
	proclaimScript = redis.NewScript(proclaimSrc)
	leaderScript   = redis.NewScript(leaderSrc)
)
