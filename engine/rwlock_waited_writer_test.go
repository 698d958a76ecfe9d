package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
)

// TestRWLockWaitedWriterIsValid: property (c) for RWLock.Lock's write
// lock. A writer that waited (a reader held the lock first) drops its
// intent key after its grant; the drop must not stand between the verdict
// and the return. With one master of five stopped and a per-master
// timeout (1 s) longer than the writer's TTL (200 ms), the drop waited for
// the stopped master and the lock came back already expired, every time
// (found by the review of issue #46). Now the drop is sent without waiting,
// on the key's connections (ahead of the holder's next command).
func TestRWLockWaitedWriterIsValid(t *testing.T) {
	v := newEnv(t, 5, engine.Config{FreshMasters: true, MasterTimeout: time.Second})
	mastertest.RequireReal(t, v.set)
	ctx := context.Background()
	rw, err := v.e.NewRWLock(keyName(t))
	if err != nil {
		t.Fatal(err)
	}
	v.pause(4)
	for round := range 3 {
		if _, err := rw.TryRLock(ctx, 120*time.Millisecond); err != nil { // left to expire
			t.Fatalf("round %d: reader: %v", round, err)
		}
		start := time.Now()
		w, err := rw.Lock(ctx, 200*time.Millisecond)
		took := time.Since(start)
		if err != nil {
			t.Fatalf("round %d: writer: %v", round, err)
		}
		if !w.Valid() || w.Err() != nil {
			t.Fatalf("round %d: RWLock.Lock returned a write lock that is not valid (remaining %v, err %v), %v after the call", round, w.Remaining(), w.Err(), took)
		}
		if err := w.Unlock(ctx); err != nil {
			t.Fatalf("round %d: unlock: %v", round, err)
		}
	}
}
