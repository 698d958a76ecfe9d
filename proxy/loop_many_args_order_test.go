package proxy

import (
	"strings"
	"testing"
	"time"
)

// TestLoopManyArgsFirstCommand (review of b4f29c4): with
// --max-args above the ordering bound (maxTrackedKeys, 4096), a command
// of more than 4096 arguments that fits the loop's scratch (an inline
// command: two bytes an argument) is answered on the event loop as on
// goroutines. Since b4f29c4 the loop's dispatch checks the bound for
// every command (tracked()+n, where before it did only once the
// connection's ordering map existed): orderRoom(n) can never be true for
// n > 4096, the command is stalled (stallCmd) for ever, nothing brings
// the connection back, and even after the client closes its socket the
// connection stays counted (the loop never reads the EOF of a stalled
// connection). Before b4f29c4 the same stall hit only a connection that
// had sent a keyed command before (case afterKeyed, which fails at
// fe9b73d too). Run alone:
//
//	go test -run TestLoopManyArgsFirstCommand -count=1 ./proxy
func TestLoopManyArgsFirstCommand(t *testing.T) {
	set := startEnv(t, 3, nil).set // masters, shared by the subtests
	cases := []struct {
		name, before, cmd, want string
	}{
		// A regression of b4f29c4 (passes at fe9b73d):
		{"first/exists", "", "EXISTS" + strings.Repeat(" k", 4100), ":0\r\n"},
		{"first/keyless", "", "ECHO" + strings.Repeat(" x", 4100), "-ERR wrong number of arguments for 'echo' command\r\n"},
		// The same stall before b4f29c4 too (fails at fe9b73d as well):
		// the connection sent a keyed command before.
		{"afterKeyed/exists", "GET k", "EXISTS" + strings.Repeat(" k", 4100), ":0\r\n"},
	}
	for _, m := range loopModes {
		for _, tc := range cases {
			t.Run(m.name+"/"+tc.name, func(t *testing.T) {
				e := startEnvOn(t, set, func(c *Config) {
					c.EventLoops = m.loops
					c.MaxArgs = 5000
				})
				c := dialRaw(t, e.addr)
				if tc.before != "" {
					c.send(tc.before + "\r\n")
					c.read()
				}
				// Inline: two bytes an argument, within the loop's scratch.
				c.send(tc.cmd + "\r\n")
				if got := c.read(); got != tc.want {
					t.Errorf("a %d-argument command: reply %q, want %q", strings.Count(tc.cmd, " ")+1, got, tc.want)
				}
				c.nc.Close()
				deadline := time.Now().Add(3 * time.Second)
				for e.srv.Stats().ConnectedClients != 0 {
					if time.Now().After(deadline) {
						t.Fatalf("%d client connections still open 3 s after the client closed its socket", e.srv.Stats().ConnectedClients)
					}
					time.Sleep(10 * time.Millisecond)
				}
			})
		}
	}
}
