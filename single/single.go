package single

import (
	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/redlock"
)

// New returns a Client over one Redis deployment: a server, a
// Sentinel-managed primary (redis.NewFailoverClient) or a Cluster. It is
// redlock.New over the one client: the restart quarantine is off unless
// WithQuarantine turns it on, and WithReplicaAcks applies. It returns a
// *redlock.ConfigError for a nil client, an invalid option, or a Redis
// that refuses scripts.
func New(client redis.UniversalClient, opts ...redlock.Option) (*redlock.Client, error) {
	return redlock.New([]redis.UniversalClient{client}, opts...)
}
