package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
)

// TestKindsQuarantine: every lock kind and the holder read obey restart
// quarantine. In quarantineScenario only master C (2) still holds q:key;
// the other four restarted empty. Each entry point must refuse (or report
// unavailable) rather than count the restarted masters.
func TestKindsQuarantine(t *testing.T) {
	ctx := context.Background()
	for _, off := range []bool{false, true} {
		e, _, holder := quarantineScenario(t, off)
		if !holder.Valid() {
			t.Fatal("the holder's lock ran out during the restarts; the test proves nothing")
		}
		h, err := e.Holder(ctx, "q:key")
		if off {
			// Without quarantine the read says free while the holder is
			// valid: what the mechanism prevents.
			if err != nil || h.Token != "" {
				t.Fatalf("quarantine off: Holder = %+v, %v; want the wrong answer, free", h, err)
			}
			continue
		}
		if !errors.Is(err, engine.ErrUnavailable) || !errors.Is(err, engine.ErrQuarantined) {
			t.Fatalf("Holder: %+v, %v; want ErrUnavailable naming the quarantine", h, err)
		}
		r, _ := e.NewReentrant("q:key", "r")
		if err := r.TryLock(ctx, time.Second); !errors.Is(err, engine.ErrUnavailable) {
			t.Fatalf("Reentrant.TryLock: %v; want ErrUnavailable", err)
		}
		if _, err := e.TryLockAll(ctx, []string{"q:a", "q:key"}, time.Second); !errors.Is(err, engine.ErrUnavailable) {
			t.Fatalf("TryLockAll: %v; want ErrUnavailable", err)
		}
		rw, _ := e.NewRWLock("q:rw")
		if _, err := rw.TryRLock(ctx, time.Second); !errors.Is(err, engine.ErrUnavailable) {
			t.Fatalf("RWLock.TryRLock: %v; want ErrUnavailable", err)
		}
		if _, err := rw.TryLock(ctx, time.Second); !errors.Is(err, engine.ErrUnavailable) {
			t.Fatalf("RWLock.TryLock: %v; want ErrUnavailable", err)
		}
		s, _ := e.NewSemaphore("q:sem", 2)
		if _, err := s.TryAcquire(ctx, time.Second); !errors.Is(err, engine.ErrUnavailable) {
			t.Fatalf("Semaphore.TryAcquire: %v; want ErrUnavailable", err)
		}
	}
}

// TestReentrantQuarantine: a re-acquisition's confirmations from masters
// in restart quarantine do not count. Masters 0 and 1 restart empty (in
// quarantine); the hold is granted by 2, 3, 4 and written on all five;
// with 3 and 4 stopped, only 0, 1 (quarantined) and 2 confirm a
// re-acquisition: not a quorum.
func TestReentrantQuarantine(t *testing.T) {
	v := newEnv(t, 5, engine.Config{FreshMasters: true, MasterTimeout: 250 * time.Millisecond, MaxTTL: 10 * time.Second})
	ctx := context.Background()
	restartEmpty(t, v.set, 0, 1)
	v.waitConnected()
	r, _ := v.e.NewReentrant("rq:key", "")
	if err := r.TryLock(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	v.waitHeld("rq:key", r.Held().Token())
	v.pause(3, 4)
	err := r.TryLock(ctx, 5*time.Second)
	if !errors.Is(err, engine.ErrUnavailable) || !errors.Is(err, engine.ErrQuarantined) {
		t.Fatalf("re-acquisition confirmed by 2 quarantined masters and 1 other: %v; want ErrUnavailable naming the quarantine", err)
	}
	if r.Count() != 1 {
		t.Fatalf("count %d; want 1", r.Count())
	}
}
