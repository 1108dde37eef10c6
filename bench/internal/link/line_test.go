//go:build linux

package link

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestLineHolds runs one direction of the wire between two packet sockets
// (no root needed): every packet comes out whole, in order, and no sooner
// than the delay after it went in.
func TestLineHolds(t *testing.T) {
	for _, delay := range []time.Duration{0, 2 * time.Millisecond} {
		t.Run(delay.String(), func(t *testing.T) {
			in := socketPair(t)  // test writes in[0], line reads in[1]
			out := socketPair(t) // line writes out[0], test reads out[1]
			l := newLine(in[1], out[0], delay, 1500)
			done := make(chan error, 1)
			go func() { done <- l.run() }()

			const n = 200
			sent := make([]int64, n)
			go func() {
				for i := range n {
					p := make([]byte, 16+i%1000)
					sent[i] = monoNow()
					binary.BigEndian.PutUint64(p, uint64(i))
					binary.BigEndian.PutUint64(p[8:], uint64(sent[i]))
					if _, err := unix.Write(in[0], p); err != nil {
						t.Errorf("write %d: %v", i, err)
						return
					}
				}
			}()
			buf := make([]byte, 2000)
			var minHold time.Duration = -1
			for i := range n {
				m, err := unix.Read(out[1], buf)
				arrived := monoNow()
				require.NoError(t, err)
				require.Equal(t, 16+i%1000, m, "packet %d: length", i)
				require.Equal(t, uint64(i), binary.BigEndian.Uint64(buf), "packets out of order")
				hold := time.Duration(arrived - int64(binary.BigEndian.Uint64(buf[8:])))
				if minHold < 0 || hold < minHold {
					minHold = hold
				}
			}
			assert.GreaterOrEqual(t, minHold, delay, "a packet came out sooner than the delay")
			require.NoError(t, unix.Shutdown(in[0], unix.SHUT_WR)) // end of file: the line stops
			require.NoError(t, <-done)
			d := l.direction()
			assert.Equal(t, uint64(n), d.Packets)
			assert.Zero(t, d.Dropped)
			assert.GreaterOrEqual(t, d.LateMax, d.LateP99)
			assert.GreaterOrEqual(t, d.LateP99, d.LateP50)
		})
	}
}

func socketPair(t *testing.T) [2]int {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = unix.Close(fds[0])
		_ = unix.Close(fds[1])
	})
	return fds
}

func TestLateHist(t *testing.T) {
	var h lateHist
	assert.Zero(t, h.quantile(0.5))
	for i := range 100 {
		h.add(time.Duration(i) * time.Microsecond)
	}
	h.add(-time.Microsecond) // counted as 0
	h.add(50 * time.Millisecond)
	assert.Equal(t, 51*time.Microsecond, h.quantile(0.5))
	assert.Equal(t, 50*time.Millisecond, h.quantile(1))
	assert.Equal(t, 50*time.Millisecond, time.Duration(h.max.Load()))
}
