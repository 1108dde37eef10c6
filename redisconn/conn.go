package redisconn

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// Conn is how a lock reaches one node: one Redis deployment behind one
// client. Every command is a *redis.Cmd, go-redis's generic command (its
// arguments, and the reply or error left in it), whichever client carries
// it: a reply is nil (as the error redis.Nil), an int64, a string, a []any
// or a map[any]any, as go-redis decodes them, and a server's error reply is
// a redis.Error. GoRedis wraps a go-redis client; the module
// github.com/redfence/redfence/rfrueidis wraps a rueidis client.
type Conn interface {
	// Process sends cmd and leaves its reply or error in it, and returns the error.
	Process(ctx context.Context, cmd *redis.Cmd) error
	// Pipeline sends cmds in one round trip per server: those that reach one
	// server go out on one connection, in order, so a WAIT after writes
	// counts them. Each reply or error is left in its command.
	Pipeline(ctx context.Context, cmds []*redis.Cmd)
	// Tx sends cmds as one MULTI/EXEC transaction, leaving each reply or
	// error in its command, and returns the first error.
	Tx(ctx context.Context, cmds []*redis.Cmd) error
	// Subscribe returns a new pub/sub connection with no channel yet (it
	// connects on first use); only called when Info().PubSub is set.
	Subscribe(ctx context.Context) PubSub
	// Shard returns the Conn of the primary that owns key (for a Cluster,
	// so that a WAIT reaches the connection that wrote), else the Conn itself.
	Shard(ctx context.Context, key string) (Conn, error)
	// EachPrimary calls fn with the Conn of every primary (a Cluster's
	// shards, possibly in parallel; else the Conn itself), returning the first error.
	EachPrimary(ctx context.Context, fn func(ctx context.Context, c Conn) error) error
	// Refresh reloads a Cluster's slot map after a MOVED or ASK reply (else a no-op).
	Refresh(ctx context.Context)
	// Lane returns a new Lane, one connection of the client's held for the
	// engine alone until its Close; nil when Info().Lanes is 0 (a Cluster, a
	// Ring): the engine then sends on the Conn itself.
	Lane() Lane
	// Info describes the client.
	Info() Info
}

// Lane is one connection of a client, held by one of the engine's senders
// (batch.go). It never reconnects by itself: after a connection error it
// keeps failing, and the engine closes it and takes a new one. A restarted
// server therefore never answers on a Lane that had reached it before the
// restart, which is what lets a Lane carry the restart quarantine's proof
// (docs/design.md, Restart quarantine).
type Lane interface {
	// Process and Pipeline are Conn's, on the Lane's one connection.
	Process(ctx context.Context, cmd *redis.Cmd) error
	Pipeline(ctx context.Context, cmds []*redis.Cmd)
	// Close gives the connection back to the client.
	Close()
}

// Topology is the kind of deployment a Conn reaches.
type Topology int

const (
	// Standalone is one server, or a Sentinel-managed primary.
	Standalone Topology = iota
	// Cluster is a Redis Cluster: keys are placed by slot.
	Cluster
	// Ring is a client-side shard set: keys are placed by hash tag.
	Ring
)

// Info is what the engine needs to know of a Conn's client.
type Info struct {
	// Addr is the configured address (a Cluster's or Ring's: sorted, joined
	// by commas), or "" when the client cannot tell (a Sentinel client).
	Addr string
	// Topology is the kind of deployment.
	Topology Topology
	// HonorsContext says that a command ends at its context's deadline.
	HonorsContext bool
	// ReadTimeout is the client's own bound on a reply (0: none), which
	// ends a read before the context's deadline when shorter.
	ReadTimeout time.Duration
	// PubSub says that Subscribe reaches where a key's release notices are
	// published: not for a Ring, whose shard is chosen by the channel's
	// name rather than the key's hash tag (its waiters poll).
	PubSub bool
	// Retries describes the client's retries that can outlast a per-node
	// timeout, or "" (clientRetries).
	Retries string
	// Lanes is how many Lanes the engine may hold at once, 0 for none.
	Lanes int
	// Client is the go-redis client behind the Conn, nil for another client.
	Client redis.UniversalClient
	// Identity is comparable and equal for two Conns over the same client
	// value: New refuses the same client twice.
	Identity any
}

// PubSub is one pub/sub connection. *redis.PubSub is one.
type PubSub interface {
	// Subscribe and Unsubscribe change the channel set; Receive returns the confirmations.
	Subscribe(ctx context.Context, channels ...string) error
	Unsubscribe(ctx context.Context, channels ...string) error
	// Receive waits for the next event: a *redis.Subscription (a
	// confirmation of subscribe or unsubscribe) or a *redis.Message. Its
	// error is a redis.Error when the server refused, and another error
	// when the connection broke: the next Receive reconnects and
	// subscribes to the channel set again.
	Receive(ctx context.Context) (any, error)
	// Close closes the connection; a Receive in progress returns.
	Close() error
}
