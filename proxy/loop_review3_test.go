package proxy

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// The event loop's third review: each test runs its scenario on the loop
// and on the goroutine path (the reference behaviour). The first three
// failed on the loop before their fixes; the last two held, and stay as
// the comparisons they are.

// TestLoopShutdownBlockedClient: a client pipelines requests whose
// replies fill its socket buffers and never reads them; Shutdown begins.
// The goroutine path's writer gives up at its write deadline
// (writeTimeout+writeSlack, "a client that does not read for this long is
// closed") and Shutdown returns. The loop's scan only touches every client
// once Shutdown began (its first case), so the blocked-output deadline
// never fires and Shutdown waits for its context.
func TestLoopShutdownBlockedClient(t *testing.T) {
	for _, m := range reviewModes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			e := startEnv(t, 1, func(c *Config) {
				c.EventLoops = m.loops
				c.writeTimeout = time.Second // the default, 10 s, made the test 11 s long
			})
			nc := dialSmallRcv(t, e.addr, 4096)
			sendEchos(nc, 2000, 9*time.Second)
			time.Sleep(500 * time.Millisecond) // the proxy's writes to it block
			ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
			defer cancel()
			start := time.Now()
			err := e.srv.Shutdown(ctx)
			t.Logf("Shutdown returned %v after %v", err, time.Since(start).Round(time.Millisecond))
			if err != nil {
				t.Fatalf("Shutdown: %v after %v (a client that does not read is closed after %v)",
					err, time.Since(start).Round(time.Millisecond), e.srv.cfg.writeTimeout+writeSlack)
			}
		})
	}
}

// TestLoopInlineAtLimitStuck: with MaxRequestBytes under 16 KiB, the
// inline limit is MaxRequestBytes; the reader accepts a line of that many
// bytes plus its CRLF. A line whose last byte before the LF arrived first
// (limit+1 bytes) is one the frame scan says "may end" (it is longer than
// the limit) while the reader says "more": the loop parses the leftover in
// place forever and never reads the socket again.
func TestLoopInlineAtLimitStuck(t *testing.T) {
	const limit = 4096
	line := "ECHO " + strings.Repeat("x", limit-5) // limit bytes
	for _, m := range reviewModes {
		t.Run("LF later/"+m.name, func(t *testing.T) {
			e := startEnv(t, 1, func(c *Config) {
				c.EventLoops = m.loops
				c.MaxRequestBytes = limit
				c.RequestTimeout = 2 * time.Second
			})
			a := dialRaw(t, e.addr)
			a.send(line + "\r")
			time.Sleep(200 * time.Millisecond)
			a.send("\n")
			got, closed := readAllReplies(a, time.Second)
			want := fmt.Sprintf("$%d\r\n%s\r\n", limit-5, line[5:])
			if len(got) != 1 || got[0] != want {
				t.Fatalf("replies %d (closed %v), want the ECHO's (the goroutine path answers)", len(got), closed)
			}
		})
		t.Run("Shutdown/"+m.name, func(t *testing.T) {
			e := startEnv(t, 1, func(c *Config) {
				c.EventLoops = m.loops
				c.MaxRequestBytes = limit
			})
			a := dialRaw(t, e.addr)
			a.send(line + "\r")
			time.Sleep(200 * time.Millisecond)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			start := time.Now()
			if err := e.srv.Shutdown(ctx); err != nil {
				t.Fatalf("Shutdown with a client sending an inline line of the limit: %v after %v", err, time.Since(start).Round(time.Millisecond))
			}
		})
		t.Run("half-close/"+m.name, func(t *testing.T) { // held: the socket's EOF is never read, RequestTimeout closes it
			e := startEnv(t, 1, func(c *Config) {
				c.EventLoops = m.loops
				c.MaxRequestBytes = limit
				c.RequestTimeout = 300 * time.Millisecond
			})
			a := dialRaw(t, e.addr)
			a.send(line + "\r")
			time.Sleep(100 * time.Millisecond)
			a.nc.(*net.TCPConn).CloseWrite()
			if closed, _ := waitClosedRaw(a.nc, 2*time.Second); !closed {
				t.Fatalf("a half-closed client with an unfinished inline line: still open 2s later (RequestTimeout 300ms)")
			}
		})
	}
}

