package proxy

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/test/check"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/resp"
)

// TestClientNameBounded: a client's name is kept for its connection's
// life, outside what a client is charged for: CLIENT SETNAME and HELLO …
// SETNAME refuse one over 256 bytes, or with spaces or special characters
// (HELLO did not check them). Before, each connection kept a name of up
// to --max-request-bytes (1 MiB), uncharged: 40 connections held 35 MiB
// against a 4 MiB bound (found by the review of issue #46).
func TestClientNameBounded(t *testing.T) {
	for _, m := range loopModes {
		t.Run(m.name, func(t *testing.T) {
			e := startEnv(t, 3, func(c *Config) { c.EventLoops = m.loops })
			mastertest.RequireReal(t, e.set)
			c := dialRaw(t, e.addr)
			long := strings.Repeat("n", 257)
			for _, cmd := range [][]string{{"CLIENT", "SETNAME", long}, {"HELLO", "2", "SETNAME", long}, {"HELLO", "2", "SETNAME", "two words"}} {
				if got := c.cmd(cmd...); !strings.HasPrefix(got, "-ERR") {
					t.Fatalf("%s %s %.20s…: %.80q, want refused", cmd[0], cmd[1], cmd[len(cmd)-1], got)
				}
			}
			if got := c.cmd("CLIENT", "GETNAME"); got != "$-1\r\n" {
				t.Fatalf("a refused name was kept: %.80q", got)
			}
			ok := strings.Repeat("n", 256)
			if got := c.cmd("HELLO", "2", "SETNAME", ok); !strings.HasPrefix(got, "*14") {
				t.Fatalf("HELLO with a 256-byte name: %.80q", got)
			}
			if got := c.cmd("CLIENT", "GETNAME"); got != "$256\r\n"+ok+"\r\n" {
				t.Fatalf("CLIENT GETNAME: %.80q", got)
			}
		})
	}
}

// TestIdleOrderMapCharged: a connection that had thousands of keys in
// flight (four pipelined EXISTS of 1000 keys) keeps its ordering map's
// tables until its next command: they are charged to --max-client-memory
// meanwhile, and given back when it settles or closes. Before, an idle
// connection kept about 170 KiB, uncharged (found by the review of issue
// #46).
//
// The map is given back on the next command whichever way the connection
// serves it. CI's red run of 2026-11-29: a command that came while the
// pipeline's replies were still being written found the connection
// unsettled and kept the map; every command after it ran directly on the
// reader (a client waiting for each reply), which never looked at the
// map, so it stayed charged for the connection's life. The masters are
// paused here so that a command surely comes while the pipeline is in
// flight, as it did there by chance.
func TestIdleOrderMapCharged(t *testing.T) {
	for _, m := range loopModes {
		t.Run(m.name, func(t *testing.T) {
			e := startEnv(t, 3, func(c *Config) {
				c.EventLoops = m.loops
				c.EngineConfig.MasterTimeout = 10 * time.Second // paused below, for a moment
			})
			mastertest.RequireReal(t, e.set)
			var pipe []byte
			for b := range 4 {
				args := []string{"EXISTS"}
				for i := range 1000 {
					args = append(args, fmt.Sprintf("k%d-%d", b, i))
				}
				pipe = append(pipe, resp.AppendCommandStrings(nil, args...)...)
			}
			base := e.srv.rs.MemCharged()
			commands := e.srv.rs.Stats().Commands
			c := dialRaw(t, e.addr)
			for _, m := range e.set.Masters() {
				if err := m.Pause(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { m.Resume() })
			}
			c.send(string(pipe))
			check.Eventually(t, 10*time.Second, "the pipeline read", func() bool { return e.srv.rs.Stats().Commands == commands+4 })
			// One more command, alone, while the pipeline waits for the
			// masters: it finds the connection unsettled.
			c.send(string(resp.AppendCommandStrings(nil, "EXISTS", "k")))
			check.Eventually(t, 10*time.Second, "the lone command read", func() bool { return e.srv.rs.Stats().Commands == commands+5 })
			for _, m := range e.set.Masters() {
				if err := m.Resume(); err != nil {
					t.Fatal(err)
				}
			}
			for range 5 {
				if got := c.read(); got != ":0\r\n" {
					t.Fatalf("EXISTS: %q", got)
				}
			}
			// 4000 keys; the pipeline can have made them all in flight at once.
			idle := e.srv.rs.MemCharged() - base
			if idle < 900*48 || idle > 4096*48 {
				t.Fatalf("an idle connection's ordering map charged %d bytes; want its entries beyond 64 at 48 bytes", idle)
			}
			// On goroutines: every reply counted written by the writer, then
			// one command, which the reader runs itself. (ConnStates reads a
			// loop's buffers unsynchronised: not called while one runs.)
			if m.loops < 0 {
				check.Eventually(t, 10*time.Second, "every reply written", func() bool {
					for _, st := range e.srv.rs.ConnStates() {
						if st.Unwritten != 0 {
							return false
						}
					}
					return true
				})
			}
			if got := c.cmd("EXISTS", "k"); got != ":0\r\n" {
				t.Fatalf("EXISTS k: %q", got)
			}
			// (Its reply's bytes are given back just after they are written.)
			deadline := time.Now().Add(5 * time.Second)
			for e.srv.rs.MemCharged() != base {
				if time.Now().After(deadline) {
					t.Fatalf("still charged %d bytes after the command on the settled connection (%+v)", e.srv.rs.MemCharged()-base, e.srv.rs.ConnStates())
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
}
