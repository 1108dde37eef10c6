package coord

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/redlock"
	"github.com/redfence/redfence/single"
)

// Locker is the lock that claims and elections are built on. Single and
// Redlock adapt the clients of packages single and redlock; another
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

// Mutex is the part of *single.Mutex and *redlock.Mutex that coord uses.
type Mutex interface {
	Key() string
	Lock(ctx context.Context) (Lease, error)
	TryLock(ctx context.Context) (Lease, error)
}

// Lease is the method set shared by *single.Lease and *redlock.Lease.
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

var (
	_ Lease = (*single.Lease)(nil)
	_ Lease = (*redlock.Lease)(nil)
)

// Single adapts a single.Client to a Locker. client must be the Redis client
// that c was made with: coord runs its own scripts on it, on the same keys.
// It returns an error wrapping ErrInvalid when either is nil.
func Single(c *single.Client, client redis.UniversalClient) (Locker, error) {
	if c == nil {
		return nil, invalid("single client", "nil")
	}
	if isNil(client) {
		return nil, invalid("Redis client", "nil")
	}
	return &singleLocker{c: c, nodes: []redis.UniversalClient{client}}, nil
}

// Redlock adapts a redlock.Client to a Locker. clients must be the Redis
// clients that c was made with, in the same order: coord runs its own
// scripts on them, on the same keys. It returns an error wrapping ErrInvalid
// when c is nil, a client is nil, or the number of clients does not match
// c's quorum.
func Redlock(c *redlock.Client, clients []redis.UniversalClient) (Locker, error) {
	if c == nil {
		return nil, invalid("redlock client", "nil")
	}
	if len(clients) == 0 {
		return nil, invalid("Redis clients", "none given")
	}
	for i, cl := range clients {
		if isNil(cl) {
			return nil, invalid("Redis clients", "client %d is nil", i)
		}
	}
	if q := len(clients)/2 + 1; q != c.Quorum() {
		return nil, invalid("Redis clients", "%d clients (quorum %d) do not match the redlock client's quorum of %d", len(clients), q, c.Quorum())
	}
	return &redlockLocker{c: c, nodes: append([]redis.UniversalClient(nil), clients...)}, nil
}

type singleLocker struct {
	c     *single.Client
	nodes []redis.UniversalClient
}

func (l *singleLocker) Nodes() []redis.UniversalClient { return l.nodes }

func (l *singleLocker) NewMutex(key string, o MutexOptions) (Mutex, error) {
	var opts []single.Option
	if o.TTL != 0 {
		opts = append(opts, single.WithTTL(o.TTL))
	}
	if o.Fencing {
		opts = append(opts, single.WithFencing())
	}
	m, err := l.c.NewMutex(key, opts...)
	if err != nil {
		return nil, err
	}
	return singleMutex{m}, nil
}

type singleMutex struct{ m *single.Mutex }

func (m singleMutex) Key() string { return m.m.Key() }

func (m singleMutex) Lock(ctx context.Context) (Lease, error) { return lease(m.m.Lock(ctx)) }

func (m singleMutex) TryLock(ctx context.Context) (Lease, error) { return lease(m.m.TryLock(ctx)) }

type redlockLocker struct {
	c     *redlock.Client
	nodes []redis.UniversalClient
}

func (l *redlockLocker) Nodes() []redis.UniversalClient { return l.nodes }

func (l *redlockLocker) NewMutex(key string, o MutexOptions) (Mutex, error) {
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
	return redlockMutex{m}, nil
}

type redlockMutex struct{ m *redlock.Mutex }

func (m redlockMutex) Key() string { return m.m.Key() }

func (m redlockMutex) Lock(ctx context.Context) (Lease, error) { return lease(m.m.Lock(ctx)) }

func (m redlockMutex) TryLock(ctx context.Context) (Lease, error) { return lease(m.m.TryLock(ctx)) }

// lease converts a typed lease to the interface without turning a nil
// pointer into a non-nil interface.
func lease[L Lease](l L, err error) (Lease, error) {
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
