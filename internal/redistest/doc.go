// Package redistest provides test helpers that run real redis-server nodes
// (via package redisnode) and go-redis clients for them, all closed
// automatically when the test ends.
//
// A missing redis-server binary is a test failure, never a skip: run
// scripts/ensure-redis.sh or set REDFENCE_REDIS_SERVER.
package redistest
