package engine

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/test/mastertest"
)

type acquireLog struct {
	NopObserver
	mu  sync.Mutex
	acq []AcquireResult
	rel []ReleaseResult
}

func (o *acquireLog) Acquire(ev AcquireEvent) {
	o.mu.Lock()
	o.acq = append(o.acq, ev.Result)
	o.mu.Unlock()
}

func (o *acquireLog) Release(r ReleaseResult) {
	o.mu.Lock()
	o.rel = append(o.rel, r)
	o.mu.Unlock()
}

// TestLateGrantNotCounted: a grant its owner collects after its validity
// ran out (finish's check; a hand-off's attempt is begun by the holder's
// Unlock and collected when the waiter's goroutine runs) is returned as
// ErrNotAcquired/ErrGrantedTooLate, and counted so: Stats.Failed and the
// Observer's "taken", not Stats.Acquired and "acquired"; its release is
// not counted as a lock's. Before, the grant was counted where the
// quorum's answers arrived, as an acquisition.
func TestLateGrantNotCounted(t *testing.T) {
	set := mastertest.Start(t, 3)
	obs := &acquireLog{}
	e, err := New(Config{FreshMasters: true, Addrs: set.Addrs(), Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := e.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	a, err := e.begin(ctx, "late", 20*time.Millisecond, callOpts{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := a.l
	for l.until.Load() == 0 || l.Remaining() > 0 { // granted, then past its validity
		if ctx.Err() != nil {
			t.Fatal("the attempt was not granted, or its validity did not run out")
		}
		time.Sleep(time.Millisecond)
	}
	got, err := e.finish(ctx, a)
	if got != nil || !errors.Is(err, ErrNotAcquired) || !errors.Is(err, ErrGrantedTooLate) {
		t.Fatalf("finish: %v, %v; want nil, ErrNotAcquired and ErrGrantedTooLate", got, err)
	}
	st := e.Stats()
	obs.mu.Lock()
	acq, rel := append([]AcquireResult(nil), obs.acq...), append([]ReleaseResult(nil), obs.rel...)
	obs.mu.Unlock()
	if st.Acquired != 0 || st.Failed != 1 || len(acq) != 1 || acq[0] != AcquireTaken {
		t.Errorf("a grant collected too late: Stats.Acquired %d, Failed %d, observer %v; want 0, 1, [taken]", st.Acquired, st.Failed, acq)
	}
	if st.Released != 0 || len(rel) != 0 {
		t.Errorf("its release counted as a lock's: Stats.Released %d, observer %v", st.Released, rel)
	}
	// A grant collected in time is counted once, as an acquisition.
	l, err = e.TryLock(ctx, "in-time", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	l.Unlock(ctx)
	if st := e.Stats(); st.Acquired != 1 || st.Released != 1 {
		t.Errorf("a grant in time: Stats.Acquired %d, Released %d; want 1, 1", st.Acquired, st.Released)
	}
}
