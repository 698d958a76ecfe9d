package proxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The event loop's review (a helper's adversarial read of commit
// 34f6669): each test runs the same scenario on the loop (EventLoops: 1)
// and on the goroutine path (EventLoops: -1), the reference behaviour.
// The ones named after a defect failed on the loop before its fix.

var reviewModes = []struct {
	name  string
	loops int
}{{"loop", 1}, {"goroutines", -1}}

// waitClosedRaw reads from nc until it is closed (true) or d passes (false).
func waitClosedRaw(nc net.Conn, d time.Duration) (closed bool, extra int) {
	nc.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 4096)
	for {
		n, err := nc.Read(buf)
		extra += n
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return false, extra
			}
			return true, extra
		}
	}
}

// sendEchos writes n pipelined ECHOs of 8000 bytes to nc from a goroutine
// (their replies fill a small receive buffer: the proxy's writes block),
// the write bounded by d.
func sendEchos(nc net.Conn, n int, d time.Duration) {
	arg := strings.Repeat("x", 8000)
	var req []byte
	for range n {
		req = append(req, "*2\r\n$4\r\nECHO\r\n$8000\r\n"...)
		req = append(req, arg...)
		req = append(req, "\r\n"...)
	}
	go func() {
		nc.SetWriteDeadline(time.Now().Add(d))
		nc.Write(req)
	}()
}

// procCPU is the process's CPU time so far.
func procCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestLoopSlowLoris: a client sends, in one write, commands that stop
// the loop's batch — MaxPipeline of them, or an AUTH (the next command is
// parsed within the new limits) — and the first bytes of one more, then
// nothing. RequestTimeout must close it: before its fix the loop kept
// such a partial request without its clock running, forever.
func TestLoopSlowLoris(t *testing.T) {
	const partial = "*2\r\n$3\r\nGET\r\n$3\r\nab"
	for _, tc := range []struct {
		name, pass, send string
		replies          []string
	}{
		{"after a full pipeline", "", strings.Repeat("PING\r\n", DefaultMaxPipeline) + partial, slices.Repeat([]string{"+PONG\r\n"}, DefaultMaxPipeline)},
		{"after AUTH", "pw", "AUTH pw\r\n" + partial, []string{"+OK\r\n"}},
	} {
		for _, m := range reviewModes {
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

// TestLoopPanicLosesEarlierReply: a panic while dispatching one
// command of a pipeline closes the connection, but the replies of the
// commands before it are still written first, in order.
func TestLoopPanicLosesEarlierReply(t *testing.T) {
	hook := func(where string, args [][]byte) {
		if where == "dispatch" && len(args) == 2 && string(args[1]) == "boom" {
			panic("review: test panic in dispatch")
		}
	}
	testHook.Store(&hook)
	defer testHook.Store(nil)
	for _, m := range reviewModes {
		t.Run(m.name, func(t *testing.T) {
			e := startEnv(t, 1, func(c *Config) { c.EventLoops = m.loops })
			a := dialRaw(t, e.addr)
			if got := a.cmd("PING"); got != "+PONG\r\n" {
				t.Fatalf("PING: %q", got)
			}
			a.send("PING first\r\nECHO boom\r\n")
			var got []string
			for {
				r := a.read()
				if r == "" {
					break
				}
				got = append(got, r)
			}
			want := []string{"$5\r\nfirst\r\n", "-ERR redlock proxy internal error; closing the connection\r\n"}
			if strings.Join(got, "|") != strings.Join(want, "|") {
				t.Fatalf("replies %q, want %q", got, want)
			}
		})
	}
}

// dialSmallRcv dials addr with a small receive buffer (set before the
// connection, so the window stays small).
func dialSmallRcv(t *testing.T, addr string, size int) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		rc.Control(func(fd uintptr) {
			syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, size)
		})
		return nil
	}}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return nc
}

