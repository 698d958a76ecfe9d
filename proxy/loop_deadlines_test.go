package proxy

// RequestTimeout and IdleTimeout on the event loop, each scenario also on
// the goroutine path (the reference; see loopModes): a partial request is
// closed at RequestTimeout, the clocks run only while the client would be
// read, and a client closed by either is still written the replies it is
// due.

import (
	"bufio"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/proxy/internal/respserver"
)

// TestLoopSlowLoris: a client sends, in one write, commands that stop
// the loop's batch — MaxPipeline of them, or an AUTH (the next command is
// parsed within the new limits) — and the first bytes of one more, then
// nothing. RequestTimeout must close it: before its fix the loop kept
// such a partial request without its clock running, forever.
//
// Found by the event loop's first review (a helper's adversarial read of
// commit 34f6669): it failed on the loop before its fix.
func TestLoopSlowLoris(t *testing.T) {
	const partial = "*2\r\n$3\r\nGET\r\n$3\r\nab"
	for _, tc := range []struct {
		name, pass, send string
		replies          []string
	}{
		{"after a full pipeline", "", strings.Repeat("PING\r\n", DefaultMaxPipeline) + partial, slices.Repeat([]string{"+PONG\r\n"}, DefaultMaxPipeline)},
		{"after AUTH", "pw", "AUTH pw\r\n" + partial, []string{"+OK\r\n"}},
	} {
		for _, m := range loopModes {
			t.Run(tc.name+"/"+m.name, func(t *testing.T) {
				e := startEnv(t, 1, func(c *Config) {
					c.EventLoops = m.loops
					c.RequirePass = tc.pass
					c.RequestTimeout = 300 * time.Millisecond
				})
				a := dialRaw(t, e.addr)
				a.send(tc.send)
				for i, want := range tc.replies {
					if got := a.read(); got != want {
						t.Fatalf("reply %d: %q, want %q", i, got, want)
					}
				}
				start := time.Now()
				if closed, _ := waitClosedRaw(a.nc, 3*time.Second); !closed {
					t.Fatalf("a partial request: still open %v later (RequestTimeout 300ms)", time.Since(start).Round(time.Millisecond))
				}
				t.Logf("closed %v after the last reply", time.Since(start).Round(time.Millisecond))
			})
		}
	}
}

// TestLoopRequestTimeoutWhilePaused: a client pipelines requests
// whose replies are larger than its socket buffers, all of it sent at
// once, and reads the replies only after RequestTimeout. Every request
// arrived whole at once; RequestTimeout ("not complete this long after
// its first byte arrived") must not close it. The loop's partial-request
// clock keeps running while it does not read the client (its replies
// are not written), with the rest of the request waiting in the socket.
//
// Found by the event loop's second review (a helper's adversarial read of
// its fixed code): it failed on the loop before its fix.
func TestLoopRequestTimeoutWhilePaused(t *testing.T) {
	const n = 1200
	for _, m := range loopModes {
		t.Run(m.name, func(t *testing.T) {
			e := startEnv(t, 1, func(c *Config) {
				c.EventLoops = m.loops
				c.RequestTimeout = 300 * time.Millisecond
			})
			req := echoRequests(n)
			nc := dialSmallRcv(t, e.addr, 4096)
			sendEchos(nc, req, 10*time.Second)
			time.Sleep(1200 * time.Millisecond) // reads nothing for 4 RequestTimeouts
			nc.SetReadDeadline(time.Now().Add(8 * time.Second))
			br := bufio.NewReaderSize(nc, 64<<10)
			want := "$8000\r\n" + strings.Repeat("x", 8000) + "\r\n"
			buf := make([]byte, len(want))
			for got := 0; got < n; got++ {
				if _, err := io.ReadFull(br, buf); err != nil {
					t.Fatalf("%d of %d replies, then %v", got, n, err)
				}
				if string(buf) != want {
					t.Fatalf("reply %d: %q...", got, buf[:20])
				}
			}
		})
	}
}

