package rfrueidis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/redfence/redfence/redisconn"
)

// conn is the engine's connection (redisconn.Conn) over a rueidis client. The
// engine's commands arrive as go-redis commands (*redis.Cmd, its carrier
// for arguments and replies); conn sends their arguments through rueidis
// and leaves each reply in its command as go-redis would have decoded it.
type conn struct {
	c    rueidis.Client
	info redisconn.Info
	// pin, when set, is a key whose slot the commands without keys (WAIT)
	// are sent to: the Conn of a Cluster shard (Shard).
	pin string
}

// newConn returns the connection of client.
func newConn(client rueidis.Client) *conn {
	info := redisconn.Info{HonorsContext: true, PubSub: true, Identity: client}
	switch client.Mode() {
	case rueidis.ClientModeCluster:
		info.Topology = redisconn.Cluster
		info.Addr = addrs(client)
	case rueidis.ClientModeStandalone:
		info.Addr = addrs(client)
	}
	// A Sentinel client's primary changes with failovers: its address says
	// nothing of identity ("" like go-redis's failover client).
	return &conn{c: client, info: info}
}

// addrs returns the sorted addresses of the nodes client knows, joined by
// commas.
func addrs(client rueidis.Client) string {
	var a []string
	for addr := range client.Nodes() {
		a = append(a, addr)
	}
	slices.Sort(a)
	return strings.Join(a, ",")
}

func (c *conn) Info() redisconn.Info { return c.info }

func (c *conn) Process(ctx context.Context, cmd *redis.Cmd) error {
	r := c.c.Do(ctx, c.build(cmd.Args()))
	for i := 0; i < staleResends && stale(ctx, r.Error()); i++ {
		r = c.c.Do(ctx, c.build(cmd.Args()))
	}
	fill(cmd, r)
	return cmd.Err()
}

func (c *conn) Pipeline(ctx context.Context, cmds []*redis.Cmd) {
	rs := c.c.DoMulti(ctx, c.buildAll(cmds)...)
	for i := 0; i < staleResends && len(rs) > 0 && stale(ctx, rs[0].Error()); i++ {
		rs = c.c.DoMulti(ctx, c.buildAll(cmds)...)
	}
	for i, r := range rs {
		fill(cmds[i], r)
	}
}

// buildAll builds every command of cmds (a rueidis command is used once).
func (c *conn) buildAll(cmds []*redis.Cmd) rueidis.Commands {
	built := make(rueidis.Commands, len(cmds))
	for i, cmd := range cmds {
		built[i] = c.build(cmd.Args())
	}
	return built
}

// staleResends bounds the resends of a command that met a stale
// connection: rueidis keeps several connections per node (4 by default,
// PipelineMultiplex), each of which the restart closed.
const staleResends = 8

// stale reports an error of a connection that the server had closed: a
// rueidis connection reads only while it waits for replies, so the first
// command after a server restarted finds the old connection closed (EOF or
// a reset), where go-redis checks a pooled connection before using it.
// Process and Pipeline send such a command again (at most staleResends
// times, within ctx), on the new connection rueidis makes. Every command the engine sends may run twice:
// an acquire repeated with the same owner value is either refused (plain
// SET NX: a lost vote, and the engine releases a failed acquire
// everywhere) or granted to that same owner again (the scripts' "repeated
// request", with the token it was given), never to a second holder, and
// the key's TTL then runs from the repeat, after the start of the round
// from which the engine computes validity; extends, releases and the
// fence's acknowledgement of one token are idempotent; the rest are reads
// or WAIT.
func stale(ctx context.Context, err error) bool {
	return err != nil && ctx.Err() == nil &&
		(errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE))
}

// Tx sends MULTI, cmds and EXEC in one round trip, on one connection, and
// hands EXEC's replies to cmds. Over a Cluster every command goes to the
// slot of the first one's key.
func (c *conn) Tx(ctx context.Context, cmds []*redis.Cmd) error {
	pin := c.pin
	if c.info.Topology == redisconn.Cluster && pin == "" && len(cmds) > 0 {
		if k := firstKey(cmds[0].Args()); k != "" {
			pin = k
		}
	}
	v := &conn{c: c.c, info: c.info, pin: pin}
	built := make(rueidis.Commands, 0, len(cmds)+2)
	built = append(built, v.build([]any{"multi"}))
	for _, cmd := range cmds {
		built = append(built, v.build(cmd.Args()))
	}
	built = append(built, v.build([]any{"exec"}))
	rs := c.c.DoMulti(ctx, built...)
	exec := rs[len(rs)-1]
	replies, err := exec.ToArray()
	if err == nil && len(replies) != len(cmds) {
		err = fmt.Errorf("redfence: EXEC returned %d replies for %d commands", len(replies), len(cmds))
	}
	if err != nil {
		// A command refused while queued aborts the transaction: its own
		// error says why.
		for i, cmd := range cmds {
			if qerr := rs[i+1].Error(); qerr != nil {
				err = qerr
			}
			cmd.SetErr(convertErr(err))
		}
		return convertErr(err)
	}
	var first error
	for i, cmd := range cmds {
		setReply(cmd, &replies[i])
		if first == nil && cmd.Err() != nil {
			first = cmd.Err()
		}
	}
	return first
}

