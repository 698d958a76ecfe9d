package engine

import (
	"context"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/internal/test/relay"
)

// TestExtendOrder: Extend(30s) then Extend(1s) on one lock: the masters
// apply 30s then 1s (one connection per key, in order), so the lock has
// 1s whichever decision is applied last. Here the 30s one is applied
// last (its caller was descheduled, say). Before, it moved Until to ~30s
// while the masters held the key for 1s: another engine could take it
// after a second while this holder believed it had 28 more.
func TestExtendOrder(t *testing.T) {
	set := mastertest.Start(t, 5)
	e, err := New(Config{FreshMasters: true, Addrs: set.Addrs(), MasterTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	ctx := context.Background()
	l, err := e.TryLock(ctx, "order:key", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	long := l.sendExtend(30*time.Second, 30000, false)
	short := l.sendExtend(time.Second, 1000, false)
	for _, o := range []*op{long, short} {
		if err := o.wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.extendDone(short); err != nil {
		t.Fatal(err)
	}
	if err := l.extendDone(long); err != nil {
		t.Fatal(err)
	}
	if left := l.Remaining(); left > time.Second {
		t.Fatalf("after Extend(30s) then Extend(1s), the lock reports %v left; the masters hold it for 1s", left)
	}
	if !l.Valid() {
		t.Fatal("the lock is not valid right after a successful 1s extension")
	}
}

// TestExtendCancelMovesDone: an Extend cancelled while the masters are
// stopped lowers the deadline to the new, shorter TTL (the masters may
// apply it when they resume) — and Done must close at that deadline, not
// the old one. Before, Done closed at the old deadline, seconds late.
func TestExtendCancelMovesDone(t *testing.T) {
	set := mastertest.Start(t, 5)
	mastertest.RequireReal(t, set)
	e, err := New(Config{FreshMasters: true, Addrs: set.Addrs(), MasterTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	ctx := context.Background()
	l, err := e.TryLock(ctx, "cancel:key", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	done := l.Done()
	ms := set.Masters()
	for _, m := range ms {
		if err := m.Pause(); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	err = l.Extend(cctx, time.Second)
	cancel()
	for _, m := range ms {
		if err := m.Resume(); err != nil {
			t.Fatal(err)
		}
	}
	if err == nil {
		t.Fatal("Extend succeeded with every master stopped")
	}
	if l.Until().After(start.Add(time.Second)) {
		t.Fatalf("Until %v after the cancelled Extend(1s); want at most a second after it started", l.Until().Sub(start))
	}
	select {
	case <-done:
		if late := time.Since(l.Until()); late > time.Second { // the original deadline is 9 s later
			t.Fatalf("Done closed %v after the lowered deadline", late)
		}
	case <-time.After(3 * time.Second):
		t.Fatalf("Done did not close at the lowered deadline (%v after the Extend began)", l.Until().Sub(start))
	}
}

// TestExtendShorterThenLongerUnanswered: Extend(1s) succeeds on every
// master, then an extension to 30s (by a caller, or the watchdog) reaches
// only masters 0 and 1 and goes unanswered elsewhere. Masters 2-4 hold the
// key for 1s, so another engine can take it a second later: by then this
// lock must say it ended. Before, the 1s success was not the latest
// extension sent, so it did not touch the deadline, and the 30s one's
// failure only lowered it to 30s: the lock reported ~9s left (and, through
// the watchdog, Done never closed) while the second engine held the key
// (found by the review of issue #22). An extension now lowers the deadline
// when it is sent, to what it would leave if a master applied it.
func TestExtendShorterThenLongerUnanswered(t *testing.T) {
	for _, watchdog := range []bool{false, true} {
		name := map[bool]string{false: "Extend", true: "watchdog"}[watchdog]
		t.Run(name, func(t *testing.T) {
			set := mastertest.Start(t, 5)
			mastertest.RequireReal(t, set)
			addrs := set.Addrs()
			var held []*relay.Relay
			for i := 2; i < 5; i++ {
				r, err := relay.Start(addrs[i])
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { r.Close() })
				held = append(held, r)
				addrs[i] = r.Addr()
			}
			e1, err := New(Config{FreshMasters: true, Addrs: addrs, MasterTimeout: 100 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { e1.Close() })
			e2, err := New(Config{FreshMasters: true, Addrs: set.Addrs(), MasterTimeout: 100 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { e2.Close() })
			ctx := context.Background()
			l, err := e1.TryLock(ctx, "shortlong:key", 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			done := l.Done()
			short := l.sendExtend(time.Second, 1000, false)
			if err := short.wait(ctx); err != nil {
				t.Fatal(err)
			}
			for _, r := range held {
				r.Hold()
			}
			var long *op
			if watchdog {
				e1.keep.mu.Lock()
				l.extending = true
				e1.keep.mu.Unlock()
				l.sendExtend(30*time.Second, 30000, true)
				time.Sleep(150 * time.Millisecond)
			} else {
				long = l.sendExtend(30*time.Second, 30000, false)
				if err := long.wait(ctx); err != nil {
					t.Fatal(err)
				}
			}
			for _, r := range held {
				r.Close() // what it held never reaches masters 2-4
			}
			if err := l.extendDone(short); err != nil {
				t.Fatalf("Extend(1s): %v", err)
			}
			if long != nil {
				if err := l.extendDone(long); err == nil {
					t.Fatal("the 30s extension answered by 2 of 5 masters succeeded")
				}
			}
			if left := l.Remaining(); left > time.Second {
				t.Fatalf("the lock reports %v left; masters 2-4 hold it for 1s", left)
			}
			time.Sleep(1100 * time.Millisecond)
			if l2, err := e2.TryLock(ctx, "shortlong:key", 5*time.Second); err == nil {
				defer l2.Unlock(ctx)
				if l.Valid() {
					t.Fatalf("two holders: the first lock reports %v left while a second engine holds the key", l.Remaining())
				}
			}
			select {
			case <-done:
			case <-time.After(500 * time.Millisecond):
				t.Fatal("Done is open while another engine holds the key")
			}
		})
	}
}
