package proxy

// Pipelines on the event loop answered as on the goroutine path (the
// reference; see loopModes): every command sent before a half-close, an
// inline line at the request limit, scripted hostile inputs.

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// TestLoopEOFAfterStoppedBatch: a client pipelines more commands
// than MaxPipeline and half-closes (shutdown(SHUT_WR)), as redis-cli
// --pipe or `cat cmds | nc` do. Every command it sent must be answered
// before the connection closes (the goroutine path's reader parses what it
// buffered until io.EOF).
//
// Found by the event loop's second review (a helper's adversarial read of
// its fixed code): it failed on the loop before its fix.
func TestLoopEOFAfterStoppedBatch(t *testing.T) {
	const n = 40
	for _, m := range loopModes {
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

// TestLoopInlineAtLimitStuck: with MaxRequestBytes under 16 KiB, the
// inline limit is MaxRequestBytes; the reader accepts a line of that many
// bytes plus its CRLF. A line whose last byte before the LF arrived first
// (limit+1 bytes) is one the frame scan says "may end" (it is longer than
// the limit) while the reader says "more": the loop parses the leftover in
// place forever and never reads the socket again.
//
// Found by the event loop's third review: it failed on the loop before its
// fix.
func TestLoopInlineAtLimitStuck(t *testing.T) {
	const limit = 4096
	line := "ECHO " + strings.Repeat("x", limit-5) // limit bytes
	for _, m := range loopModes {
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

// TestLoopScriptsCompare: scripted hostile inputs, each in one write,
// answered the same on both paths (replies, and whether it closed).
//
// From the event loop's third review, where it held on the loop; it stays
// as the comparison it is.
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
	for _, m := range loopModes {
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
