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
	// The other owner holds the key on a quorum (maybe not yet on a master
	// where the lost hold's key had not expired when it tried).
	tok := other.Held().Token()
	before := countOf(v.values(key), tok)
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
	if got := v.values(key); countOf(got, tok) != before || before < 2 {
		t.Fatalf("the other owner's key after the lost hold's Unlocks: %q (held on %d masters before); want it kept", got, before)
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

// TestReentrantLastUnlockReportsLoss: property (h). A hold whose validity
// ran out: the nested frame's Unlock and a Lock say the loss, and so must
// the last frame's — it said nil (found by the review of issue #46): its
// release still got a quorum, the masters keeping the key for the drift
// allowance past the validity.
func TestReentrantLastUnlockReportsLoss(t *testing.T) {
	v := newEnv(t, 3, functional)
	ctx := context.Background()
	r, err := v.e.NewReentrant(keyName(t), "a")
	if err != nil {
		t.Fatal(err)
	}
	const ttl = 3 * time.Second // a drift allowance of 32 ms (the defaults)
	for range 2 {
		if err := r.TryLock(ctx, ttl); err != nil {
			t.Fatal(err)
		}
	}
	for l := r.Held(); l.Remaining() > 0; {
		time.Sleep(200 * time.Microsecond)
	}
	if err := r.Unlock(ctx); !errors.Is(err, engine.ErrLockLost) {
		t.Fatalf("the nested frame's Unlock: %v; want ErrLockLost", err)
	}
	if err := r.Unlock(ctx); !errors.Is(err, engine.ErrLockLost) {
		t.Fatalf("the last frame's Unlock of a hold whose validity had run out: %v; want ErrLockLost", err)
	}
}

// TestReentrantFailedReleaseGivesHoldUp: the last frame's Unlock gets no
// quorum (two of three masters stopped; its ctx ends). It used to keep the
// hold for a retry through r: a Lock by another goroutine sharing r then
// took a new hold from zero, and the first goroutine's retried Unlock
// released that new hold under it and said nil (found by the review of
// issue #46). The last frame now gives the hold up; the retry is the
// hold's own Unlock, which cannot touch the new hold.
func TestReentrantFailedReleaseGivesHoldUp(t *testing.T) {
	v := newEnv(t, 3, functional)
	ctx := context.Background()
	key := keyName(t)
	r, _ := v.e.NewReentrant(key, "shared")
	if err := r.TryLock(ctx, 10*time.Second); err != nil { // frame A
		t.Fatal(err)
	}
	a := r.Held()
	v.pause(1, 2)
	uctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	errA := r.Unlock(uctx)
	cancel()
	if errA == nil {
		v.resume(1, 2)
		t.Fatal("the release got a quorum with two of three masters stopped")
	}
	if r.Count() != 0 || r.Held() != nil {
		v.resume(1, 2)
		t.Fatalf("after the last frame's failed release: count %d, held %v; want the hold given up", r.Count(), r.Held() != nil)
	}
	// Nothing is left in r to retry (the old code sent the release again
	// and waited for the stopped masters).
	uctx, cancel = context.WithTimeout(ctx, 100*time.Millisecond)
	err := r.Unlock(uctx)
	cancel()
	v.resume(1, 2)
	if !errors.Is(err, engine.ErrUnlocked) {
		t.Fatalf("an Unlock after the last frame's failed release: %v; want ErrUnlocked (the hold was given up)", err)
	}
	v.waitGone(key, 5*time.Second)                      // the release lands when the masters wake
	if err := r.Lock(ctx, 10*time.Second); err != nil { // frame B: from zero
		t.Fatalf("frame B's Lock: %v", err)
	}
	b := r.Held()
	v.waitHeld(key, b.Token())
	a.Unlock(ctx) // frame A retries its release, with its own hold
	if !b.Valid() || countOf(v.values(key), b.Token()) < 2 {
		t.Fatalf("frame A's retried release took frame B's hold: valid %v, masters %q", b.Valid(), v.values(key))
	}
	other, _ := v.e.NewReentrant(key, "other")
	if err := other.TryLock(ctx, 10*time.Second); !errors.Is(err, engine.ErrNotAcquired) {
		t.Fatalf("another owner while frame B holds: %v; want ErrNotAcquired", err)
	}
	if err := r.Unlock(ctx); err != nil {
		t.Fatalf("frame B's Unlock: %v", err)
	}
}
