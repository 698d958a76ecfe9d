package proxy

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/internal/test/check"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
)

// TestClientExtensionThroughProxy: a client's extension of a lock it holds
// — the compare-and-pexpire script, SET IFEQ — answers success and leaves
// the new TTL on the masters. The proxy extends through a lock attached to
// the client's token, which has no validity of its own in the engine;
// when the engine stopped raising the validity of a lock already past it
// (an ended lock stays ended), every such extension was answered "lost"
// while the masters applied it (found by the review of the fix, issue #46).
func TestClientExtensionThroughProxy(t *testing.T) {
	e := startEnv(t, 3, nil)
	mastertest.RequireReal(t, e.set)
	ctx := context.Background()
	key := "attached-extend"
	for _, m := range e.masters {
		if err := m.Set(ctx, key, "tok", 10*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
	}
	c := e.client(t)
	if got, err := c.Eval(ctx, scripts.Extend.Source(), []string{key}, "tok", "20000").Result(); err != nil || got != int64(1) {
		t.Fatalf("compare-and-pexpire of a held key = %v, %v; want 1", got, err)
	}
	if r, err := c.Do(ctx, "SET", key, "tok", "IFEQ", "tok", "PX", "30000").Result(); err != nil && err != redis.Nil || r != "OK" {
		t.Fatalf("SET IFEQ of a held key = %v, %v; want OK", r, err)
	}
	// Answered at a quorum: the last master may apply it a moment later.
	check.Eventually(t, 5*time.Second, "the SET IFEQ's 30 s TTL on every master", func() bool {
		for _, m := range e.masters {
			if m.PTTL(ctx, key).Val() <= 20*time.Second {
				return false
			}
		}
		return true
	})
}
