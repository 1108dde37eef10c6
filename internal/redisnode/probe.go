package redisnode

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// probeTimeout bounds one readiness probe.
const probeTimeout = 250 * time.Millisecond

// errForeign means something other than the process being started answered
// on its address, e.g. another redis-server that won a race for the port.
var errForeign = errors.New("another process answers on this address")

// probe sends PING and INFO server over a raw RESP connection. It succeeds
// when PING answers +PONG (so the server is not still loading its data) and
// INFO reports the process id pid.
func probe(ctx context.Context, addr string, pid int) error {
	return withConn(ctx, addr, probeTimeout, func(conn net.Conn) error {
		if _, err := io.WriteString(conn, "*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n"); err != nil {
			return err
		}
		r := bufio.NewReader(conn)
		line, err := readLine(r)
		if err != nil {
			return err
		}
		if line != "+PONG" {
			return fmt.Errorf("PING answered %q", line)
		}
		info, err := readBulk(r)
		if err != nil {
			return fmt.Errorf("INFO server: %w", err)
		}
		for _, l := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), "process_id:"); ok {
				if v == strconv.Itoa(pid) {
					return nil
				}
				return fmt.Errorf("%w (pid %s, want %d)", errForeign, v, pid)
			}
		}
		return errors.New("INFO server has no process_id")
	})
}

func readLine(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r"), nil
}

// maxBulk caps the INFO reply size accepted from the server.
const maxBulk = 1 << 20

func readBulk(r *bufio.Reader) (string, error) {
	line, err := readLine(r)
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(line, "$") {
		return "", fmt.Errorf("unexpected reply %q", line)
	}
	size, err := strconv.Atoi(line[1:])
	if err != nil || size < 0 || size > maxBulk {
		return "", fmt.Errorf("bad bulk length %q", line)
	}
	buf := make([]byte, size+2)
	if _, err := io.ReadFull(r, buf); err != nil {
		return "", err
	}
	return string(buf[:size]), nil
}
