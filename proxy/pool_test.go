package proxy

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/test/check"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/proxy/internal/lockcmds"
	"github.com/redlock-dev/redlock/resp"
)

// pipelineCycles sends n acquire+release pairs on keys prefix:0..keys-1
// in one write and checks every reply: each SET must find its key free
// (the release before it ran first) and each release must find its token.
func pipelineCycles(t *testing.T, addr, prefix string, n, keys int) {
	c := dialRaw(t, addr)
	var b []byte
	for i := range n {
		k, tok := fmt.Sprintf("%s:%d", prefix, i%keys), fmt.Sprintf("t%d", i)
		b = resp.AppendCommandStrings(b, "SET", k, tok, "NX", "PX", "10000")
		b = resp.AppendCommandStrings(b, "EVAL", lockcmds.LibTable[0].Source, "1", k, tok)
	}
	c.send(string(b))
	for i := range n {
		if got := c.read(); got != "+OK\r\n" {
			t.Errorf("%s: SET %d: %q", prefix, i, got)
			return
		}
		if got := c.read(); got != ":1\r\n" {
			t.Errorf("%s: release %d: %q", prefix, i, got)
			return
		}
	}
}

// TestPoolFullKeepsOrder: with one or two in-flight slots (the pool full
// nearly all the time), pipelined commands that wait for earlier ones on
// their keys neither deadlock nor run out of order, on several
// connections at once.
func TestPoolFullKeepsOrder(t *testing.T) {
	set := mastertest.Start(t, 3)
	for _, slots := range []int{1, 2} {
		t.Run(fmt.Sprint(slots), func(t *testing.T) {
			e := startEnvOn(t, set, func(c *Config) { c.MaxInFlight = slots })
			var wg sync.WaitGroup
			for conn := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					pipelineCycles(t, e.addr, fmt.Sprintf("pf%d:%d", slots, conn), 60, 3)
				}()
			}
			wg.Wait()
		})
	}
}

// TestCloseWithQueuedWork: Close while commands are queued behind a full
// pool and behind earlier commands on their keys returns, and leaves no
// goroutine behind (no pool worker, no command).
func TestCloseWithQueuedWork(t *testing.T) {
	set := mastertest.Start(t, 3)
	before := runtime.NumGoroutine()
	e := startEnvOn(t, set, func(c *Config) { c.MaxInFlight = 1 })
	for conn := range 8 {
		c := dialRaw(t, e.addr)
		var b []byte
		for i := range 200 {
			b = resp.AppendCommandStrings(b, "SET", fmt.Sprintf("cq:%d:%d", conn, i%4), "tok", "NX", "PX", "10000")
		}
		c.send(string(b))
	}
	time.Sleep(20 * time.Millisecond) // read and queued, mostly not run
	done := make(chan struct{})
	go func() { e.srv.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		buf := make([]byte, 1<<20)
		t.Fatalf("Close did not return:\n%s", buf[:runtime.Stack(buf, true)])
	}
	for _, m := range e.masters {
		m.Close()
	}
	e.masters = nil
	check.NoLeak(t, before, 10)
}

// TestDirectAndPipelined: a client that waits for each reply (served on
// the reader) and one that pipelines (served on the pool) on one server
// see the same answers, interleaved on the same keys.
func TestDirectAndPipelined(t *testing.T) {
	e := startEnv(t, 3, nil)
	c := dialRaw(t, e.addr)
	for i := range 20 {
		k, tok := fmt.Sprintf("dp:%d", i%2), fmt.Sprintf("t%d", i)
		if got := c.cmd("SET", k, tok, "NX", "PX", "10000"); got != "+OK\r\n" {
			t.Fatalf("SET %d: %q", i, got)
		}
		if got := c.cmd("GET", k); got != fmt.Sprintf("$%d\r\n%s\r\n", len(tok), tok) {
			t.Fatalf("GET %d: %q", i, got)
		}
		if got := c.cmd("PING"); got != "+PONG\r\n" {
			t.Fatalf("PING %d: %q", i, got)
		}
		if got := c.cmd("EVAL", lockcmds.LibTable[0].Source, "1", k, tok); got != ":1\r\n" {
			t.Fatalf("release %d: %q", i, got)
		}
	}
	pipelineCycles(t, e.addr, "dp", 40, 2)
}