// TestLoopIdleTimeoutDropsPendingReplies: a client pipelines more
// replies than the sockets buffer and reads them only after IdleTimeout.
// It sent requests, so it was not idle; the goroutine path writes every
// reply (its idle deadline is a read deadline: queued replies are still
// written before the connection closes).
func TestLoopIdleTimeoutDropsPendingReplies(t *testing.T) {
	const n = 1200
	for _, m := range reviewModes {
		t.Run(m.name, func(t *testing.T) {
			e := startEnv(t, 1, func(c *Config) {
				c.EventLoops = m.loops
				c.IdleTimeout = 500 * time.Millisecond
			})
			nc := dialSmallRcv(t, e.addr, 4096)
			sendEchos(nc, n, 10*time.Second)
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

// TestLoopIdleBuffersRetained: after a burst of pipelined replies,
// an idle connection should hold no write buffer (the goroutine path's
// writer gives its batch buffer back after each write). The loop keeps
// ls.out (and ls.in), outside the client memory accounting.
func TestLoopIdleBuffersRetained(t *testing.T) {
	if raceEnabled {
		t.Skip("reads the loop's client state from the test goroutine (after the loop went idle)")
	}
	e := startEnv(t, 1, func(c *Config) { c.EventLoops = 1 })
	const conns = 20
	var ncs []net.Conn
	arg := strings.Repeat("y", 500)
	for range conns {
		nc, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		ncs = append(ncs, nc)
		// ~56 KiB of replies in one batch, then the start of a 15 KiB command.
		req := strings.Repeat("ECHO "+arg+"\r\n", 110)
		req += "*2\r\n$4\r\nECHO\r\n$15000\r\n" + strings.Repeat("z", 14000)
		nc.Write([]byte(req))
		nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		want := 110 * len("$500\r\n"+arg+"\r\n")
		if _, err := io.ReadFull(nc, make([]byte, want)); err != nil {
			t.Fatal(err)
		}
		// Finish the command: its reply, then idle.
		nc.Write([]byte(strings.Repeat("z", 1000) + "\r\n"))
		if _, err := io.ReadFull(nc, make([]byte, len("$15000\r\n")+15000+2)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	var retained, held int64
	e.srv.mu.Lock()
	for c := range e.srv.conns {
		if c.nc == nil { // a loop's client (the loop is idle: nothing touches ls now)
			retained += int64(cap(c.ls.in))
			if c.ls.out != nil {
				retained += int64(cap(c.ls.out.B))
			}
		}
		held += c.held.Load()
	}
	e.srv.mu.Unlock()
	t.Logf("%d idle connections: %d bytes of loop buffers retained (%d per connection), held %d, server mem %d",
		conns, retained, retained/conns, held, e.srv.mem.Load())
	if retained/conns > 4<<10 {
		t.Fatalf("an idle loop connection retains %d bytes of buffers, unaccounted", retained/conns)
	}
}

// TestLoopInFlightStarvation: MaxInFlight is shared by every
// client. A goroutine-path client (here one that subscribed and
// unsubscribed, which moves it off the loop) pipelining without pause
// waits for slots in the channel's queue; a loop client only polls for a
// free slot every millisecond, so the goroutine-path reader takes every
// freed slot first. The goroutine path (both clients on goroutines) is
// FIFO: the victim waits for about one command.
func TestLoopInFlightStarvation(t *testing.T) {
	for _, m := range reviewModes {
		t.Run(m.name, func(t *testing.T) {
			e := startEnv(t, 1, func(c *Config) {
				c.EventLoops = m.loops
				c.MaxInFlight = 1
				c.QueueTimeout = 5 * time.Second
			})
			att := dialRaw(t, e.addr)
			if got := att.cmd("SUBSCRIBE", "redisson_lock__channel:{x}"); !strings.HasPrefix(got, "*3") {
				t.Fatalf("SUBSCRIBE: %q", got)
			}
			if got := att.cmd("UNSUBSCRIBE", "redisson_lock__channel:{x}"); !strings.HasPrefix(got, "*3") {
				t.Fatalf("UNSUBSCRIBE: %q", got)
			}
			stop := make(chan struct{})
			done := make(chan struct{}, 2)
			var batch []byte
			for i := range 200 {
				batch = append(batch, "GET st:"...)
				batch = append(batch, byte('a'+i%26), byte('a'+i/26))
				batch = append(batch, "\r\n"...)
			}
			go func() { // the attacker's writer
				defer func() { done <- struct{}{} }()
				for {
					select {
					case <-stop:
						return
					default:
					}
					att.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
					if _, err := att.nc.Write(batch); err != nil {
						return
					}
				}
			}()
			go func() { // the attacker's reader
				defer func() { done <- struct{}{} }()
				buf := make([]byte, 64<<10)
				for {
					att.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
					if _, err := att.nc.Read(buf); err != nil {
						return
					}
				}
			}()
			time.Sleep(200 * time.Millisecond)
			v := dialRaw(t, e.addr)
			var worst time.Duration
			for range 10 {
				start := time.Now()
				if got := v.cmd("GET", "st:victim"); got != "$-1\r\n" {
					t.Errorf("victim GET: %q after %v (no reply within the 5 s read deadline: starved)", got, time.Since(start).Round(time.Millisecond))
					break
				}
				worst = max(worst, time.Since(start))
				time.Sleep(50 * time.Millisecond)
			}
			close(stop)
			att.nc.Close()
			<-done
			<-done
			t.Logf("victim's worst GET latency: %v", worst)
			if worst > time.Second {
				t.Fatalf("victim starved: a GET waited %v for an in-flight slot", worst)
			}
		})
	}
}

// TestLoopMemoryBackToZero: hostile clients that pipeline large
// requests and vanish (RST) mid-flight, half-close, send protocol errors or
// move to goroutines leave no memory accounted once they are gone.
func TestLoopMemoryBackToZero(t *testing.T) {
	e := startEnv(t, 3, func(c *Config) { c.EventLoops = 1 })
	key := strings.Repeat("k", 15000)
	for i := range 30 {
		nc, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		var req []byte
		for j := range 40 {
			req = append(req, "*2\r\n$3\r\nGET\r\n$15002\r\n"...)
			req = append(req, key...)
			req = append(req, byte('a'+j%26), byte('a'+i%26))
			req = append(req, "\r\n"...)
		}
		switch i % 5 {
		case 1:
			req = append(req, "*1\r\n$x\r\n"...) // protocol error
		case 2:
			req = append(req, "SUBSCRIBE redisson_lock__channel:{a}\r\n"...)
		case 3:
			req = append(req, "*2\r\n$4\r\nECHO\r\n$30000\r\nabc"...) // moves (large), unfinished
		}
		nc.SetWriteDeadline(time.Now().Add(2 * time.Second))
		nc.Write(req)
		if i%2 == 0 {
			nc.(*net.TCPConn).SetLinger(0) // RST
			nc.Close()
		} else {
			nc.(*net.TCPConn).CloseWrite()
			nc.SetReadDeadline(time.Now().Add(5 * time.Second))
			io.Copy(io.Discard, nc)
			nc.Close()
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		e.srv.mu.Lock()
		n := len(e.srv.conns)
		e.srv.mu.Unlock()
		if n == 0 && e.srv.mem.Load() == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections, %d bytes of client memory still accounted", n, e.srv.mem.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLoopCloseBoundedNoLeak: Close with loop clients that never
// read, have commands in flight or partial requests returns within its
// bound and leaves no goroutine behind.
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

// TestLoopReparseAmplification: a command of 1000 small arguments sent in
// 7-byte writes costs the loop at most three times the goroutine path's
// CPU (process CPU time, the same bytes and write pattern): it parsed the
// command again from its start at every read before its frame scan
// (TestFrameScanTrickle counts the parses).
func TestLoopReparseAmplification(t *testing.T) {
	cmd := []byte("*1000\r\n")
	for range 1000 {
		cmd = append(cmd, "$1\r\nx\r\n"...)
	}
	res := map[string]time.Duration{}
	for _, m := range reviewModes {
		t.Run(m.name, func(t *testing.T) {
			e := startEnv(t, 1, func(c *Config) { c.EventLoops = m.loops })
			a := dialRaw(t, e.addr)
			if got := a.cmd("PING"); got != "+PONG\r\n" {
				t.Fatalf("PING: %q", got)
			}
			c0, w0 := procCPU(), time.Now()
			for range 1 {
				for i := 0; i < len(cmd); i += 7 {
					a.send(string(cmd[i:min(i+7, len(cmd))]))
					time.Sleep(30 * time.Microsecond) // one read per write
				}
				if got := a.read(); !strings.HasPrefix(got, "-ERR unknown") {
					t.Fatalf("reply: %q", got)
				}
			}
			res[m.name] = procCPU() - c0
			t.Logf("%s: %v CPU for 3 commands in %v", m.name, res[m.name].Round(time.Millisecond), time.Since(w0).Round(time.Millisecond))
		})
	}
	if res["loop"] > 3*res["goroutines"] {
		t.Fatalf("the loop spent %v of CPU, the goroutine path %v, for the same bytes", res["loop"], res["goroutines"])
	}
}

// TestLoopShutdownWritesInFlight: Shutdown lets the commands a
// client already sent finish and their replies be written.
func TestLoopShutdownWritesInFlight(t *testing.T) {
	for _, m := range reviewModes {
		t.Run(m.name, func(t *testing.T) {
			e := startEnv(t, 3, func(c *Config) { c.EventLoops = m.loops })
			a := dialRaw(t, e.addr)
			var req string
			for i := range 100 {
				req += "SET sd:" + m.name + string(rune('a'+i%26)) + string(rune('a'+i/26)) + " v NX PX 10000\r\n"
			}
			a.send(req)
			time.Sleep(time.Millisecond)
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

// TestLoopCommandsCountedOnce: the Stats().Commands counter counts
// each command read once; a SUBSCRIBE that moves its connection to the
// goroutine path is counted by the loop and again by the goroutine path.
func TestLoopCommandsCountedOnce(t *testing.T) {
	for _, m := range reviewModes {
		t.Run(m.name, func(t *testing.T) {
			e := startEnv(t, 1, func(c *Config) { c.EventLoops = m.loops })
			a := dialRaw(t, e.addr)
			before := e.srv.commands.Load()
			if got := a.cmd("SUBSCRIBE", "redisson_lock__channel:{a}"); !strings.HasPrefix(got, "*3") {
				t.Fatalf("SUBSCRIBE: %q", got)
			}
			if d := e.srv.commands.Load() - before; d != 1 {
				t.Fatalf("one SUBSCRIBE counted %d times", d)
			}
		})
	}
}

// TestLoopStats: a plain-TCP client is counted on the loop
// (Stats.LoopClients, INFO loop_clients) until it subscribes, which hands
// it to goroutines (LoopMoves), or until it closes.
func TestLoopStats(t *testing.T) {
	if !loopsSupported {
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