func (c *conn) Subscribe(context.Context) redisconn.PubSub { return newPubSub(c.c) }

// Shard returns, over a Cluster, a connection whose commands without keys
// go to the slot of key, so that a WAIT follows the writes to that slot's
// primary on the same connection.
func (c *conn) Shard(_ context.Context, key string) (redisconn.Conn, error) {
	if c.info.Topology != redisconn.Cluster {
		return c, nil
	}
	return &conn{c: c.c, info: redisconn.Info{Topology: redisconn.Cluster, HonorsContext: true, Identity: shardID{c.c, hashTag(key)}}, pin: key}, nil
}

// hashTag returns the part of key that Redis Cluster hashes: its hash tag
// when it has one, else the key. Keys with one hash tag share a slot.
func hashTag(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}

// shardID identifies the Conn of one slot of a Cluster client: the batches
// of keys in one slot share a connection (Shard).
type shardID struct {
	c   rueidis.Client
	tag string
}

// EachPrimary calls fn for every primary the client knows: over a Cluster,
// each node whose ROLE is master, in parallel.
func (c *conn) EachPrimary(ctx context.Context, fn func(context.Context, redisconn.Conn) error) error {
	if c.info.Topology != redisconn.Cluster {
		return fn(ctx, c)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for addr, node := range c.c.Nodes() {
		wg.Go(func() {
			role, err := node.Do(ctx, node.B().Role().Build()).ToArray()
			if err == nil && len(role) > 0 {
				var r string
				if r, err = role[0].ToString(); err == nil && r != "master" {
					return
				}
			}
			if err == nil {
				err = fn(ctx, &conn{c: node, info: redisconn.Info{Addr: addr, HonorsContext: true, PubSub: true, Identity: node}})
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", addr, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// Lane returns nil: rueidis's dedicated connections (Dedicate) dial and
// handshake without a context, so a hung node would hold a round past its
// deadline. Over rueidis the engine sends on the client itself and checks
// the restart quarantine on every acquire (docs/design.md, Restart
// quarantine).
func (c *conn) Lane() redisconn.Lane { return nil }

// Refresh is a no-op: rueidis follows MOVED and ASK and refreshes its slot
// map itself.
func (c *conn) Refresh(context.Context) {}

// build turns go-redis command arguments into a rueidis command, naming its
// keys so that a Cluster client routes it by their slot.
func (c *conn) build(args []any) rueidis.Completed {
	s := strs(args)
	name := strings.ToLower(s[0])
	b := c.c.B()
	var cmd rueidis.Completed
	switch first, n := keys(name, s); {
	case n > 0:
		cmd = b.Arbitrary(s[:first]...).Keys(s[first : first+n]...).Args(s[first+n:]...).Build()
	case name == "wait":
		cmd = b.Arbitrary(s...).Blocking() // on a connection of its own with the writes before it
	default:
		cmd = b.Arbitrary(s...).Build()
	}
	if c.pin != "" && c.info.Topology == redisconn.Cluster {
		cmd = cmd.SetSlot(c.pin)
	}
	return cmd
}

// keys says where the keys of the engine's commands are: from index first,
// n of them (n = 0: none).
func keys(name string, s []string) (first, n int) {
	switch name {
	case "eval", "evalsha":
		if len(s) > 2 {
			if k, err := strconv.Atoi(s[2]); err == nil && k >= 0 && 3+k <= len(s) {
				return 3, k
			}
		}
	case "set", "get", "del", "pttl", "hget", "hmget", "hset", "exists", "pexpire":
		if len(s) > 1 {
			return 1, 1
		}
	}
	return 0, 0
}

// firstKey returns the first key of a command, or "".
func firstKey(args []any) string {
	s := strs(args)
	if first, n := keys(strings.ToLower(s[0]), s); n > 0 {
		return s[first]
	}
	return ""
}

// strs formats every argument as go-redis writes it.
func strs(args []any) []string {
	s := make([]string, len(args))
	for i, a := range args {
		s[i] = str(a)
	}
	return s
}

// str formats one argument as go-redis writes it.
func str(a any) string {
	switch v := a.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case uint64:
		return strconv.FormatUint(v, 10)
	case int32:
		return strconv.FormatInt(int64(v), 10)
	case uint32:
		return strconv.FormatUint(uint64(v), 10)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case bool:
		if v {
			return "1"
		}
		return "0"
	case time.Duration:
		return strconv.FormatInt(v.Nanoseconds(), 10)
	case nil:
		return ""
	case fmt.Stringer:
		return v.String()
	}
	return fmt.Sprint(a)
}
