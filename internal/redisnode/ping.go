package redisnode

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// ErrNotPong is wrapped by Ping's error for a reply that shows the server
// is not ready yet (such as -LOADING).
var ErrNotPong = errors.New("unexpected reply")

// Ping sends one PING to addr over a raw connection, bounded by ctx and
// timeout, and succeeds on +PONG, or on -NOAUTH, which proves the server is
// up and serving. Only a reply counts: behind a port proxy such as
// Docker's a connect succeeds even when nothing listens behind it.
func Ping(ctx context.Context, addr string, timeout time.Duration) error {
	return withConn(ctx, addr, timeout, func(conn net.Conn) error {
		if _, err := io.WriteString(conn, "*1\r\n$4\r\nPING\r\n"); err != nil {
			return err
		}
		line, err := bufio.NewReader(conn).ReadSlice('\n')
		if err != nil {
			return err
		}
		line = bytes.TrimRight(line, "\r\n")
		if bytes.Equal(line, []byte("+PONG")) || bytes.HasPrefix(line, []byte("-NOAUTH")) {
			return nil
		}
		return fmt.Errorf("%w %q", ErrNotPong, line)
	})
}

// withConn runs f on a raw connection to addr, bounded by ctx and timeout:
// reads and writes fail once either ends.
func withConn(ctx context.Context, addr string, timeout time.Duration, f func(conn net.Conn) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	// Unblock reads and writes as soon as ctx is done, not only at its deadline.
	stopAfter := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stopAfter()
	if dl, ok := ctx.Deadline(); ok {
		if err := conn.SetDeadline(dl); err != nil {
			return err
		}
	}
	return f(conn)
}
