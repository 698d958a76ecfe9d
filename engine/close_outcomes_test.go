package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
)

// TestDoReportsLossWhenClosedUnderFn: property (h). The engine is closed
// while fn runs (a shutdown elsewhere in the process), and fn returns
// after the lock's validity ended. Do and Lead returned ErrClosed, which
// does not match ErrLockLost: a caller that checks for the loss took the
// work as done under the lock (found by the review of issue #46). They
// now report both.
func TestDoReportsLossWhenClosedUnderFn(t *testing.T) {
	for _, kind := range []string{"Do", "Lead"} {
		t.Run(kind, func(t *testing.T) {
			v := newEnv(t, 3, functional)
			ctx := context.Background()
			work := func(l *engine.Lock) {
				v.e.Close()
				for until := l.Until(); !time.Now().After(until); {
					time.Sleep(5 * time.Millisecond)
				}
			}
			var err error
			if kind == "Do" {
				err = v.e.Do(ctx, keyName(t), 300*time.Millisecond, func(fctx context.Context) error {
					work(engine.LockFrom(fctx))
					return nil
				})
			} else {
				el, eerr := v.e.NewElection(keyName(t), 300*time.Millisecond)
				if eerr != nil {
					t.Fatal(eerr)
				}
				err = el.Lead(ctx, "v", func(_ context.Context, ld *engine.Leadership) error {
					work(ld.Lock())
					return nil
				})
			}
			if !errors.Is(err, engine.ErrLockLost) || !errors.Is(err, engine.ErrClosed) {
				t.Fatalf("%s, the engine closed under fn and fn returned after the validity: %v; want ErrLockLost and ErrClosed", kind, err)
			}
		})
	}
}

// TestGrantNotHandedOutAtClose: property (c). A TryLock WithAutoExtend is
// granted while the engine closes: its keeper has stopped, and watching
// the new lock ends it (ErrClosed). TryLock and TryLockAsync returned that
// ended lock with a nil error (found by the review of issue #46); now they
// return ErrClosed (what the attempt created is cleaned up as far as the
// closing connections still carry it, the rest expires).
func TestGrantNotHandedOutAtClose(t *testing.T) {
	for _, kind := range []string{"TryLock", "TryLockAsync"} {
		t.Run(kind, func(t *testing.T) {
			e, rs, _ := lateRelayed(t)
			ctx := context.Background()
			// A watched lock: it ends when the keeper stops.
			w, err := e.TryLock(ctx, keyName(t, "watched"), 5*time.Second, engine.WithAutoExtend(0))
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rs {
				r.Hold()
			}
			type res struct {
				l   *engine.Lock
				err error
			}
			out := make(chan res, 1)
			key := keyName(t)
			if kind == "TryLock" {
				go func() {
					l, err := e.TryLock(ctx, key, 2*time.Second, engine.WithAutoExtend(0))
					out <- res{l, err}
				}()
			} else {
				e.TryLockAsync(ctx, key, 2*time.Second, func(l *engine.Lock, err error) { out <- res{l, err} }, engine.WithAutoExtend(0))
			}
			for _, r := range rs {
				for !r.Holding([]byte(key)) {
					time.Sleep(time.Millisecond)
				}
			}
			closed := make(chan struct{})
			go func() { e.Close(); close(closed) }()
			<-w.Done() // the keeper stopped
			if !errors.Is(w.Err(), engine.ErrClosed) {
				t.Fatalf("the watched lock ended with %v; want ErrClosed", w.Err())
			}
			for _, r := range rs {
				r.Release()
			}
			got := lateWait(t, out, kind)
			<-closed
			if got.err == nil {
				t.Fatalf("%s granted while the engine closed: a lock with a nil error (valid %v, err %v)", kind, got.l.Valid(), got.l.Err())
			}
			if !errors.Is(got.err, engine.ErrClosed) {
				t.Fatalf("%s granted while the engine closed: %v; want ErrClosed", kind, got.err)
			}
		})
	}
}
