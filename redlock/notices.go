package redlock

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/internal/keys"
	"github.com/redfence/redfence/redisconn"
)

// grantChannel tells the grants of the full key k to the Client named id.
func grantChannel(k, id string) string { return keys.ReleasedPrefix + k + "#" + id }

const (
	subscriptionLinger = 250 * time.Millisecond // a channel is kept this long after its last waiter left
	deniedFor          = time.Minute            // a node that refused the queue or channel is left alone
	// reconnectMin and reconnectMax bound the pause before a broken
	// subscription connection is restored.
	reconnectMin = 50 * time.Millisecond
	reconnectMax = 2 * time.Second
)

// notices runs one Client's grant subscriptions: a PubSub and a goroutine
// per node while it has channels. Its mutex may take waiting's, never the
// other way round.
type notices struct {
	nodes []node
	log   *slog.Logger
	qs    *waiting // woken by confirmations and notices
	id    string   // the Client's name in its grant channels
	// life bounds the subscription goroutines: the one context kept in a
	// struct, for the Client's own background work.
	life context.Context
	end  context.CancelFunc
	wg   sync.WaitGroup

	mu     sync.Mutex // guards the fields below and every keySub and nodeSub; never held across I/O
	subs   map[string]*keySub
	ns     []*nodeSub // nil for a node whose client type has no usable pub/sub
	closed bool
}

func newNotices(nodes []node, log *slog.Logger, qs *waiting) *notices {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // never returns an error
	w := &notices{
		nodes: nodes, log: log, qs: qs, id: base64.RawURLEncoding.EncodeToString(b),
		subs: map[string]*keySub{},
		ns:   make([]*nodeSub, len(nodes)),
	}
	for i, n := range nodes {
		if n.conn != nil && n.conn.Info().PubSub { // otherwise (a Ring) its waiters poll
			w.ns[i] = &nodeSub{i: i, conn: n.conn, pending: map[string]struct{}{},
				linger: map[string]time.Time{}, kick: make(chan struct{}, 1)}
		}
	}
	w.life, w.end = context.WithCancel(context.Background())
	return w
}

type keySub struct {
	wanted bool      // the key has waiters, and its head found it held by another owner
	idle   time.Time // when wanted last became false
	sent   []bool    // per node: SUBSCRIBE sent (and no UNSUBSCRIBE since)
	conf   []bool    // per node: confirmed by the node
}

// nodeSub is one node's pub/sub connection, run by runNode; its fields but
// i, conn and kick are guarded by notices.mu.
type nodeSub struct {
	i           int
	conn        redisconn.Conn
	running     bool                 // runNode is running
	pending     map[string]struct{}  // keys whose wanted state changed
	linger      map[string]time.Time // unwanted but subscribed keys: when to unsubscribe
	active      int                  // keys with sent[i]
	deniedUntil time.Time
	kick        chan struct{} // buffered 1
}

func (w *notices) watch(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	s := w.subs[key]
	if s == nil {
		s = &keySub{sent: make([]bool, len(w.nodes)), conf: make([]bool, len(w.nodes))}
		w.subs[key] = s
	}
	s.wanted = true
	for i, n := range w.ns {
		if n != nil && !s.sent[i] {
			n.pending[key] = struct{}{}
			w.kick(n, true)
		}
	}
}

// unwant lets key's channel go (after the linger) once key has no waiters,
// counted again under w.mu: a Lock may have joined since.
func (w *notices) unwant(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.subs[key]
	if s == nil || !s.wanted || w.qs.waiting(key) > 0 {
		return
	}
	s.wanted, s.idle = false, time.Now()
	for i, n := range w.ns {
		if n != nil && s.sent[i] {
			n.pending[key] = struct{}{}
			w.kick(n, false)
		}
	}
	w.gc(key, s)
}

// gc forgets s when no node has it subscribed and nobody wants it (w.mu held).
func (w *notices) gc(key string, s *keySub) {
	if !s.wanted && !slices.Contains(s.sent, true) {
		delete(w.subs, key)
	}
}

// kick tells n's goroutine to look at its pending keys, starting it if start
// is set (w.mu held).
func (w *notices) kick(n *nodeSub, start bool) {
	if n.running {
		select {
		case n.kick <- struct{}{}:
		default:
		}
		return
	}
	if !start || w.closed || time.Now().Before(n.deniedUntil) {
		return
	}
	n.running = true
	w.wg.Add(1)
	go w.runNode(n)
}

func (w *notices) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.end()
	w.wg.Wait()
}

