package rfrueidis

import (
	"github.com/redis/rueidis"

	"github.com/redfence/redfence/internal/nilcheck"
	"github.com/redfence/redfence/redisconn"
	"github.com/redfence/redfence/redlock"
)

// New returns a Client over clients: redlock.New for rueidis clients, with
// its options, defaults (the restart quarantine on over several nodes, off
// over one) and checks. It returns a *redlock.ConfigError
// when clients is empty, holds a nil client, or holds the same client or
// address twice.
//
// The Client does not close the rueidis clients: close them after the
// Client.
func New(clients []rueidis.Client, opts ...redlock.Option) (*redlock.Client, error) {
	conns := make([]redisconn.Conn, len(clients))
	for i, c := range clients {
		if !nilcheck.IsNil(c) {
			conns[i] = newConn(c)
		}
	}
	return redlock.NewFromConns(conns, opts...)
}

// NewSingle returns a single-instance lock Client over one Redis deployment
// (a standalone server, a Sentinel-managed primary, or a Cluster): single.New
// for a rueidis client, which is New over the one client.
func NewSingle(client rueidis.Client, opts ...redlock.Option) (*redlock.Client, error) {
	return New([]rueidis.Client{client}, opts...)
}
