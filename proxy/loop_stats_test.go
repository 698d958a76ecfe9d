package proxy

// The event loop's counters: Stats (Commands, LoopClients, LoopMoves) and
// INFO, on the loop and on the goroutine path.

import (
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/proxy/internal/respserver"
)

// TestLoopCommandsCountedOnce: the Stats().Commands counter counts
// each command read once; a SUBSCRIBE that moves its connection to the
// goroutine path is counted by the loop and again by the goroutine path.
//
// Found by the event loop's first review (a helper's adversarial read of
// commit 34f6669): it failed on the loop before its fix.
func TestLoopCommandsCountedOnce(t *testing.T) {
	for _, m := range loopModes {
		t.Run(m.name, func(t *testing.T) {
			e := startEnv(t, 1, func(c *Config) { c.EventLoops = m.loops })
			a := dialRaw(t, e.addr)
			before := e.srv.rs.Stats().Commands
			if got := a.cmd("SUBSCRIBE", "redisson_lock__channel:{a}"); !strings.HasPrefix(got, "*3") {
				t.Fatalf("SUBSCRIBE: %q", got)
			}
			if d := e.srv.rs.Stats().Commands - before; d != 1 {
				t.Fatalf("one SUBSCRIBE counted %d times", d)
			}
		})
	}
}

// TestLoopStats: a plain-TCP client is counted on the loop
// (Stats.LoopClients, INFO loop_clients) until it subscribes, which hands
// it to goroutines (LoopMoves), or until it closes.
func TestLoopStats(t *testing.T) {
	if !respserver.LoopsSupported {
		t.Skip("no event loop here")
	}
	e := startEnv(t, 1, func(c *Config) { c.EventLoops = 1 })
	waitStats := func(what string, ok func(Stats) bool) {
		t.Helper()
		for end := time.Now().Add(5 * time.Second); !ok(e.srv.Stats()); {
			if time.Now().After(end) {
				t.Fatalf("%s: stats %+v", what, e.srv.Stats())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	a, b := dialRaw(t, e.addr), dialRaw(t, e.addr)
	a.cmd("PING")
	b.cmd("PING")
	waitStats("two loop clients", func(s Stats) bool { return s.LoopClients == 2 && s.LoopMoves == 0 })
	if info := a.cmd("INFO", "proxy"); !strings.Contains(info, "event_loops:1\r\n") || !strings.Contains(info, "loop_clients:2\r\n") {
		t.Fatalf("INFO proxy: %q", info)
	}
	if got := b.cmd("SUBSCRIBE", "redisson_lock__channel:{a}"); !strings.HasPrefix(got, "*3") {
		t.Fatalf("SUBSCRIBE: %q", got)
	}
	waitStats("one moved", func(s Stats) bool { return s.LoopClients == 1 && s.LoopMoves == 1 && s.ConnectedClients == 2 })
	a.nc.Close()
	b.nc.Close()
	waitStats("none left", func(s Stats) bool { return s.LoopClients == 0 && s.ConnectedClients == 0 })
}
