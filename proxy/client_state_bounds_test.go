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
func TestIdleOrderMapCharged(t *testing.T) {
	for _, m := range loopModes {
		t.Run(m.name, func(t *testing.T) {
			e := startEnv(t, 3, func(c *Config) { c.EventLoops = m.loops })
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
			c := dialRaw(t, e.addr)
			c.send(string(pipe))
			for range 4 {
				if got := c.read(); got != ":0\r\n" {
					t.Fatalf("EXISTS: %q", got)
				}
			}
			// 4000 keys; the pipeline can have made them all in flight at once.
			idle := e.srv.rs.MemCharged() - base
			if idle < 900*48 || idle > 4096*48 {
				t.Fatalf("an idle connection's ordering map charged %d bytes; want its entries beyond 64 at 48 bytes", idle)
			}
			// The next command finds the connection settled — on goroutines,
			// once the writer counted the replies written, which may come
			// after the client read them: a command or two more then.
			check.Eventually(t, 5*time.Second, "the map dropped at a command on the settled connection", func() bool {
				if got := c.cmd("EXISTS", "k"); got != ":0\r\n" {
					t.Fatalf("EXISTS k: %q", got)
				}
				return e.srv.rs.MemCharged() == base
			})
		})
	}
}
