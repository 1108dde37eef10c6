package redlock

import (
	"context"
	"embed"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/redisconn"
)

//go:embed scripts/*.lua
var luaFiles embed.FS

// lua joins the sources of scripts/NAME.lua for names, in order: Lua
// scripts cannot include each other, so shared heads go in front.
func lua(names ...string) string {
	var b strings.Builder
	for _, n := range names {
		src, err := luaFiles.ReadFile("scripts/" + n + ".lua")
		if err != nil {
			panic(err) // a name without its file: caught by every test
		}
		b.Write(src)
	}
	return b.String()
}

var (
	releaseScript = newScript("release_fast", "quarantine", "queue", "release")
	joinScript    = newScript("quarantine", "queue", "join")
	extendScript  = newScript("extend")
	acquireScript = voteScript("acquire")
	vouchScript   = newScript("vouch")
	fenceScript   = voteScript("fence")
	probeScript   = newScript("probe")

	multiAcquireScript = voteScript("multi_acquire")
	multiExtendScript  = newScript("multi_extend")
	multiReleaseScript = newScript("multi_release")
	multiFenceScript   = voteScript("multi_fence")

	semAcquireScript = voteScript("sem_acquire")
	semExtendScript  = newScript("sem_extend")
	semReleaseScript = newScript("sem_release")

	rwReadScript        = voteScript("rw", "rw_rlock")
	rwReadExtendScript  = newScript("rw", "rw_rextend")
	rwReadReleaseScript = newScript("rw", "rw_runlock")
	rwWriteScript       = voteScript("rw", "rw_lock")
)

// scriptSource maps each script's SHA1 to its source, to re-send an EVALSHA
// a node did not know as EVAL.
var scriptSource = map[string]string{}

func newScript(names ...string) *redis.Script {
	src := lua(names...)
	s := redis.NewScript(src)
	scriptSource[s.Hash()] = src
	return s
}

// voteScript is newScript with, in front, the head of the scripts that let a
// node vote: the fence counters, the restart quarantine and the token rule.
func voteScript(names ...string) *redis.Script {
	return newScript(append([]string{"counter", "quarantine", "token"}, names...)...)
}

// evalsha is script s's command over ks, then args.
func evalsha(s *redis.Script, ks []string, args ...any) []any {
	a := append(make([]any, 0, 3+len(ks)+len(args)), "evalsha", s.Hash(), len(ks))
	for _, k := range ks {
		a = append(a, k)
	}
	return append(a, args...)
}

// runScript runs s on c, as EVALSHA, and as EVAL if the node did not know it.
func runScript(ctx context.Context, c redisconn.Conn, s *redis.Script, keys []string, args ...any) *redis.Cmd {
	cmd := redis.NewCmd(ctx, evalsha(s, keys, args...)...)
	_ = c.Process(ctx, cmd)
	retryScript(ctx, c, cmd)
	return cmd
}
