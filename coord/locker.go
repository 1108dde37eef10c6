package coord

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/redlock"
)

// Locker is the lock that claims and elections are built on. New adapts the
// lock client of packages single and redlock; another
// implementation must keep the same contract: a lease's value is the exact
// string stored in the lock key on each node, and values never begin with
// "!".
type Locker interface {
	// NewMutex returns the mutex for key (the lock client's own key prefix
	// applies); o overrides the lock client's defaults.
	NewMutex(key string, o MutexOptions) (Mutex, error)
	// Nodes returns one Redis client per node of the lock, in the lock's
	// order: the clients the lock client was made with.
	Nodes() []redis.UniversalClient
}

// MutexOptions overrides a lock client's defaults for one mutex.
type MutexOptions struct {
	TTL     time.Duration // 0: the lock client's TTL
	Fencing bool          // true: fencing tokens on; false: the lock client's setting
}

// Mutex is the part of *redlock.Mutex (single.Mutex) that coord uses.
type Mutex interface {
	Key() string
	Lock(ctx context.Context) (Lease, error)
	TryLock(ctx context.Context) (Lease, error)
}

// Lease is the part of *redlock.Lease (single.Lease) that coord uses.
type Lease interface {
	Key() string
	Value() string
	Token() fencing.Token
	ValidUntil() time.Time
	Extend(ctx context.Context) error
	KeepAlive(ctx context.Context) error
	Release(ctx context.Context) error
	Done() <-chan struct{}
	Err() error
	Context(parent context.Context) (context.Context, context.CancelFunc)
}

var _ Lease = (*redlock.Lease)(nil)

// New adapts a lock client (redlock.New, single.New) to a Locker; coord runs its own scripts on the client's nodes
// (Client.Clients), on the same keys. It returns an error wrapping
// ErrInvalid when c is nil or was made over another client than go-redis
// (coord's own commands are go-redis calls).
func New(c *redlock.Client) (Locker, error) {
	if c == nil {
		return nil, invalid("lock client", "nil")
	}
	nodes := c.Clients()
	if nodes == nil {
		return nil, invalid("lock client", "made over another client than go-redis (coord runs its own commands with go-redis)")
	}
	return &lockClient{c: c, nodes: nodes}, nil
}

type lockClient struct {
	c     *redlock.Client
	nodes []redis.UniversalClient
}

func (l *lockClient) Nodes() []redis.UniversalClient { return l.nodes }

func (l *lockClient) NewMutex(key string, o MutexOptions) (Mutex, error) {
	var opts []redlock.Option
	if o.TTL != 0 {
		opts = append(opts, redlock.WithTTL(o.TTL))
	}
	if o.Fencing {
		opts = append(opts, redlock.WithFencing())
	}
	m, err := l.c.NewMutex(key, opts...)
	if err != nil {
		return nil, err
	}
	return mutex{m}, nil
}

type mutex struct{ m *redlock.Mutex }

func (m mutex) Key() string { return m.m.Key() }

func (m mutex) Lock(ctx context.Context) (Lease, error) { return lease(m.m.Lock(ctx)) }

func (m mutex) TryLock(ctx context.Context) (Lease, error) { return lease(m.m.TryLock(ctx)) }

// lease converts a typed lease to the interface without turning a nil
// pointer into a non-nil interface.
func lease(l *redlock.Lease, err error) (Lease, error) {
	if err != nil {
		return nil, err
	}
	return l, nil
}

// addrOf names a client in error messages.
func addrOf(c redis.UniversalClient) string {
	if rc, ok := c.(*redis.Client); ok {
		return rc.Options().Addr
	}
	return fmt.Sprintf("%T", c)
}