// runNode keeps node n's subscriptions in line with what waiters want, until
// no channel is left, the node refuses, or close; it owns the PubSub and its
// reader, and closes and joins both.
func (w *notices) runNode(n *nodeSub) {
	defer w.wg.Done()
	// Cancelled on close, and when runNode returns: ends a dial in progress, and tells the reader to stop.
	ctx, cancel := context.WithCancel(w.life)
	var (
		ps   redisconn.PubSub
		recv chan struct{} // closed when the reader returns
	)
	defer func() {
		cancel()
		if ps != nil {
			_ = ps.Close()
			<-recv
		}
	}()
	for {
		w.mu.Lock()
		sub, unsub, next, done := w.plan(n)
		w.mu.Unlock()
		if done {
			return
		}
		if ps == nil {
			ps = n.conn.Subscribe(ctx) // no channel yet: connects on first use
			recv = make(chan struct{})
			go w.receive(ctx, n, ps, recv)
		}
		// Errors need no handling: the receive loop reconnects and resubscribes.
		if len(sub) > 0 {
			_ = ps.Subscribe(ctx, sub...)
		}
		if len(unsub) > 0 {
			_ = ps.Unsubscribe(ctx, unsub...)
		}
		var lingerDone <-chan time.Time
		if next > 0 {
			lingerDone = time.After(next)
		}
		select {
		case <-n.kick:
		case <-ctx.Done():
		case <-lingerDone:
		}
	}
}

// plan returns n's next subscriptions and unsubscriptions and when a
// lingering channel is due; done: n has nothing left or must stop (w.mu held).
func (w *notices) plan(n *nodeSub) (sub, unsub []string, next time.Duration, done bool) {
	now := time.Now()
	if w.closed || now.Before(n.deniedUntil) {
		for key, s := range w.subs {
			s.sent[n.i], s.conf[n.i] = false, false
			w.gc(key, s)
		}
		clear(n.pending)
		clear(n.linger)
		n.active, n.running = 0, false
		return nil, nil, 0, true
	}
	for key := range n.pending {
		s := w.subs[key]
		switch {
		case s == nil:
		case s.wanted:
			delete(n.linger, key)
			if !s.sent[n.i] {
				s.sent[n.i] = true
				n.active++
				sub = append(sub, grantChannel(key, w.id))
			}
		case s.sent[n.i]:
			n.linger[key] = s.idle.Add(subscriptionLinger)
		}
	}
	clear(n.pending)
	for key, at := range n.linger {
		if left := at.Sub(now); left > 0 {
			if next == 0 || left < next {
				next = left
			}
			continue
		}
		delete(n.linger, key)
		s := w.subs[key]
		if s.wanted { // wanted again meanwhile: keep it
			continue
		}
		s.sent[n.i], s.conf[n.i] = false, false
		n.active--
		unsub = append(unsub, grantChannel(key, w.id))
		w.gc(key, s)
	}
	if n.active == 0 {
		n.running = false
		return nil, nil, 0, true
	}
	return sub, unsub, next, false
}

func (w *notices) receive(ctx context.Context, n *nodeSub, ps redisconn.PubSub, done chan<- struct{}) {
	defer close(done)
	delay := reconnectMin
	for {
		msg, err := ps.Receive(ctx)
		if err == nil {
			delay = reconnectMin
			switch m := msg.(type) {
			case *redis.Subscription:
				w.subscription(n.i, m)
			case *redis.Message:
				w.message(n.i, m)
			}
			continue
		}
		if ctx.Err() != nil { // runNode is done with ps
			return
		}
		var refused redis.Error
		if errors.As(err, &refused) {
			w.refused(n, err) // the subscriptions run under the waker's own lifetime, not a caller's
		} else {
			w.lost(n.i) // the PubSub reconnects and resubscribes on the next Receive
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, reconnectMax)
	}
}

func (w *notices) subscription(i int, m *redis.Subscription) {
	key, ok := w.cutPrefix(m.Channel)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.subs[key]
	if s == nil {
		return
	}
	switch m.Kind {
	case "subscribe":
		if s.sent[i] && !s.conf[i] {
			s.conf[i] = true
			// A grant told before the channel was active here was missed.
			w.qs.poke(key)
		}
	case "unsubscribe":
		s.conf[i] = false
	}
}

// message reads a grant told by node i, "g:value:round" (queue.lua).
func (w *notices) message(i int, m *redis.Message) {
	rest, ok := strings.CutPrefix(m.Payload, "g:")
	if _, mine := w.cutPrefix(m.Channel); !mine || !ok {
		return
	}
	value, round, ok := strings.Cut(rest, ":")
	if n, err := strconv.Atoi(round); ok && err == nil {
		w.qs.grant(value, i, n)
	}
}

// lost: node i's connection broke, nothing is confirmed until resubscribed.
func (w *notices) lost(i int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.subs {
		s.conf[i] = false
	}
}

// refused stops subscribing on node n, which refused, for a while.
func (w *notices) refused(n *nodeSub, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if time.Now().Before(n.deniedUntil) {
		return
	}
	n.deniedUntil = time.Now().Add(deniedFor)
	w.log.Warn("redfence: node refused to subscribe to release notices; waiting Lock calls poll it",
		"node", w.nodes[n.i].addr, "retry_in", deniedFor, "err", err)
	w.kick(n, false)
}

func (w *notices) cutPrefix(channel string) (string, bool) {
	rest, ok := strings.CutPrefix(channel, keys.ReleasedPrefix)
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, "#"+w.id)
}
