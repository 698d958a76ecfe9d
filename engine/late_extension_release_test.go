package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
)

// TestLateExtensionReleasedByKind: an extension the masters confirm after
// the lock's validity ended ends the lock, and what it renewed on the
// masters is released by the lock's token in the lock's own form — a
// plain key deleted, a read lock's entry removed from the readers' set.
// The read lock's was sent the plain compare-and-delete (WRONGTYPE on the
// set): its entry stayed on every master with the late TTL, and writers
// were refused by a reader nobody was.
func TestLateExtensionReleasedByKind(t *testing.T) {
	for _, kind := range []string{"plain", "read"} {
		t.Run(kind, func(t *testing.T) {
			e, rs, _ := lateRelayed(t) // three masters behind relays, a 3 s per-master timeout
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			key := keyName(t)
			rw, err := e.NewRWLock(key)
			if err != nil {
				t.Fatal(err)
			}
			var l *engine.Lock
			held := []string{"GET", key} // what the lock holds on a master
			if kind == "read" {
				l, err = rw.TryRLock(ctx, 2*time.Second)
				held = []string{"ZSCORE", key + ":readers", ""}
			} else {
				l, err = e.TryLock(ctx, key, 2*time.Second)
			}
			if err != nil {
				t.Fatal(err)
			}
			if kind == "read" {
				held[2] = l.Token()
			}
			for _, r := range rs {
				r.Hold() // the extension's replies are held past the validity
			}
			out := make(chan error, 1)
			go func() { out <- l.Extend(ctx, 6*time.Second) }()
			for time.Now().Before(l.Until()) {
				time.Sleep(time.Millisecond)
			}
			for _, r := range rs {
				r.Release()
			}
			if err := <-out; err == nil {
				t.Fatal("an extension confirmed after the validity ended returned nil")
			}
			// Released, not left to the late TTL (6 s): gone within 3 s.
			gone := time.Now().Add(3 * time.Second)
			for i, r := range rs { // released: they pass traffic again
				c := conn.New(r.Addr(), conn.Config{})
				defer c.Close()
				for {
					rep, err := c.Exec(ctx, held...)
					if err == nil && rep.IsNull() {
						break
					}
					if time.Now().After(gone) {
						t.Fatalf("master %d: %q still answers %v, %v after the late extension: the lock's hold was not released", i, held, rep, err)
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			if kind == "read" {
				w, err := rw.TryLock(ctx, time.Second)
				if err != nil {
					t.Fatalf("a writer after the read lock ended: %v", err)
				}
				w.Unlock(ctx)
			}
		})
	}
}
