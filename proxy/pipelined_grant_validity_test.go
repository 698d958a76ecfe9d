package proxy

import (
	"context"
	"fmt"
	"testing"

	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/proxy/internal/redisson"
	"github.com/redlock-dev/redlock/proxy/internal/respserver"
	"github.com/redlock-dev/redlock/resp"
)

// TestPipelinedGrantAnsweredWhileValid: property (c) for a grant whose
// reply waits for an earlier, slower command of its connection (replies go
// out in request order; commands on other keys run at once). A SET NX PX,
// an extension script and a Redisson tryLock, each pipelined behind SETs
// that wait 200 ms for a paused master, with a 100 ms TTL: granted
// at once, but their validity ended before their reply could be written —
// they are answered as expired, not +OK / 1 / nil (a second client could
// be granted the key in between: rueidis's pipelined goroutines met it;
// found by the retry-nemesis review). With a 10 s TTL the same grants are
// answered as usual. On the event loop and on goroutines.
func TestPipelinedGrantAnsweredWhileValid(t *testing.T) {
	var tryLock *redisson.Script
	for i := range redisson.Table {
		if rs := &redisson.Table[i]; rs.Kind == redisson.KindTryLock && rs.Keys == 1 && tryLock == nil {
			tryLock = rs
		}
	}
	expired := "-" + respserver.MsgExpired + "\r\n"
	for _, tc := range []struct {
		name    string
		pre     func(ttl string) []string // sent before it, after the slow commands (nil: none)
		cmd     func(ttl string) []string
		granted string
	}{
		{"SET NX PX", nil, func(ttl string) []string {
			return []string{"SET", "p:set:" + ttl, "tok-set-0123456789ab", "NX", "PX", ttl}
		}, "+OK\r\n"},
		{"extension script", nil, func(ttl string) []string {
			return []string{"EVAL", scripts.Extend.Source(), "1", "p:ext:" + ttl, "tok-ext-0123456789ab", ttl}
		}, ":1\r\n"},
		{"extension script run after a read of its key", func(ttl string) []string { return []string{"PTTL", "p:ext:" + ttl} }, func(ttl string) []string {
			return []string{"EVAL", scripts.Extend.Source(), "1", "p:ext:" + ttl, "tok-ext-0123456789ab", ttl}
		}, ":1\r\n"},
		{"Redisson tryLock", nil, func(ttl string) []string {
			return []string{"EVALSHA", tryLock.SHA, "1", "p:r:" + ttl, ttl, "owner-0123456789:1"}
		}, "$-1\r\n"},
	} {
		for _, m := range loopModes {
			t.Run(tc.name+"/"+m.name, func(t *testing.T) {
				// The slow commands wait 200 ms for a paused master; a
				// grant for 100 ms is decided at its quorum (Redisson's
				// broadcast: at the paused master's 5 ms timeout). A fresh
				// proxy each: a master paused for long is found stalled.
				e := startEnv(t, 5, func(c *Config) {
					c.EventLoops = m.loops
					c.EngineConfig.MasterTimeout = 0 // a lock's own: ttl/100 in [5, 50] ms
				})
				mastertest.RequireReal(t, e.set)
				ctx := context.Background()
				c := dialRaw(t, e.addr)
				for _, ttl := range []string{"100", "10000"} {
					if got := c.cmd("SET", "p:ext:"+ttl, "tok-ext-0123456789ab", "NX", "PX", "20000"); got != "+OK\r\n" {
						t.Fatalf("the extension's lock: %q", got)
					}
				}
				for _, i := range []int{0, 1} { // the slow key: held by another holder on two masters
					if err := e.masters[i].Set(ctx, "p:slow", "other-holder-0123456789", 0).Err(); err != nil {
						t.Fatal(err)
					}
				}
				ms := e.set.Masters()
				if err := ms[4].Pause(); err != nil {
					t.Fatal(err)
				}
				defer ms[4].Resume()
				for _, ttl := range []string{"100", "10000"} {
					// Four SETs of one key, each waiting 50 ms (the per-master
					// timeout's cap) for the paused master, one after
					// another: 200 ms.
					var slow []byte
					for i := range 4 {
						slow = resp.AppendCommandStrings(slow, "SET", "p:slow", fmt.Sprintf("tok-slow-%d-%s", i, ttl), "NX", "PX", "60000")
					}
					if tc.pre != nil {
						slow = resp.AppendCommandStrings(slow, tc.pre(ttl)...)
					}
					c.send(string(resp.AppendCommandStrings(slow, tc.cmd(ttl)...)))
					for range 4 {
						if got := c.read(); got != "$-1\r\n" {
							t.Fatalf("the slow SET: %q", got)
						}
					}
					if tc.pre != nil {
						c.read()
					}
					got, want := c.read(), tc.granted
					if ttl == "100" {
						want = expired
					}
					if got != want {
						t.Errorf("a %s ms grant behind slower commands: %q, want %q", ttl, got, want)
					}
					if n := e.srv.Stats().ExpiredReplies; n != 1 { // the 100 ms grant's, then no other
						t.Errorf("after the %s ms grant: Stats.ExpiredReplies %d, want 1", ttl, n)
					}
				}
			})
		}
	}
}