// TestLoopStalledOrderPollCPU: clients whose ordering map is full (4096
// keys of commands in flight, here held by a slow master) wait for room.
// The goroutine path's reader blocks on the oldest command; the loop polls
// every millisecond, sweeping the whole map (4096 keys) each time, for
// every such client. CPU of the process over an idle second, both paths.
func TestLoopStalledOrderPollCPU(t *testing.T) {
	const clients = 6
	res := map[string]time.Duration{}
	for _, m := range reviewModes {
		t.Run(m.name, func(t *testing.T) {
			e := startEnv(t, 1, func(c *Config) { c.EventLoops = m.loops })
			release := time.Now().Add(3 * time.Second)
			hook := func(where string, _ [][]byte) {
				if where == "async" {
					time.Sleep(time.Until(release)) // a slow master, until release
				}
			}
			testHook.Store(&hook)
			defer testHook.Store(nil)
			var conns []*rawConn
			for i := range clients {
				a := dialRaw(t, e.addr)
				conns = append(conns, a)
				var req []byte
				for j := range 5 {
					req = append(req, "EXISTS"...)
					for k := range 1000 {
						req = append(req, fmt.Sprintf(" c%d:%d:%d", i, j, k)...)
					}
					req = append(req, "\r\n"...)
				}
				a.send(string(req))
			}
			time.Sleep(300 * time.Millisecond)
			c0 := procCPU()
			time.Sleep(time.Second)
			res[m.name] = procCPU() - c0
			t.Logf("%s: %v of CPU in an idle second with %d clients waiting for ordering room", m.name, res[m.name].Round(time.Millisecond), clients)
			for _, a := range conns {
				for j := range 5 {
					if got := a.read(); got != ":0\r\n" {
						t.Fatalf("EXISTS %d: %q", j, got)
					}
				}
			}
		})
	}
	if res["loop"] > 4*res["goroutines"]+50*time.Millisecond {
		t.Fatalf("the loop spent %v of CPU in an idle second, the goroutine path %v", res["loop"], res["goroutines"])
	}
}

// TestLoopScriptsCompare: scripted hostile inputs, each in one write,
// answered the same on both paths (replies, and whether it closed).
func TestLoopScriptsCompare(t *testing.T) {
	eleven := "EXISTS k1 k2 k3 k4 k5 k6 k7 k8 k9 k10 k11\r\n"
	scripts := []struct{ name, send string }{
		{"auth then 11 args", "AUTH pw\r\n" + eleven},
		{"reset then 11 args", "AUTH pw\r\nRESET\r\n" + eleven},
		{"hello auth then 11 args", "HELLO 2 AUTH default pw\r\n" + eleven},
		{"quit mid-batch", "AUTH pw\r\nGET a\r\nGET a2\r\nQUIT\r\nGET b\r\n"},
		{"proto error after stop", "AUTH pw\r\nGET a\r\nGET b\r\nGET c\r\nGET d\r\n*1\r\n$x\r\n"},
		{"unauth pings", strings.Repeat("PING\r\n", 600)},
		{"auth fail then 11 args", "AUTH nope\r\n" + eleven},
		{"subscribe mid-batch", "AUTH pw\r\nGET a\r\nGET b\r\nGET c\r\nSUBSCRIBE ch\r\nPING\r\nQUIT\r\n"},
	}
	res := map[string][]string{}
	for _, m := range reviewModes {
		t.Run(m.name, func(t *testing.T) {
			e := startEnv(t, 1, func(c *Config) {
				c.EventLoops = m.loops
				c.RequirePass = "pw"
				c.MaxPipeline = 2
			})
			for _, sc := range scripts {
				a := dialRaw(t, e.addr)
				a.send(sc.send)
				got, closed := readAllReplies(a, 700*time.Millisecond)
				sum := fmt.Sprintf("%d replies, closed %v: %q", len(got), closed, got)
				if len(got) > 8 {
					sum = fmt.Sprintf("%d replies, closed %v: first %q last %q", len(got), closed, got[0], got[len(got)-1])
				}
				res[m.name+"/"+sc.name] = []string{sum}
				a.nc.Close()
			}
		})
	}
	for _, sc := range scripts {
		l, g := res["loop/"+sc.name], res["goroutines/"+sc.name]
		if fmt.Sprint(l) != fmt.Sprint(g) {
			t.Errorf("%s:\n loop:       %s\n goroutines: %s", sc.name, l, g)
		} else {
			t.Logf("%s: same: %s", sc.name, l)
		}
	}
}

