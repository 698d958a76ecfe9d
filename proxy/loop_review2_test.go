package proxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/resp"
)

// The event loop's second review (a helper's adversarial read of its
// fixed code): each test runs its scenario on the loop and on the
// goroutine path (the reference), and failed on the loop before its fix.

// readAllReplies reads RESP replies from a until it is closed or d passes.
func readAllReplies(a *rawConn, d time.Duration) (got []string, closed bool) {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		a.nc.SetReadDeadline(end)
		r, err := a.rd.ReadReply()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return got, false
			}
			return got, true
		}
		got = append(got, string(resp.AppendReply(nil, r)))
	}
	return got, false
}

// TestLoopEOFAfterStoppedBatch: a client pipelines more commands
// than MaxPipeline and half-closes (shutdown(SHUT_WR)), as redis-cli
// --pipe or `cat cmds | nc` do. Every command it sent must be answered
// before the connection closes (the goroutine path's reader parses what it
// buffered until io.EOF).
func TestLoopEOFAfterStoppedBatch(t *testing.T) {
	const n = 40
	for _, m := range reviewModes {
		t.Run(m.name, func(t *testing.T) {
			e := startEnv(t, 1, func(c *Config) {
				c.EventLoops = m.loops
				c.MaxPipeline = 2
			})
			a := dialRaw(t, e.addr)
			var req string
			for i := range n {
				req += fmt.Sprintf("GET eof:%d\r\n", i)
			}
			a.send(req)
			a.nc.(*net.TCPConn).CloseWrite()
			got, closed := readAllReplies(a, 5*time.Second)
			if !closed {
				t.Fatalf("not closed after %d replies", len(got))
			}
			if len(got) != n {
				t.Fatalf("%d replies of %d before the connection closed", len(got), n)
			}
		})
	}
}

// TestLoopRequestTimeoutWhilePaused: a client pipelines requests
// whose replies are larger than its socket buffers, all of it sent at
// once, and reads the replies only after RequestTimeout. Every request
// arrived whole at once; RequestTimeout ("not complete this long after
// its first byte arrived") must not close it. The loop's partial-request
// clock keeps running while it does not read the client (its replies
// are not written), with the rest of the request waiting in the socket.
func TestLoopRequestTimeoutWhilePaused(t *testing.T) {
	const n = 1200
	for _, m := range reviewModes {
		t.Run(m.name, func(t *testing.T) {
			e := startEnv(t, 1, func(c *Config) {
				c.EventLoops = m.loops
				c.RequestTimeout = 300 * time.Millisecond
			})
			nc := dialSmallRcv(t, e.addr, 4096)
			sendEchos(nc, n, 10*time.Second)
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

// slowAsync makes every asynchronous command take d more (the review's
// stand-in for a slow master); it is undone when t ends.
func slowAsync(t *testing.T, d time.Duration) {
	hook := func(where string, _ [][]byte) {
		if where == "async" {
			time.Sleep(d)
		}
	}
	testHook.Store(&hook)
	t.Cleanup(func() { testHook.Store(nil) })
}

// TestLoopRequestTimeoutDropsEarlierReply: a client sends a
// command, then the first bytes of another, and nothing more; the first
// command's reply comes after RequestTimeout. The goroutine path closes
// the connection at RequestTimeout as a read error: its writer still
// writes the replies of the commands read before (as for IdleTimeout,
// fixed by the first review). The loop marks the client dead and drops
// the reply.
func TestLoopRequestTimeoutDropsEarlierReply(t *testing.T) {
	for _, m := range reviewModes {
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
func TestLoopIdleAfterSlowCommand(t *testing.T) {
	if !loopsSupported {
		t.Skip("no event loop here")
	}
	for _, m := range reviewModes[:1] {
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
			testHook.Store(nil)
			time.Sleep(60 * time.Millisecond) // well within IdleTimeout
			if got := a.cmd("PING"); got != "+PONG\r\n" {
				t.Fatalf("PING %v after the slow command's reply: %q (closed as idle)", 60*time.Millisecond, got)
			}
		})
	}
}

// TestLoopIdleBufferAfterStop: a batch that stops (here at
// MaxPipeline) exactly at the end of the bytes read leaves ls.in an empty
// slice that keeps its capacity: after a large request that arrived in
// parts, an idle connection keeps up to 16 KiB, outside the client memory
// accounting (the first review's fix released it only on the other path).
func TestLoopIdleBufferAfterStop(t *testing.T) {
	if raceEnabled {
		t.Skip("reads the loop's client state from the test goroutine (after the loop went idle)")
	}
	e := startEnv(t, 1, func(c *Config) { c.EventLoops = 1; c.MaxPipeline = 1 })
	const conns = 20
	key := strings.Repeat("k", 15000)
	for i := range conns {
		a := dialRaw(t, e.addr)
		req := fmt.Sprintf("*2\r\n$3\r\nGET\r\n$%d\r\n%s%02d\r\n", len(key)+2, key, i)
		a.send(req[:14000])
		time.Sleep(20 * time.Millisecond)
		a.send(req[14000:])
		if got := a.read(); got != "$-1\r\n" {
			t.Fatalf("GET: %q", got)
		}
	}
	time.Sleep(100 * time.Millisecond)
	var retained int64
	e.srv.mu.Lock()
	for c := range e.srv.conns {
		if c.nc == nil {
			retained += int64(cap(c.ls.in))
			if c.ls.out != nil {
				retained += int64(cap(c.ls.out.B))
			}
		}
	}
	e.srv.mu.Unlock()
	t.Logf("%d idle connections: %d bytes of loop buffers retained", conns, retained)
	if retained/conns > 4<<10 {
		t.Fatalf("an idle loop connection retains %d bytes of buffers, unaccounted", retained/conns)
	}
}

// TestLoopStopAmplification: with MaxPipeline 1, a client that
// pipelines PINGs stops the loop's batch at every command: each stop
// copies what is left of the 16 KiB read twice (into the scratch buffer
// and back into ls.in), parses its first command again (hasCommand) and
// writes one reply per write(2). The same bytes should cost the loop at
// most three times the goroutine path's CPU.
func TestLoopStopAmplification(t *testing.T) {
	const n = 60000
	req := strings.Repeat("PING\r\n", n)
	res := map[string]time.Duration{}
	for _, m := range reviewModes {
		t.Run(m.name, func(t *testing.T) {
			e := startEnv(t, 1, func(c *Config) { c.EventLoops = m.loops; c.MaxPipeline = 1 })
			a := dialRaw(t, e.addr)
			if got := a.cmd("PING"); got != "+PONG\r\n" {
				t.Fatalf("PING: %q", got)
			}
			c0, w0 := procCPU(), time.Now()
			done := make(chan int64, 1)
			want := int64(n * len("+PONG\r\n"))
			go func() {
				a.nc.SetReadDeadline(time.Now().Add(15 * time.Second))
				got, _ := io.CopyN(io.Discard, a.nc, want)
				done <- got
			}()
			a.nc.SetWriteDeadline(time.Now().Add(15 * time.Second))
			a.send(req)
			if got := <-done; got != want {
				t.Fatalf("%d reply bytes of %d", got, want)
			}
			res[m.name] = procCPU() - c0
			t.Logf("%s: %v CPU in %v", m.name, res[m.name].Round(time.Millisecond), time.Since(w0).Round(time.Millisecond))
		})
	}
	if res["loop"] > 3*res["goroutines"] {
		t.Fatalf("the loop spent %v of CPU, the goroutine path %v, for the same bytes", res["loop"], res["goroutines"])
	}
}
