package lockbench

import (
	"context"
	"errors"
)

// NameBound is scenario 3's bound: the same workers and hold with the lock a
// channel in this process, so with no server and no network between a release
// and the next grant. No lock over Redis hands the key over faster, so no
// lock's grants/s in the scenario can exceed this row's.
const NameBound = "no server: a channel in this process (the bound for any lock)"

// topRate is the grants/s a contended row such as NameBound's bounds: its
// own, or its holds back to back with no hand-over at all, if more.
func topRate(r Row) float64 {
	if r.M[mHold] > 0 {
		return max(r.M[mRate], 1e9/r.M[mHold])
	}
	return r.M[mRate]
}

// boundLib is the lock of NameBound: one channel of capacity 1 per key,
// shared by every worker of the key. A send takes the lock and a receive
// frees it; blocked senders are served in the order they came (Go's channels
// queue them), as redfence's queue serves its waiters.
func boundLib(name string) lib {
	return lib{name: name, build: func(context.Context, []string, int) (impl, error) {
		return &boundImpl{keys: map[string]chan struct{}{}}, nil
	}}
}

// boundImpl's lockers are made one after another, before the workers start
// (lockersFor).
type boundImpl struct {
	keys map[string]chan struct{}
}

func (b *boundImpl) newLocker(key string) (locker, error) {
	ch, ok := b.keys[key]
	if !ok {
		ch = make(chan struct{}, 1)
		b.keys[key] = ch
	}
	return boundLocker(ch), nil
}

func (b *boundImpl) close() error { return nil }

type boundLocker chan struct{}

func (l boundLocker) lock(ctx context.Context) error {
	select {
	case l <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// errNotHeld is an unlock of a bound lock nobody held: a harness bug.
var errNotHeld = errors.New("lockbench: unlock of a lock not held")

func (l boundLocker) unlock(context.Context) error {
	select {
	case <-l:
		return nil
	default:
		return errNotHeld
	}
}
