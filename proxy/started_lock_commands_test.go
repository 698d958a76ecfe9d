package proxy

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/internal/test/check"
	"github.com/redlock-dev/redlock/resp"
)

// TestStartedLockCommands: SET NX PX, REDLOCK.LOCK and the engine's
// release and extension scripts answer alike whether they start where the
// masters' answers complete them (respserver.AsyncCommand's Start: a
// pipelined command with no earlier one on its key in flight, on the loop
// and on goroutines) or run after an earlier command on their key (Run,
// on a worker): the replies, an extension's invalid TTL (answered by
// runLib), a fenced token, and what the refusal log tells the release
// counters (a release of a refused value is a cleanup, not a lost lock).
func TestStartedLockCommands(t *testing.T) {
	for _, m := range loopModes {
		t.Run(m.name, func(t *testing.T) {
			e := startEnv(t, 3, func(c *Config) { c.EventLoops = m.loops })
			c := dialRaw(t, e.addr)
			release, extend := scripts.Release.SHA(), scripts.Extend.SHA()
			// Load the scripts on the proxy's view (EVALSHA of a
			// recognised script is served without a SCRIPT LOAD).
			rel := func(k, v string) []string { return []string{"EVALSHA", release, "1", k, v} }
			ext := func(k, v, ms string) []string { return []string{"EVALSHA", extend, "1", k, v, ms} }
			// pipe sends cmd with a PING behind it in one write (so that on
			// goroutines it is not run by the reader itself) and returns
			// cmd's reply.
			pipe := func(cmd []string) string {
				t.Helper()
				c.send(string(resp.AppendCommandStrings(nil, cmd...)) + string(resp.AppendCommandStrings(nil, "PING")))
				got := c.read()
				if p := c.read(); p != "+PONG\r\n" {
					t.Fatalf("%q: the PING behind it: %q", cmd, p)
				}
				return got
			}
			checkReply(t, pipe([]string{"SET", "st:a", "tok", "NX", "PX", "10000"}), "+OK\r\n")
			checkReply(t, pipe([]string{"SET", "st:a", "other", "NX", "PX", "10000"}), "$-1\r\n")
			checkReply(t, pipe(rel("st:a", "other")), ":0\r\n") // the refused value's cleanup
			checkReply(t, pipe(ext("st:a", "tok", "10000")), ":1\r\n")
			checkReply(t, pipe(ext("st:a", "tok", "0")), "-ERR redlock proxy: plain compare-and-pexpire (engine): TTL argument must be a positive integer (ms)\r\n")
			checkReply(t, pipe(ext("st:a", "tok", "x")), "-ERR redlock proxy: plain compare-and-pexpire (engine): TTL argument must be a positive integer (ms)\r\n")
			checkReply(t, pipe(rel("st:a", "tok")), ":1\r\n")
			checkReply(t, pipe([]string{"REDLOCK.LOCK", "st:f", "tok", "10000"}), ":*")
			checkReply(t, pipe(rel("st:f", "tok")), ":1\r\n")

			// One key, pipelined: each waits for the one before (Run).
			var batch []byte
			for _, cmd := range [][]string{
				{"SET", "st:b", "t1", "NX", "PX", "10000"}, rel("st:b", "t1"),
				{"SET", "st:b", "t2", "NX", "PX", "10000"}, {"SET", "st:b", "t3", "NX", "PX", "10000"},
				ext("st:b", "t2", "20000"), ext("st:b", "t2", "-5"), rel("st:b", "t3"), rel("st:b", "t2"),
			} {
				batch = resp.AppendCommandStrings(batch, cmd...)
			}
			c.send(string(batch))
			for i, want := range []string{"+OK\r\n", ":1\r\n", "+OK\r\n", "$-1\r\n", ":1\r\n", "-ERR redlock proxy: plain compare-and-pexpire (engine): TTL argument must be a positive integer (ms)\r\n", ":0\r\n", ":1\r\n"} {
				if got := c.read(); got != want {
					t.Fatalf("pipelined reply %d: %q, want %q", i, got, want)
				}
			}
			// A release answers at a quorum: the last master's may follow.
			for _, mc := range e.masters {
				check.Eventually(t, 5*time.Second, fmt.Sprintf("master %v: none of the keys left", mc), func() bool {
					n, err := mc.Exists(t.Context(), "st:a", "st:b", "st:f").Result()
					return err == nil && n == 0
				})
			}
			info := c.cmd("INFO", "proxy")
			for name, want := range map[string]string{
				"acquisitions_acquired": "4", "acquisitions_taken": "2",
				"releases_released": "4", "releases_cleanup": "2", "releases_lost": "0",
				"extensions_extended": "2", "locks_lost": "0",
			} {
				if !strings.Contains(info, "\r\n"+name+":"+want+"\r\n") {
					t.Errorf("INFO %s, want %s:\n%s", name, want, info)
				}
			}
		})
	}
}
