package redlock

import (
	"fmt"

	"go.opentelemetry.io/otel/attribute"
)

// maxPermits caps a semaphore: a larger count is more likely a mistake.
const maxPermits = 1 << 16

// semQuorum is how many of n nodes must admit a holder of k permits: with
// q > n*k/(k+1), k+1 holders would need some node to admit k+1, which its
// script refuses (docs/shapes.md, Semaphore).
func semQuorum(n, k int) int { return n*k/(k+1) + 1 }

// NewSemaphore returns a Mutex whose leases are permits: at most permits
// (1 to 65536) are valid at once. A lease needs floor(N*permits/(permits+1))+1
// of the N nodes, so the semaphore tolerates fewer nodes down than the lock
// (docs/shapes.md, Semaphore, has the proof). It returns a *ConfigError as
// NewMutex does, for permits out of range, and with WithFencing. The key
// holds a sorted set: do not lock it with a Mutex too. Lock polls.
func (e *Client) NewSemaphore(key string, permits int, opts ...Option) (*Mutex, error) {
	switch {
	case permits < 1:
		return nil, &ConfigError{Pkg: e.pkg, Field: "permits", Msg: fmt.Sprintf("%d, want at least 1", permits)}
	case permits > maxPermits:
		return nil, &ConfigError{Pkg: e.pkg, Field: "permits", Msg: fmt.Sprintf("%d, more than the %d a semaphore takes", permits, maxPermits)}
	}
	m, err := e.NewMutex(key, opts...)
	if err != nil {
		return nil, err
	}
	if m.cfg.fenced {
		return nil, &ConfigError{Pkg: e.pkg, Field: "fencing", Msg: "a semaphore has no fencing tokens: several holders at once share no order (docs/shapes.md)"}
	}
	m.need = semQuorum(len(e.nodes), permits)
	m.spanAttrs = m.acquireSpanAttrs(attribute.Int("redfence.permits", permits))
	ttl, ks := m.cfg.ttl.Milliseconds(), []string{m.key}
	m.acquireTmpl = m.scriptTemplate(semAcquireScript, true, ks, ttl, permits, m.cfg.quarantine.Milliseconds())
	m.releaseTmpl = m.scriptTemplate(semReleaseScript, false, ks)
	m.extendTmpl = m.scriptTemplate(semExtendScript, false, ks, ttl)
	m.shape = &shape{decode: decodeAcquire}
	m.setProven(4) // sem_acquire.lua's ARGV[4]
	return m, nil
}
