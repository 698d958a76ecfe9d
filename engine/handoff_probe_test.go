package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
)

// TestHandOffWaiterGoneInFlight: the waiter's Lock call ends (ctx) while
// the hand-off script is in flight on a quorum of masters: the holder's
// release is reported as it happened, and the waiter's token does not stay
// on the masters (its attempt is collected by leave and unlocked, or
// cleaned up).
func TestHandOffWaiterGoneInFlight(t *testing.T) {
	v := newEnv(t, 5, functional)
	key := keyName(t)
	holder := v.mustLock(key, 10*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan error, 1)
	go func() {
		l, err := v.e.Lock(ctx, key, 5*time.Second, engine.WithRetryDelay(5*time.Second))
		if err == nil {
			l.Unlock(context.Background())
		}
		got <- err
	}()
	waitIdle(t, v, key)
	before := v.e.Stats().HandOffs
	slowMasters(t, v, 300*time.Millisecond, 0, 1, 2)
	rel := make(chan error, 1)
	holder.UnlockAsync(func(err error) { rel <- err })
	if v.e.Stats().HandOffs == before {
		t.Fatal("no hand-off")
	}
	time.Sleep(50 * time.Millisecond)
	cancel()
	if err := <-got; err == nil {
		t.Log("Lock returned the key before its ctx ended")
	}
	if err := <-rel; err != nil {
		t.Errorf("holder's Unlock: %v", err)
	}
	v.waitGone(key, 3*time.Second)
	if n := v.e.Stats().Waiting; n != 0 {
		t.Errorf("Waiting %d after the waiter left", n)
	}
}
