package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
)

// reentrantLostWithFrames takes key frames times with a short
// TTL, then waits until the hold's validity ran out and another owner
// took the key: the hold is lost with frames open.
func reentrantLostWithFrames(t *testing.T, v *env, key string, frames int) (*engine.Reentrant, *engine.Reentrant) {
	t.Helper()
	ctx := context.Background()
	r, err := v.e.NewReentrant(key, "a")
	if err != nil {
		t.Fatal(err)
	}
	for range frames {
		if err := r.TryLock(ctx, 300*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	other, _ := v.e.NewReentrant(key, "b")
	deadline := time.Now().Add(10 * time.Second)
	for other.TryLock(ctx, 10*time.Second) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the other owner never got the key")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return r, other
}

// TestReentrantNestedUnlockReportsLoss: property (h). A hold of count 2
// whose validity ran out and whose key another owner took: the nested
// frame's Unlock reported nil, as if its work had run under the lock
// (found by the review of issue #46). Each frame's Unlock now reports the
// loss, and the count still goes down to zero.
func TestReentrantNestedUnlockReportsLoss(t *testing.T) {
	v := newEnv(t, 3, functional)
	ctx := context.Background()
	key := keyName(t)
	r, other := reentrantLostWithFrames(t, v, key, 2)
	if err := r.Unlock(ctx); !errors.Is(err, engine.ErrLockLost) {
		t.Fatalf("the nested frame's Unlock after the loss: %v; want ErrLockLost", err)
	}
	if r.Count() != 1 {
		t.Fatalf("count after the nested Unlock: %d; want 1", r.Count())
	}
	if err := r.Unlock(ctx); !errors.Is(err, engine.ErrLockLost) {
		t.Fatalf("the outer frame's Unlock after the loss: %v; want ErrLockLost", err)
	}
	if r.Count() != 0 {
		t.Fatalf("count after the last Unlock: %d; want 0", r.Count())
	}
	if got := v.values(key); got[0] == "" || got[0] != got[1] {
		t.Fatalf("the other owner's key after the lost hold's Unlocks: %q; want it kept", got)
	}
	if err := other.Unlock(ctx); err != nil {
		t.Fatalf("the other owner's Unlock: %v", err)
	}
}

// TestReentrantLostHoldNotReentered: two goroutines share a Reentrant as
// one holder. Frame A's hold expires; another owner takes the key and
// gives it up. Frame B's Lock used to take a new hold with count 1, and
// frame A's Unlock then released B's new hold under B and returned nil
// (found by the review of issue #46). Now B's Lock returns the loss while
// A's frame is open, A's Unlock reports the loss, and only then is a
// Lock an acquisition from zero, which A's Unlock can no longer touch.
func TestReentrantLostHoldNotReentered(t *testing.T) {
	v := newEnv(t, 3, functional)
	ctx := context.Background()
	key := keyName(t)
	r, other := reentrantLostWithFrames(t, v, key, 1) // frame A
	if err := other.Unlock(ctx); err != nil {         // the other owner's work is done
		t.Fatal(err)
	}
	if err := r.TryLock(ctx, 5*time.Second); !errors.Is(err, engine.ErrLockLost) { // frame B
		t.Fatalf("a Lock while the lost hold's frame is open: %v; want ErrLockLost", err)
	}
	if r.Count() != 1 {
		t.Fatalf("count after the refused Lock: %d; want 1 (frame A's)", r.Count())
	}
	if err := r.Unlock(ctx); !errors.Is(err, engine.ErrLockLost) { // frame A ends its work
		t.Fatalf("frame A's Unlock: %v; want ErrLockLost", err)
	}
	if err := r.TryLock(ctx, 5*time.Second); err != nil { // frame B again: from zero
		t.Fatalf("a Lock after the last frame of the lost hold: %v", err)
	}
	b := r.Held()
	if err := r.Unlock(ctx); err != nil || b.Valid() || r.Count() != 0 {
		t.Fatalf("frame B's own Unlock: %v, valid %v, count %d", err, b.Valid(), r.Count())
	}
}
