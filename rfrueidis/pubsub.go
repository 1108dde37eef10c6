package rfrueidis

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// pubSub is the engine's pub/sub connection (redisconn.PubSub) over a rueidis
// dedicated connection with pub/sub hooks. It keeps the channel set, and
// when the connection breaks the next Receive dedicates a new one and
// subscribes to the set again, as go-redis's PubSub does.
type pubSub struct {
	client rueidis.Client
	done   chan struct{} // closed by Close

	// The events for Receive: *redis.Subscription, *redis.Message or error.
	// The hooks queue them without waiting (they run on rueidis's reading
	// goroutine, which Subscribe's own reply also needs).
	qmu    sync.Mutex
	queue  []any
	queued chan struct{} // holds a token while queue is not empty

	mu       sync.Mutex
	channels map[string]struct{}
	dc       rueidis.DedicatedClient // nil: not connected
	cancel   func()
	broken   <-chan error // the hooks' end: the connection closed
	// connected is closed, and replaced, when a new connection is made: a
	// Receive waiting on the old one (or none) then watches the new one.
	connected chan struct{}
	closed    bool
}

func newPubSub(client rueidis.Client) *pubSub {
	return &pubSub{client: client, queued: make(chan struct{}, 1), done: make(chan struct{}), channels: map[string]struct{}{}, connected: make(chan struct{})}
}

// connect dedicates a connection, sets the hooks and subscribes to the
// channel set; ps.mu must be held.
func (ps *pubSub) connect(ctx context.Context) error {
	if ps.closed {
		return errors.New("redfence: pub/sub connection closed")
	}
	if ps.dc != nil {
		return nil
	}
	dc, cancel := ps.client.Dedicate()
	ps.broken = dc.SetPubSubHooks(rueidis.PubSubHooks{
		OnMessage: func(m rueidis.PubSubMessage) {
			ps.send(&redis.Message{Channel: m.Channel, Pattern: m.Pattern, Payload: m.Message})
		},
		OnSubscription: func(s rueidis.PubSubSubscription) {
			ps.send(&redis.Subscription{Kind: s.Kind, Channel: s.Channel, Count: int(s.Count)})
		},
	})
	ps.dc, ps.cancel = dc, cancel
	close(ps.connected)
	ps.connected = make(chan struct{})
	if len(ps.channels) > 0 {
		chans := make([]string, 0, len(ps.channels))
		for ch := range ps.channels {
			chans = append(chans, ch)
		}
		slices.Sort(chans)
		return ps.do(ctx, "SUBSCRIBE", chans)
	}
	return nil
}

// do sends SUBSCRIBE or UNSUBSCRIBE on the connection; a refusal arrives
// through Receive, as go-redis reports it; ps.mu must be held.
func (ps *pubSub) do(ctx context.Context, verb string, chans []string) error {
	b := ps.dc.B()
	cmd := b.Subscribe().Channel(chans...).Build()
	if verb == "UNSUBSCRIBE" {
		cmd = b.Unsubscribe().Channel(chans...).Build()
	}
	err := ps.dc.Do(ctx, cmd).Error()
	if err != nil {
		if _, ok := rueidis.IsRedisErr(err); ok {
			ps.send(convertErr(err))
			return nil
		}
	}
	return err
}

// send queues an event for Receive.
func (ps *pubSub) send(ev any) {
	ps.qmu.Lock()
	ps.queue = append(ps.queue, ev)
	ps.qmu.Unlock()
	select {
	case ps.queued <- struct{}{}:
	default:
	}
}

// next takes the first queued event, if any.
func (ps *pubSub) next() (any, bool) {
	ps.qmu.Lock()
	defer ps.qmu.Unlock()
	if len(ps.queue) == 0 {
		return nil, false
	}
	ev := ps.queue[0]
	ps.queue[0] = nil
	ps.queue = ps.queue[1:]
	if len(ps.queue) > 0 {
		select {
		case ps.queued <- struct{}{}:
		default:
		}
	}
	return ev, true
}

func (ps *pubSub) Subscribe(ctx context.Context, channels ...string) error {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, ch := range channels {
		ps.channels[ch] = struct{}{}
	}
	if ps.dc == nil {
		return ps.connect(ctx)
	}
	return ps.do(ctx, "SUBSCRIBE", channels)
}

func (ps *pubSub) Unsubscribe(ctx context.Context, channels ...string) error {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, ch := range channels {
		delete(ps.channels, ch)
	}
	if ps.dc == nil {
		return nil
	}
	return ps.do(ctx, "UNSUBSCRIBE", channels)
}

// Receive waits for the next event. When the connection broke it returns
// that error once, and the call after it connects again.
func (ps *pubSub) Receive(ctx context.Context) (any, error) {
	for {
		ps.mu.Lock()
		if ps.dc == nil && len(ps.channels) > 0 {
			if err := ps.connect(ctx); err != nil {
				ps.drop()
				ps.mu.Unlock()
				return nil, err
			}
		}
		broken, connected := ps.broken, ps.connected
		ps.mu.Unlock()
		if ev, ok := ps.next(); ok {
			if err, ok := ev.(error); ok {
				return nil, err
			}
			return ev, nil
		}
		select {
		case <-ps.queued:
			continue
		case err := <-broken:
			ps.mu.Lock()
			if ps.broken == broken {
				ps.drop()
			}
			ps.mu.Unlock()
			if err == nil {
				err = errors.New("redfence: pub/sub connection closed")
			}
			return nil, err
		case <-connected:
			continue // watch the new connection
		case <-ps.done:
			return nil, errors.New("redfence: pub/sub connection closed")
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// drop closes the dedicated connection (a connection in pub/sub mode is not
// handed back for other commands); ps.mu must be held.
func (ps *pubSub) drop() {
	if ps.dc != nil {
		ps.dc.Close()
	}
	if ps.cancel != nil {
		ps.cancel()
	}
	ps.dc, ps.cancel, ps.broken = nil, nil, nil
}

func (ps *pubSub) Close() error {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.closed {
		return nil
	}
	ps.closed = true
	close(ps.done)
	ps.drop()
	return nil
}
