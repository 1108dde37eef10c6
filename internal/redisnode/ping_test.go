package redisnode_test

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redisnode"
)

// answerOnce listens on 127.0.0.1 and answers the first request line of
// one connection with reply.
func answerOnce(t *testing.T, reply string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		if _, err := bufio.NewReader(conn).ReadString('\n'); err == nil {
			_, _ = conn.Write([]byte(reply))
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
	})
	return ln.Addr().String()
}

// TestPing: +PONG and -NOAUTH mean the server serves; any other reply is
// ErrNotPong.
func TestPing(t *testing.T) {
	for reply, ready := range map[string]bool{
		"+PONG\r\n":                           true,
		"-NOAUTH Authentication required\r\n": true,
		"-LOADING Redis is loading\r\n":       false,
	} {
		err := redisnode.Ping(t.Context(), answerOnce(t, reply), time.Second)
		if ready {
			assert.NoError(t, err, reply)
		} else {
			assert.ErrorIs(t, err, redisnode.ErrNotPong, reply)
		}
	}
}