// TestLoopRequestTimeoutDropsEarlierReply: a client sends a
// command, then the first bytes of another, and nothing more; the first
// command's reply comes after RequestTimeout. The goroutine path closes
// the connection at RequestTimeout as a read error: its writer still
// writes the replies of the commands read before (as for IdleTimeout,
// fixed by the first review). The loop marks the client dead and drops
// the reply.
//
// Found by the event loop's second review (a helper's adversarial read of
// its fixed code): it failed on the loop before its fix.
func TestLoopRequestTimeoutDropsEarlierReply(t *testing.T) {
	for _, m := range loopModes {
		t.Run(m.name, func(t *testing.T) {
			e := startEnv(t, 1, func(c *Config) {
				c.EventLoops = m.loops
				c.RequestTimeout = 200 * time.Millisecond
			})
			a := dialRaw(t, e.addr)
			slowAsync(t, 600*time.Millisecond)
			a.send("GET rt:a\r\n*2\r\n$3\r\nGET\r\n$3\r\nab")
			got, closed := readAllReplies(a, 5*time.Second)
			if !closed {
				t.Fatalf("still open: a slow loris")
			}
			if len(got) != 1 || got[0] != "$-1\r\n" {
				t.Fatalf("replies %q before the close, want the GET's", got)
			}
		})
	}
}

// TestLoopIdleTimeoutDropsPendingReplies: a client pipelines more
// replies than the sockets buffer and reads them only after IdleTimeout.
// It sent requests, so it was not idle; the goroutine path writes every
// reply (its idle deadline is a read deadline: queued replies are still
// written before the connection closes).
//
// Found by the event loop's first review (a helper's adversarial read of
// commit 34f6669): it failed on the loop before its fix.
func TestLoopIdleTimeoutDropsPendingReplies(t *testing.T) {
	const n = 1200
	for _, m := range loopModes {
		t.Run(m.name, func(t *testing.T) {
			e := startEnv(t, 1, func(c *Config) {
				c.EventLoops = m.loops
				c.IdleTimeout = 500 * time.Millisecond
			})
			req := echoRequests(n)
			nc := dialSmallRcv(t, e.addr, 4096)
			sendEchos(nc, req, 10*time.Second)
			time.Sleep(1500 * time.Millisecond) // does not read for 3 IdleTimeouts
			nc.SetReadDeadline(time.Now().Add(8 * time.Second))
			br := bufio.NewReaderSize(nc, 64<<10)
			want := "$8000\r\n" + strings.Repeat("x", 8000) + "\r\n"
			got := 0
			buf := make([]byte, len(want))
			for got < n {
				if _, err := io.ReadFull(br, buf); err != nil {
					t.Fatalf("%d of %d replies, then %v", got, n, err)
				}
				if string(buf) != want {
					t.Fatalf("reply %d: %q...", got, buf[:20])
				}
				got++
			}
		})
	}
}

// TestLoopIdleAfterSlowCommand: a client waits for each reply,
// and one command takes longer than IdleTimeout; it sends its next
// command shortly after that reply. It was never idle for IdleTimeout
// (the goroutine path's reader waits for a request, with its IdleTimeout,
// only once it wrote the reply). The loop counts idleness from the
// request's arrival and closes the client as soon as the reply is written.
//
// The loop only: on goroutines the idle clock runs from the reply only
// when the command ran on the reader (direct), which a loaded host does
// not always choose; the loop never counts a command's time in flight.
//
// Found by the event loop's second review (a helper's adversarial read of
// its fixed code): it failed on the loop before its fix.
func TestLoopIdleAfterSlowCommand(t *testing.T) {
	if !respserver.LoopsSupported {
		t.Skip("no event loop here")
	}
	for _, m := range loopModes[:1] {
		t.Run(m.name, func(t *testing.T) {
			e := startEnv(t, 1, func(c *Config) {
				c.EventLoops = m.loops
				c.IdleTimeout = 300 * time.Millisecond
			})
			a := dialRaw(t, e.addr)
			if got := a.cmd("PING"); got != "+PONG\r\n" {
				t.Fatalf("PING: %q", got)
			}
			slowAsync(t, 500*time.Millisecond)
			if got := a.cmd("GET", "idle:a"); got != "$-1\r\n" {
				t.Fatalf("GET: %q", got)
			}
			respserver.SetTestHook(nil)
			time.Sleep(60 * time.Millisecond) // well within IdleTimeout
			if got := a.cmd("PING"); got != "+PONG\r\n" {
				t.Fatalf("PING %v after the slow command's reply: %q (closed as idle)", 60*time.Millisecond, got)
			}
		})
	}
}
