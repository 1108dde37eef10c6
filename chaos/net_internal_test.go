package chaos

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLinkDrainSeesToxiproxyConnections pins the reflection drain relies
// on: if a toxiproxy upgrade renames or retypes the field, this fails
// rather than Close silently not waiting.
func TestLinkDrainSeesToxiproxyConnections(t *testing.T) {
	t.Parallel()
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(c, c)
				_ = c.Close()
			}()
		}
	}()
	t.Cleanup(func() {
		_ = echo.Close()
		wg.Wait()
	})

	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	l, err := newLink(srv, "drain", echo.Addr().String())
	require.NoError(t, err)
	n, ok := openToxicLinks(l.proxy)
	require.True(t, ok, "toxiproxy.ToxicCollection.links is readable")
	assert.Zero(t, n)

	conn, err := net.DialTimeout("tcp", l.Addr(), 2*time.Second)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(2*time.Second)))
	_, err = conn.Write([]byte("x"))
	require.NoError(t, err)
	_, err = io.ReadFull(conn, make([]byte, 1))
	require.NoError(t, err, "echoed through the proxy")
	n, ok = openToxicLinks(l.proxy)
	require.True(t, ok)
	assert.Equal(t, 2, n, "one toxic link per direction of the open connection")

	l.stop()
	require.NoError(t, l.drain(time.Now().Add(linkDrainTimeout)))
	n, _ = openToxicLinks(l.proxy)
	assert.Zero(t, n, "drained")
}

func TestStablePortRange(t *testing.T) {
	t.Parallel()
	lo, hi := stablePortRange()
	if lo == hi {
		t.Skip("no room outside the ephemeral port range on this machine")
	}
	assert.GreaterOrEqual(t, lo, 1024)
	assert.LessOrEqual(t, hi, 65536)
	p1, err := reserveStablePort()
	require.NoError(t, err)
	p2, err := reserveStablePort()
	require.NoError(t, err)
	defer releaseStablePort(p1)
	defer releaseStablePort(p2)
	assert.NotEqual(t, p1, p2, "a reserved port is not handed out twice")
	for _, p := range []int{p1, p2} {
		assert.True(t, p >= lo && p < hi, "port %d in [%d, %d)", p, lo, hi)
	}
}