// TestLoopMemoryBackToZeroEveryEnd: clients holding large pipelined requests
// while their commands are in flight (a slow master) end every way the
// loop closes a client — QUIT, RequestTimeout, RST, an ordering stall then
// RST, a protocol error, a half-close, IdleTimeout, Shutdown — and the
// client memory goes back to zero.
func TestLoopMemoryBackToZeroEveryEnd(t *testing.T) {
	for _, m := range reviewModes {
		t.Run(m.name, func(t *testing.T) {
			e := startEnv(t, 1, func(c *Config) {
				c.EventLoops = m.loops
				c.RequestTimeout = 200 * time.Millisecond
				c.IdleTimeout = 700 * time.Millisecond
			})
			slowAsync(t, 100*time.Millisecond)
			key := strings.Repeat("k", 15000)
			for i := range 16 {
				nc, err := net.Dial("tcp", e.addr)
				if err != nil {
					t.Fatal(err)
				}
				defer nc.Close()
				var req []byte
				for j := range 10 {
					req = append(req, "*2\r\n$3\r\nGET\r\n$15002\r\n"...)
					req = append(req, key...)
					req = append(req, byte('a'+j%26), byte('a'+i%26))
					req = append(req, "\r\n"...)
				}
				switch i % 8 {
				case 0:
					req = append(req, "QUIT\r\nGET x\r\n"...)
				case 1:
					req = append(req, "*2\r\n$3\r\nGET\r\n$3\r\nab"...)
				case 3:
					for j := range 5 {
						req = append(req, "EXISTS"...)
						for k := range 1000 {
							req = append(req, fmt.Sprintf(" m%d:%d:%d", i, j, k)...)
						}
						req = append(req, "\r\n"...)
					}
				case 4:
					req = append(req, "GET a\r\n*1\r\n$x\r\n"...)
				}
				nc.SetWriteDeadline(time.Now().Add(2 * time.Second))
				nc.Write(req)
				switch i % 8 {
				case 2, 3:
					nc.(*net.TCPConn).SetLinger(0)
					nc.Close()
				case 5:
					nc.(*net.TCPConn).CloseWrite()
				}
			}
			time.Sleep(30 * time.Millisecond)
			t.Logf("%d bytes accounted mid-flight", e.srv.mem.Load())
			for end := time.Now().Add(6 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				e.srv.mu.Lock()
				n := len(e.srv.conns)
				e.srv.mu.Unlock()
				if n == 0 && e.srv.mem.Load() == 0 {
					break
				}
				if time.Now().After(end) {
					t.Fatalf("%d connections, %d bytes of client memory still accounted", n, e.srv.mem.Load())
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
			defer cancel()
			start := time.Now()
			err := e.srv.Shutdown(ctx)
			t.Logf("Shutdown: %v after %v", err, time.Since(start).Round(time.Millisecond))
			if err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			e.srv.mu.Lock()
			n := len(e.srv.conns)
			e.srv.mu.Unlock()
			if n != 0 || e.srv.mem.Load() != 0 {
				t.Fatalf("%d connections, %d bytes of client memory still accounted", n, e.srv.mem.Load())
			}
		})
	}
}
