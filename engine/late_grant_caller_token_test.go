package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
)

// TestLateGrantLeavesCallersRetry: property (d). A TryLock with the
// caller's token is granted, but its caller is paused past the grant's
// validity before it collects it (a process short of CPU: the proxy's
// SET NX PX). Meanwhile the client gave up on the attempt, released its
// value and was granted again with it. The late grant is refused (c), and
// its release by value deleted the retry's grant on every master (found
// by the review of the caller-token marks, issue #46); the keys of a grant
// this late are now left to their TTL, as a cleanup this late leaves them.
func TestLateGrantLeavesCallersRetry(t *testing.T) {
	v := newEnv(t, 3, functional)
	ctx := context.Background()
	key := keyName(t)
	const val = "the-clients-value-0123456789"
	const ttl = 200 * time.Millisecond
	engine.SetCollectHook(func() {
		time.Sleep(ttl + 100*time.Millisecond) // the caller paused past the validity
		for i := range 3 {                     // the client's release, and its retry granted
			v.mustExec(i, "DEL", key)
			v.mustExec(i, "SET", key, val, "PX", "20000")
		}
	})
	_, err := v.e.TryLock(ctx, key, ttl, engine.WithToken(val))
	engine.SetCollectHook(nil)
	if !errors.Is(err, engine.ErrGrantedTooLate) {
		t.Fatalf("TryLock collected after its validity: %v; want ErrGrantedTooLate", err)
	}
	if n := countOf(v.values(key), val); n < 3 {
		t.Fatalf("the late grant's release took the retry's grant: %d of 3 masters hold it", n)
	}
}
