package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
)

// TestCleanupOnlyWhatItCreated: the cleanup of a failed attempt removes
// only what that attempt created (docs/safety.md, the grant rule's (d)).
// With the caller's token (WithToken; the proxy passes clients' values) a
// retry of a lock the caller holds must not delete it: before, a retry
// that timed out on three stopped masters queued a release behind its
// SET NX there, and when they resumed the release deleted the caller's
// valid lock on a majority — a second holder could take the key.
func TestCleanupOnlyWhatItCreated(t *testing.T) {
	v := newEnv(t, 5, engine.Config{FreshMasters: true, MasterTimeout: 100 * time.Millisecond, CleanupTimeout: 100 * time.Millisecond})
	ctx := context.Background()

	t.Run("caller token kept where unknown", func(t *testing.T) {
		v := v.on(t)
		key, tok := keyName(t), "caller-token-0123456789"
		v.mustLock(key, 20*time.Second, engine.WithToken(tok))
		v.pause(0, 1, 2)
		_, err := v.e.TryLock(ctx, key, 20*time.Second, engine.WithToken(tok))
		if !errors.Is(err, engine.ErrUnavailable) {
			t.Fatalf("retry with the held token while 3 of 5 masters are stopped: %v; want ErrUnavailable", err)
		}
		v.resume(0, 1, 2)
		// What was queued for the stopped masters runs now (a release
		// behind the SET NX would delete the token there); a quorum read
		// on the key's connections comes after it.
		if _, err := v.e.Holder(ctx, key); err != nil {
			t.Fatal(err)
		}
		if got := countOf(v.values(key), tok); got != 5 {
			t.Fatalf("after the failed retry, %d of 5 masters hold the caller's token (%q); want 5", got, v.values(key))
		}
		if _, err := v.e.TryLock(ctx, key, time.Second); !errors.Is(err, engine.ErrNotAcquired) {
			t.Fatalf("another holder while the first lock is valid: %v; want ErrNotAcquired", err)
		}
	})

	t.Run("caller token removed where created", func(t *testing.T) {
		v := v.on(t)
		key, tok := keyName(t), "caller-token-abcdef0123"
		for _, i := range []int{2, 3, 4} {
			v.mustExec(i, "SET", key, "someone-else", "PX", "20000")
		}
		if _, err := v.e.TryLock(ctx, key, 20*time.Second, engine.WithToken(tok)); !errors.Is(err, engine.ErrNotAcquired) {
			t.Fatalf("TryLock of a key held on 3 of 5 masters: %v; want ErrNotAcquired", err)
		}
		want := []string{nilValue, nilValue, "someone-else", "someone-else", "someone-else"}
		v.waitValues(key, []int{0, 1, 2, 3, 4}, want, 5*time.Second)
	})
}
