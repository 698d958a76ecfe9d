package proxy

// Shutdown and Close with event-loop clients, each scenario also on the
// goroutine path (the reference; see loopModes): the replies of commands a
// client already sent are written, a client that does not read does not
// hold Shutdown up, and Close returns within its bound leaving no
// goroutine.

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/proxy/internal/respserver"
)

// TestLoopShutdownWritesInFlight: Shutdown lets the commands a
// client already sent finish and their replies be written.
//
// From the event loop's first review (a helper's adversarial read of
// commit 34f6669), which ran each scenario on the loop and on the
// goroutine path.
func TestLoopShutdownWritesInFlight(t *testing.T) {
	for _, m := range loopModes {
		t.Run(m.name, func(t *testing.T) {
			e := startEnv(t, 3, func(c *Config) { c.EventLoops = m.loops })
			a := dialRaw(t, e.addr)
			var req string
			for i := range 100 {
				req += "SET sd:" + m.name + string(rune('a'+i%26)) + string(rune('a'+i/26)) + " v NX PX 10000\r\n"
			}
			before := e.srv.Stats().Commands
			a.send(req)
			// Shutdown answers the commands the proxy has read: wait until
			// it read all 100 (a fixed 1 ms was too short on a busy machine:
			// "0 replies of 100", issue #43).
			for deadline := time.Now().Add(10 * time.Second); e.srv.Stats().Commands < before+100; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the proxy read %d of the 100 commands in 10 s", e.srv.Stats().Commands-before)
				}
			}
			ctx, cancel := contextWithTimeout(5 * time.Second)
			defer cancel()
			errc := make(chan error, 1)
			go func() { errc <- e.srv.Shutdown(ctx) }()
			n := 0
			for {
				r := a.read()
				if r == "" {
					break
				}
				if r != "+OK\r\n" {
					t.Fatalf("reply %d: %q", n, r)
				}
				n++
			}
			if err := <-errc; err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			if n != 100 {
				t.Fatalf("%d replies of 100", n)
			}
		})
	}
}

func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// TestLoopCloseBoundedNoLeak: Close with loop clients that never
// read, have commands in flight or partial requests returns within its
// bound and leaves no goroutine behind.
//
// From the event loop's first review (a helper's adversarial read of
// commit 34f6669), which ran each scenario on the loop and on the
// goroutine path.
func TestLoopCloseBoundedNoLeak(t *testing.T) {
	set := func() int { return runtime.NumGoroutine() }
	before := set()
	func() {
		e := startEnv(t, 3, func(c *Config) { c.EventLoops = 2; c.MaxInFlight = 2 })
		for i := range 6 {
			nc := dialSmallRcv(t, e.addr, 4096)
			arg := strings.Repeat("x", 8000)
			var req []byte
			for range 800 {
				req = append(req, "*2\r\n$4\r\nECHO\r\n$8000\r\n"...)
				req = append(req, arg...)
				req = append(req, "\r\n"...)
			}
			for j := range 50 {
				req = append(req, "SET cl:"...)
				req = append(req, byte('a'+i), byte('a'+j%26), byte('a'+j/26))
				req = append(req, " v NX PX 10000\r\n"...)
			}
			req = append(req, "*2\r\n$3\r\nGET"...)
			go func() {
				nc.SetWriteDeadline(time.Now().Add(3 * time.Second))
				nc.Write(req)
			}()
		}
		time.Sleep(300 * time.Millisecond)
		start := time.Now()
		e.srv.Close()
		t.Logf("Close took %v", time.Since(start).Round(time.Millisecond))
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("Close took %v", d)
		}
	}()
	deadline := time.Now().Add(3 * time.Second)
	for set() > before+5 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := set(); n > before+5 {
		t.Errorf("goroutines: %d before, %d after Close", before, n)
	}
}

// TestLoopShutdownBlockedClient: a client pipelines requests whose
// replies fill its socket buffers and never reads them; Shutdown begins.
// The goroutine path's writer gives up at its write deadline
// (writeTimeout+respserver.WriteSlack, "a client that does not read for this long is
// closed") and Shutdown returns. The loop's scan only touches every client
// once Shutdown began (its first case), so the blocked-output deadline
// never fires and Shutdown waits for its context.
//
// Found by the event loop's third review: it failed on the loop before its
// fix.
func TestLoopShutdownBlockedClient(t *testing.T) {
	for _, m := range loopModes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			e := startEnv(t, 1, func(c *Config) {
				c.EventLoops = m.loops
				c.writeTimeout = time.Second // the default, 10 s, made the test 11 s long
			})
			req := echoRequests(2000)
			nc := dialSmallRcv(t, e.addr, 4096)
			sendEchos(nc, req, 9*time.Second)
			time.Sleep(500 * time.Millisecond) // the proxy's writes to it block
			ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
			defer cancel()
			start := time.Now()
			err := e.srv.Shutdown(ctx)
			t.Logf("Shutdown returned %v after %v", err, time.Since(start).Round(time.Millisecond))
			if err != nil {
				t.Fatalf("Shutdown: %v after %v (a client that does not read is closed after %v)",
					err, time.Since(start).Round(time.Millisecond), e.srv.cfg.writeTimeout+respserver.WriteSlack)
			}
		})
	}
}
