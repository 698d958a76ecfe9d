package engine_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
)

func TestRWLock(t *testing.T) {
	v := newEnv(t, 5, functional)
	ctx := context.Background()
	rw, err := v.e.NewRWLock("rw:key")
	if err != nil {
		t.Fatal(err)
	}
	var readers []*engine.Lock
	for range 3 {
		l, err := rw.TryRLock(ctx, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if l.Key() != "rw:key" {
			t.Fatalf("read lock Key() = %q", l.Key())
		}
		readers = append(readers, l)
	}
	for i := range 5 {
		if n := v.mustExec(i, "ZCARD", "rw:key:readers").Int; n != 3 && i < 3 {
			// The quorum decided; stragglers may still be writing.
			t.Logf("master %d has %d readers", i, n)
		}
	}
	if _, err := rw.TryLock(ctx, 5*time.Second); !errors.Is(err, engine.ErrNotAcquired) {
		t.Fatalf("writer while 3 readers hold: %v; want ErrNotAcquired", err)
	}
	v.waitGone("rw:key", 5*time.Second) // the refused writer left nothing
	if err := readers[0].Extend(ctx, 10*time.Second); err != nil {
		t.Fatalf("reader Extend: %v", err)
	}
	for _, l := range readers {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := readers[0].Unlock(ctx); !errors.Is(err, engine.ErrUnlocked) {
		t.Fatalf("second Unlock: %v", err)
	}
	w, err := rw.TryLock(ctx, 5*time.Second)
	if err != nil {
		t.Fatalf("writer after the readers left: %v", err)
	}
	if h, err := v.e.Holder(ctx, "rw:key"); err != nil || h.Token != w.Token() {
		t.Fatalf("Holder: %+v, %v; want the writer", h, err)
	}
	if _, err := rw.TryRLock(ctx, time.Second); !errors.Is(err, engine.ErrNotAcquired) {
		t.Fatalf("reader while the writer holds: %v; want ErrNotAcquired", err)
	}
	if _, err := rw.TryLock(ctx, time.Second); !errors.Is(err, engine.ErrNotAcquired) {
		t.Fatalf("second writer: %v; want ErrNotAcquired", err)
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := rw.TryRLock(ctx, time.Second); err != nil {
		t.Fatalf("reader after the writer left: %v", err)
	}
	for _, o := range []engine.Option{engine.WithFencing(), engine.WithToken("t")} {
		if _, err := rw.TryLock(ctx, time.Second, o); !errors.Is(err, engine.ErrBadArgument) {
			t.Fatalf("option refused: %v", err)
		}
	}
}

// TestRWLockReaderExpiry: a reader that never unlocks (crashed) stops
// counting when its TTL ends on the masters' clocks; a waiting writer gets
// the key then, not before.
func TestRWLockReaderExpiry(t *testing.T) {
	v := newEnv(t, 5, functional)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rw, _ := v.e.NewRWLock("rw:exp")
	r, err := rw.TryRLock(ctx, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	w, err := rw.Lock(ctx, time.Second, engine.WithRetryDelay(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if r.Valid() {
		t.Fatal("the writer got the key while the reader was valid")
	}
	if !w.Valid() {
		t.Fatal("writer not valid")
	}
}

// TestRWLockWriterNotStarved: readers that overlap without pause always
// leave one inside; a waiting writer still gets the key, because new
// readers wait while it waits. Without the intent key it never would.
func TestRWLockWriterNotStarved(t *testing.T) {
	v := newEnv(t, 5, functional)
	rw, _ := v.e.NewRWLock("rw:starve")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var reads, writerInside atomic.Int64
	var overlap atomic.Bool
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(g) * 3 * time.Millisecond) // staggered: always several inside
			for {
				select {
				case <-stop:
					return
				default:
				}
				l, err := rw.RLock(ctx, 2*time.Second, engine.WithRetryDelay(time.Millisecond))
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					continue
				}
				if writerInside.Load() != 0 {
					overlap.Store(true)
				}
				reads.Add(1)
				time.Sleep(20 * time.Millisecond)
				l.Unlock(ctx)
			}
		}()
	}
	for reads.Load() < 20 && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	start, atStart := time.Now(), reads.Load()
	w, err := rw.Lock(ctx, 2*time.Second, engine.WithRetryDelay(5*time.Millisecond))
	if err != nil {
		close(stop)
		wg.Wait()
		t.Fatalf("writer starved by readers: %v after %v (%d reads)", err, time.Since(start), reads.Load())
	}
	// Readers already on their way in may enter; no stream after them.
	// (Without the intent key: hundreds of reads, over a second or more.)
	if n := reads.Load() - atStart; n > 16 {
		close(stop)
		wg.Wait()
		t.Fatalf("%d reads began while the writer waited (%v): new readers did not wait for it", n, time.Since(start))
	}
	writerInside.Store(1)
	time.Sleep(30 * time.Millisecond)
	writerInside.Store(0)
	w.Unlock(ctx)
	waited := time.Since(start)
	before := reads.Load()
	for reads.Load() < before+5 && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if overlap.Load() {
		t.Fatal("a reader was inside with the writer")
	}
	if reads.Load() < before+5 {
		t.Fatal("readers did not resume after the writer")
	}
	for i := range 5 {
		if v.mustExec(i, "EXISTS", "rw:starve:wwait").Int != 0 {
			t.Fatalf("master %d still has the writer's intent key", i)
		}
	}
	t.Logf("writer waited %v among %d reads", waited, before)
}
