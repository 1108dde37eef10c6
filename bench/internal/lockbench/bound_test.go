package lockbench

import (
	"context"
	"errors"
	"testing"
)

// The bound's lock admits one holder per key, frees it on unlock, gives up
// when the context ends, and refuses an unlock of a lock nobody holds.
func TestBoundLock(t *testing.T) {
	im, err := boundLib(NameBound).build(context.Background(), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := im.newLocker("k")
	b, _ := im.newLocker("k")
	other, _ := im.newLocker("other")
	ctx := context.Background()
	if err := a.lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := other.lock(ctx); err != nil {
		t.Fatalf("another key: %v", err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := b.lock(done); !errors.Is(err, context.Canceled) {
		t.Fatalf("b took a held key: %v", err)
	}
	if err := a.unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.lock(ctx); err != nil {
		t.Fatalf("b after the release: %v", err)
	}
	if err := b.unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.unlock(ctx); !errors.Is(err, errNotHeld) {
		t.Fatalf("unlock of a free key: %v", err)
	}
}
