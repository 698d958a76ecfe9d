package proxy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/resp"
)

// TestOverloadBusy: pipelined commands beyond the admission limit wait in
// the proxy, not on the masters; one whose wait passes QueueTimeout is
// answered -BUSY naming the proxy's queue, and never reaches a master.
// The masters are stopped, so the admitted commands take the per-master
// timeout and nothing else can start before it.
func TestOverloadBusy(t *testing.T) {
	e := startEnv(t, 5, func(c *Config) { c.QueueTimeout = time.Millisecond })
	ms := e.set.Masters()
	const n = 200
	rc := stopAndPipeline(t, e, "busy:", n)
	var busy []int
	unavailable := 0
	for i := range n {
		r := rc.read()
		switch {
		case strings.HasPrefix(r, "-BUSY redlock proxy: overloaded: "):
			if !strings.Contains(r, "in the proxy's queue") || !strings.Contains(r, "the masters were not asked") {
				t.Errorf("reply %d: %q; want it to name the proxy's queue and say the masters were not asked", i, r)
			}
			busy = append(busy, i)
		case strings.Contains(r, "unavailable"):
			unavailable++
		default:
			t.Fatalf("reply %d: %q; want -BUSY or unavailable with every master stopped", i, r)
		}
	}
	// The limit starts at 64: the rest waited for the stopped masters'
	// timeout, far past the 1ms queue timeout.
	if len(busy) < n-64 || unavailable == 0 {
		t.Fatalf("%d BUSY, %d unavailable of %d; want at least %d BUSY (the start limit is 64) and some sent to the masters", len(busy), unavailable, n, n-64)
	}
	if got := e.srv.Stats().OverloadRefusals; got != uint64(len(busy)) {
		t.Errorf("Stats().OverloadRefusals = %d; want %d", got, len(busy))
	}
	if info := rc.cmd("INFO", "proxy"); !strings.Contains(info, fmt.Sprintf("overload_refusals:%d\r\n", len(busy))) {
		t.Errorf("INFO proxy lacks overload_refusals:%d", len(busy))
	}
	for _, m := range ms {
		m.Resume()
	}
	// What was sent to the stopped masters executes now (then its
	// cleanup); what was refused never reaches them.
	time.Sleep(300 * time.Millisecond)
	ctx := context.Background()
	for mi, c := range e.masters {
		for _, i := range busy {
			if n, err := c.Exists(ctx, fmt.Sprint("busy:", i)).Result(); err != nil || n != 0 {
				t.Fatalf("master %d: busy:%d exists (%d, %v): a refused command reached the masters", mi, i, n, err)
			}
		}
	}
}

// stopAndPipeline stops every master of e and pipelines n SET NX PX of
// keys prefix+i on one new connection, which it returns.
func stopAndPipeline(t *testing.T, e *env, prefix string, n int) *rawConn {
	t.Helper()
	for _, m := range e.set.Masters() {
		if err := m.Pause(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Resume() })
	}
	rc := dialRaw(t, e.addr)
	var req []byte
	for i := range n {
		req = resp.AppendCommandStrings(req, "SET", fmt.Sprint(prefix, i), "v", "NX", "PX", "30000")
	}
	rc.send(string(req))
	return rc
}

// TestLoopInFlightStarvation: MaxInFlight is shared by every
// client. A goroutine-path client (here one that subscribed and
// unsubscribed, which moves it off the loop) pipelining without pause
// waits for slots in the channel's queue; a loop client only polls for a
// free slot every millisecond, so the goroutine-path reader takes every
// freed slot first. The goroutine path (both clients on goroutines) is
// FIFO: the victim waits for about one command.
//
// Found by the event loop's first review (a helper's adversarial read of
// commit 34f6669): it failed on the loop before its fix.
func TestLoopInFlightStarvation(t *testing.T) {
	for _, m := range loopModes {
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

// TestOverloadBurstsNotRefused: short pipelined bursts separated by idle
// gaps, each answered far within the 1s QueueTimeout, are never refused
// -BUSY. (The admission once estimated waits from completions per
// wall-clock window, idle gaps included: the estimate fell to the average
// load, and bursts were refused as "would wait about 1s"; found by
// review.)
func TestOverloadBurstsNotRefused(t *testing.T) {
	e := startEnv(t, 5, nil)
	rc := dialRaw(t, e.addr)
	const n = 400
	total := 0
	for round := range 5 {
		var req []byte
		for i := range n {
			req = resp.AppendCommandStrings(req, "SET", fmt.Sprint("burst:", round, ":", i), "v", "NX", "PX", "30000")
		}
		t0 := time.Now()
		rc.send(string(req))
		busy, example := 0, ""
		for range n {
			r := rc.read()
			if strings.HasPrefix(r, "-BUSY") {
				busy++
				example = r
			}
		}
		el := time.Since(t0)
		total += busy
		t.Logf("round %d: burst of %d answered in %v, %d -BUSY %s", round, n, el, busy, strings.TrimSpace(example))
		time.Sleep(400 * time.Millisecond)
	}
	if total > 0 {
		t.Errorf("%d commands refused -BUSY although every burst was answered well within the 1s queue timeout", total)
	}
}

// TestQueuedNotSentAfterClose: SET NX PX commands waiting in the
// admission queue when Close begins never reach the masters (as runOne's
// commands send nothing once the server's context ended; found by
// review).
func TestQueuedNotSentAfterClose(t *testing.T) {
	e := startEnv(t, 5, func(c *Config) { c.QueueTimeout = 30 * time.Second })
	ms := e.set.Masters()
	const n = 200
	stopAndPipeline(t, e, "afterclose:", n)
	time.Sleep(50 * time.Millisecond) // 64 admitted (on the stopped masters), the rest queued
	closed := make(chan struct{})
	go func() { e.srv.Close(); close(closed) }()
	time.Sleep(20 * time.Millisecond) // Close began: the server's context is cancelled
	for _, m := range ms {
		m.Resume()
	}
	<-closed
	time.Sleep(100 * time.Millisecond)
	held := 0
	for i := 64; i < n; i++ {
		if e.holding(t, fmt.Sprint("afterclose:", i), "v") >= e.quorum() {
			held++
		}
	}
	if held > 0 {
		t.Errorf("%d commands that were queued when Close began were granted on a quorum of masters afterwards", held)
	}
}
