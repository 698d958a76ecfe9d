package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
)

// TestHandOffEndedNotReturned: property (c). The hand-off's attempt is
// granted while its waiter is away (holdLeft's PTTL read waits for a
// stopped master, 1 s; TestHandOffCollectedLate), with the watchdog on.
// The key is then deleted on three of five masters, so the watchdog's
// first extension finds the lock lost and ends it — with validity left.
// Lock returned that ended lock with a nil error when the waiter came
// back (found beside the review of issue #46): finish checked only that the
// validity had not run out. It now refuses it, and Lock goes on waiting.
func TestHandOffEndedNotReturned(t *testing.T) {
	v, obs := collectedLateEnv(t)
	ctx := context.Background()
	key := keyName(t)

	holder := v.mustLock(key, 10*time.Second)
	tok := holder.Token()
	deleted := make(chan struct{})
	obs.after.Store(func() {
		defer close(deleted)
		holder.Unlock(context.Background()) // hands the key to the waiter
		deadline := time.Now().Add(5 * time.Second)
		for {
			r := v.mustExec(0, "GET", key)
			if !r.IsNull() && r.Text() != tok {
				break // the hand-off's grant
			}
			if time.Now().After(deadline) {
				t.Error("the hand-off's token never reached master 0")
				return
			}
			time.Sleep(time.Millisecond)
		}
		for i := range 3 {
			v.mustExec(i, "DEL", key)
		}
	})
	obs.armed.Store(true)
	l, err := v.e.Lock(ctx, key, 1500*time.Millisecond, engine.WithAutoExtend(0))
	<-deleted
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	defer l.Unlock(ctx)
	if !l.Valid() {
		t.Fatalf("Lock returned a lock that had ended (%v, %v of validity left) with a nil error", l.Err(), l.Remaining())
	}
}
