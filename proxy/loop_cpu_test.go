package proxy

// The event loop's CPU time against the goroutine path's for the same
// bytes (see loopModes): a command trickling in, batches stopped at every
// command, clients waiting for ordering room.

import (
	"fmt"
	"io"
	"math"
	"strings"

	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/proccpu"
	"github.com/redlock-dev/redlock/proxy/internal/respserver"
)

// procCPU is the process's CPU time so far.
func procCPU() time.Duration {
	t, _ := proccpu.Self()
	return t.Total()
}

// cpuReps is how many times the amplification tests run their bytes per
// path: they compare the least CPU of each (another test's goroutines
// winding down, the GC or the race detector only add to a run).
const cpuReps = 3

// leastCPU runs f reps times and returns the least process CPU time one
// run took.
func leastCPU(reps int, f func()) time.Duration {
	least := time.Duration(math.MaxInt64)
	for range reps {
		c0 := procCPU()
		f()
		least = min(least, procCPU()-c0)
	}
	return least
}

// TestLoopReparseAmplification: a command of 1000 small arguments sent in
// 7-byte writes costs the loop at most three times the goroutine path's
// CPU (process CPU time, the same bytes and write pattern): it parsed the
// command again from its start at every read before its frame scan
// (TestFrameScanTrickle counts the parses).
//
// Found by the event loop's first review (a helper's adversarial read of
// commit 34f6669): it failed on the loop before its fix.
func TestLoopReparseAmplification(t *testing.T) {
	cmd := []byte("*1000\r\n")
	for range 1000 {
		cmd = append(cmd, "$1\r\nx\r\n"...)
	}
	res := map[string]time.Duration{}
	for _, m := range loopModes {
		t.Run(m.name, func(t *testing.T) {
			e := startEnv(t, 1, func(c *Config) { c.EventLoops = m.loops })
			a := dialRaw(t, e.addr)
			if got := a.cmd("PING"); got != "+PONG\r\n" {
				t.Fatalf("PING: %q", got)
			}
			w0 := time.Now()
			res[m.name] = leastCPU(cpuReps, func() {
				for i := 0; i < len(cmd); i += 7 {
					a.send(string(cmd[i:min(i+7, len(cmd))]))
					time.Sleep(30 * time.Microsecond) // one read per write
				}
				if got := a.read(); !strings.HasPrefix(got, "-ERR unknown") {
					t.Fatalf("reply: %q", got)
				}
			})
			t.Logf("%s: %v CPU for a command (least of %d) in %v", m.name, res[m.name].Round(time.Millisecond), cpuReps, time.Since(w0).Round(time.Millisecond))
		})
	}
	if res["loop"] > 3*res["goroutines"] {
		t.Fatalf("the loop spent %v of CPU, the goroutine path %v, for the same bytes", res["loop"], res["goroutines"])
	}
}

// TestLoopStopAmplification: with MaxPipeline 1, a client that
// pipelines PINGs stops the loop's batch at every command: each stop
// copies what is left of the 16 KiB read twice (into the scratch buffer
// and back into ls.in), parses its first command again (hasCommand) and
// writes one reply per write(2). The same bytes should cost the loop at
// most three times the goroutine path's CPU.
//
// Found by the event loop's second review (a helper's adversarial read of
// its fixed code): it failed on the loop before its fix.
func TestLoopStopAmplification(t *testing.T) {
	const n = 60000
	req := strings.Repeat("PING\r\n", n)
	res := map[string]time.Duration{}
	for _, m := range loopModes {
		t.Run(m.name, func(t *testing.T) {
			e := startEnv(t, 1, func(c *Config) { c.EventLoops = m.loops; c.MaxPipeline = 1 })
			a := dialRaw(t, e.addr)
			if got := a.cmd("PING"); got != "+PONG\r\n" {
				t.Fatalf("PING: %q", got)
			}
			w0 := time.Now()
			res[m.name] = leastCPU(cpuReps, func() {
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
			})
			t.Logf("%s: %v CPU (least of %d) in %v", m.name, res[m.name].Round(time.Millisecond), cpuReps, time.Since(w0).Round(time.Millisecond))
		})
	}
	if res["loop"] > 3*res["goroutines"] {
		t.Fatalf("the loop spent %v of CPU, the goroutine path %v, for the same bytes", res["loop"], res["goroutines"])
	}
}

// TestLoopStalledOrderPollCPU: clients whose ordering map is full (4096
// keys of commands in flight, here held by a slow master) wait for room.
// The goroutine path's reader blocks on the oldest command; the loop polls
// every millisecond, sweeping the whole map (4096 keys) each time, for
// every such client. CPU of the process over an idle second, both paths.
//
// Found by the event loop's third review: it failed on the loop before its
// fix.
func TestLoopStalledOrderPollCPU(t *testing.T) {
	const clients = 6
	res := map[string]time.Duration{}
	for _, m := range loopModes {
		t.Run(m.name, func(t *testing.T) {
			e := startEnv(t, 1, func(c *Config) { c.EventLoops = m.loops })
			release := time.Now().Add(3 * time.Second)
			hook := func(where string, _ [][]byte) {
				if where == "async" {
					time.Sleep(time.Until(release)) // a slow master, until release
				}
			}
			respserver.SetTestHook(hook)
			defer respserver.SetTestHook(nil)
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
