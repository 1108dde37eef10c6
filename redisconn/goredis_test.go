package redisconn_test

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/redfence/redfence/redisconn"
)

func TestGoRedisNilClient(t *testing.T) {
	if c := redisconn.GoRedis(nil); c != nil {
		t.Fatalf("GoRedis(nil) = %v, want nil", c)
	}
	var typed *redis.Client
	if c := redisconn.GoRedis(typed); c != nil {
		t.Fatalf("GoRedis((*redis.Client)(nil)) = %v, want nil", c)
	}
}

func TestGoRedisInfo(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", PoolSize: 8, ContextTimeoutEnabled: true})
	defer rdb.Close()
	info := redisconn.GoRedis(rdb).Info()
	if info.Addr != "127.0.0.1:1" || info.Topology != redisconn.Standalone || info.Lanes != 4 || !info.HonorsContext || !info.PubSub {
		t.Fatalf("Info = %+v", info)
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
