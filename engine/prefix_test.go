package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
)

// TestKeyPrefix: engines with different prefixes share masters without
// seeing each other's locks; Key() is the caller's key; release, extend and
// waiting work on the prefixed key.
func TestKeyPrefix(t *testing.T) {
	set := mastertest.Start(t, 3)
	// Long locks and a 1 s per-master timeout: on a loaded host 1 s locks
	// lapsed before their Extend or Unlock (prefixes are the subject).
	a := newEnvOn(t, set, engine.Config{FreshMasters: true, KeyPrefix: "tenant-a:", MasterTimeout: time.Second})
	b := newEnvOn(t, set, engine.Config{FreshMasters: true, KeyPrefix: "tenant-b:", MasterTimeout: time.Second})
	ctx := context.Background()
	la := a.mustLock("job", 10*time.Second)
	lb := b.mustLock("job", 10*time.Second) // same key, other tenant: free
	if la.Key() != "job" || lb.Key() != "job" {
		t.Fatalf("Key() = %q, %q; want the caller's key", la.Key(), lb.Key())
	}
	a.waitHeld("tenant-a:job", la.Token()) // a quorum granted it; the third master may answer later
	if got := a.values("job"); countOf(got, nilValue) != 3 {
		t.Fatalf("the bare key was written: %q", got)
	}
	if _, err := a.e.TryLock(ctx, "job", time.Second); err == nil {
		t.Fatal("a second lock of tenant a on job succeeded")
	}
	if err := la.Extend(ctx, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	// A waiter of tenant a is handed the key at a's Unlock.
	got := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		l, err := a.e.Lock(wctx, "job", time.Second)
		if err == nil && l.Key() != "job" {
			t.Errorf("waiter's Key() = %q", l.Key())
		}
		got <- err
	}()
	time.Sleep(50 * time.Millisecond)
	if err := la.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	if err := lb.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// Unlock returned at a quorum of releases; the last master's follows
	// (CI once read it before it landed).
	b.waitGone("tenant-b:job", 5*time.Second)
}
