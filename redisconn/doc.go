// Package redisconn is the seam between the locks of package redlock and a
// Redis client: Conn is one node (one Redis deployment behind one client).
// GoRedis adapts a go-redis client; module github.com/redfence/redfence/rfrueidis
// adapts a rueidis client. Applications pass their clients to redlock.New or
// to an adapter and never use this package directly.
package redisconn
