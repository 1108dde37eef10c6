package redistest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// ReconnectingProxy forwards TCP connections to backend and, unlike a plain
// TCP proxy, keeps a client's connection open when the backend's closes
// (a restart): the client's next bytes go to a new connection to backend.
// It models a Redis-aware proxy or load balancer whose client connections
// outlive the server behind it. It returns the proxy's address; it stops
// when the test ends.
func ReconnectingProxy(t testing.TB, backend string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: proxy listen: %v", err)
	}
	p := &proxy{backend: backend, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.accept(ln)
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		p.closed = true
		for c := range p.conns {
			_ = c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return ln.Addr().String()
}

type proxy struct {
	backend string
	wg      sync.WaitGroup
	mu      sync.Mutex
	closed  bool
	conns   map[net.Conn]bool // every open connection, to close at the end
}

func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	p.conns[c] = true
	return true
}

func (p *proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

func (p *proxy) accept(ln net.Listener) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve copies c's bytes to the current backend connection, dialing a new
// one whenever there is none or a write to it fails, and copies every
// backend connection's bytes back to c.
func (p *proxy) serve(c net.Conn) {
	defer p.wg.Done()
	defer p.untrack(c)
	var be net.Conn
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			for try := 0; try < 2; try++ {
				if be == nil {
					if be = p.dial(c); be == nil {
						return
					}
				}
				if _, werr := be.Write(buf[:n]); werr == nil {
					break
				}
				p.untrack(be)
				be = nil
			}
		}
		if err != nil {
			if be != nil {
				p.untrack(be)
			}
			return
		}
	}
}

// dial opens a backend connection and starts copying its replies to c.
func (p *proxy) dial(c net.Conn) net.Conn {
	be, err := net.Dial("tcp", p.backend)
	if err != nil || !p.track(be) {
		return nil
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		_, _ = io.Copy(c, be) // until the backend closes: the client's next bytes dial anew
		p.untrack(be)
	}()
	return be
}
