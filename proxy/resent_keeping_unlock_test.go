package proxy

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/proxy/internal/respserver"
	"github.com/redlock-dev/redlock/resp"
)

// TestResentKeepingUnlockOnlyWhileHeld: a nested unlock (count 2 → 1)
// answers 0, "still held" — a keeping, under the grant rule (c). The same
// request resent (Redisson resends on a lost reply) is answered from its
// latch without a second decrement (i): 0 again while the hold lasts, but
// not once its lease ended and another owner was granted the lock — the
// latch's 0 was answered then too, with no check (found by the review of
// the reply-expiry fix). RLock, the write lock, the fair lock.
func TestResentKeepingUnlockOnlyWhileHeld(t *testing.T) {
	e := startEnv(t, 3, nil)
	const owner, other = "owner-0123456789:7", "other-0123456789:1"
	for i, kd := range latchKinds(t, "300") {
		t.Run(kd.name, func(t *testing.T) {
			c := dialRaw(t, e.addr)
			k := fmt.Sprintf("resent-kept-%d", i)
			for range 2 {
				if r := c.cmd(kd.take(k, owner)...); r != "$-1\r\n" {
					t.Fatalf("taking %s: %q", k, r)
				}
			}
			req := kd.unlock(k, owner, "redisson_unlock_latch:{"+k+"}:0123456789abcdef0123456789abcdef")
			if r := c.cmd(req...); r != ":0\r\n" {
				t.Fatalf("nested unlock: %q, want :0", r)
			}
			if r := c.cmd(req...); r != ":0\r\n" {
				t.Fatalf("the nested unlock resent at once: %q, want :0 again (one decrement)", r)
			}
			deadline := time.Now().Add(5 * time.Second)
			for {
				if r := c.cmd(kd.take(k, other)...); r == "$-1\r\n" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the lease never ended")
				}
				time.Sleep(20 * time.Millisecond)
			}
			if r := c.cmd(req...); r == ":0\r\n" {
				t.Errorf("the nested unlock resent after its lease ended, another owner holding the lock: %q (\"still held\")", r)
			}
		})
	}
}

// TestResentKeepingUnlockPipelined: the same resent nested unlock, sent
// while the lease is valid but pipelined behind slower commands, whose
// replies come after the lease ended: answered as expired, as the first
// run's 0 would be (TestPipelinedGrantAnsweredWhileValid), not 0.
func TestResentKeepingUnlockPipelined(t *testing.T) {
	for _, m := range loopModes {
		t.Run(m.name, func(t *testing.T) {
			e := startEnv(t, 5, func(c *Config) {
				c.EventLoops = m.loops
				c.EngineConfig.MasterTimeout = 0
			})
			mastertest.RequireReal(t, e.set)
			ctx := context.Background()
			const owner = "owner-0123456789:7"
			kd := latchKinds(t, "300")[0] // RLock
			c := dialRaw(t, e.addr)
			for _, i := range []int{0, 1} {
				if err := e.masters[i].Set(ctx, "p:slow", "other-holder-0123456789", 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
			k := "resent-kept-pipelined"
			for range 2 {
				if r := c.cmd(kd.take(k, owner)...); r != "$-1\r\n" {
					t.Fatalf("taking: %q", r)
				}
			}
			req := kd.unlock(k, owner, "redisson_unlock_latch:{"+k+"}:0123456789abcdef0123456789abcdef")
			if r := c.cmd(req...); r != ":0\r\n" {
				t.Fatalf("nested unlock: %q", r)
			}
			ms := e.set.Masters()
			if err := ms[4].Pause(); err != nil {
				t.Fatal(err)
			}
			defer ms[4].Resume()
			// Slow commands: SETs of one key, 50 ms each, 500 ms in all:
			// longer than what is left of the 300 ms lease.
			t0 := time.Now()
			var slow []byte
			const n = 10
			for i := range n {
				slow = resp.AppendCommandStrings(slow, "SET", "p:slow", fmt.Sprintf("tok-slow-%d", i), "NX", "PX", "60000")
			}
			c.send(string(resp.AppendCommandStrings(slow, req...)))
			for range n {
				if got := c.read(); got != "$-1\r\n" {
					t.Fatalf("slow SET: %q", got)
				}
			}
			got := c.read()
			el := time.Since(t0)
			t.Logf("replay answered %q after %v", got, el)
			if got != "-"+respserver.MsgExpired+"\r\n" && el > 300*time.Millisecond {
				t.Errorf("the nested unlock's replay written %v after it was sent (lease 300 ms): %q, want expired", el, got)
			}
		})
	}
}
