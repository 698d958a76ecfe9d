package proxy

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/proxy/internal/redisson"
)

// TestSubscribeAfterPipeline: a pipeline of ordinary commands
// followed by SUBSCRIBE can leave the reader in waitWritten forever: the
// writer signals drained when it takes a reply, but unwritten only drops
// in flush, which signals nothing.
func TestSubscribeAfterPipeline(t *testing.T) {
	e := startEnv(t, 3, nil)
	ch := redisson.ChannelPrefix + ":{x}"
	hung := 0
	for i := 0; i < 100; i++ {
		c := dialRaw(t, e.addr)
		c.send(strings.Repeat("PING\r\n", 1+i%8) + "SUBSCRIBE " + ch + "\r\n")
		for j := 0; j < 1+i%8; j++ {
			if got := c.read(); got != "+PONG\r\n" {
				t.Fatalf("PING %d: %q", j, got)
			}
		}
		c.nc.SetReadDeadline(time.Now().Add(2 * time.Second))
		if got := c.read(); got != pushed("subscribe", ch, 1) {
			hung++
			t.Logf("conn %d: SUBSCRIBE reply %q (reader stuck in waitWritten)", i, got)
		}
		c.nc.Close()
		if hung >= 3 {
			break
		}
	}
	if hung > 0 {
		time.Sleep(200 * time.Millisecond)
		for _, cc := range e.srv.rs.ConnStates() {
			t.Logf("stuck conn %d: unwritten=%d sub=%v", cc.ID, cc.Unwritten, cc.Subscribed)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		t0 := time.Now()
		err := e.srv.Shutdown(ctx)
		t.Logf("Shutdown returned %v after %v", err, time.Since(t0))
		t.Errorf("%d connections never got their SUBSCRIBE reply; connected_clients still %d after the clients closed", hung, e.srv.rs.Stats().ConnectedClients)
	}
}

// TestSubscribedRepliesInOrder: in subscribed mode, replies
// that dispatch returns as ordinary calls (unknown command, arity error,
// SUBSCRIBE to a refused channel, QUIT, RESET) go through c.calls while
// PING/SUBSCRIBE replies go through the message queue; the writer prefers
// c.calls, so a later reply is written before an earlier one.
func TestSubscribedRepliesInOrder(t *testing.T) {
	e := startEnv(t, 3, nil)
	ch := redisson.ChannelPrefix + ":{x}"
	c := dialRaw(t, e.addr)
	c.sendCmd("SUBSCRIBE", ch)
	c.expect(pushed("subscribe", ch, 1))
	const n = 200
	c.send(strings.Repeat("PING\r\nFOO\r\n", n))
	bad := 0
	for i := 0; i < n; i++ {
		a, b := c.read(), c.read()
		if !strings.Contains(a, "pong") || !strings.Contains(b, "unknown") {
			if bad == 0 {
				t.Logf("pair %d: %q then %q", i, a, b)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d PING/FOO pairs answered out of request order", bad, n)
	}
	// RESET while subscribed, pipelined behind SUBSCRIBEs.
	d := dialRaw(t, e.addr)
	d.sendCmd("SUBSCRIBE", ch)
	d.expect(pushed("subscribe", ch, 1))
	d.send(strings.Repeat("SUBSCRIBE "+ch+"\r\n", 50) + "RESET\r\n")
	for i := 0; i < 51; i++ {
		got := d.read()
		if (i < 50) != strings.Contains(got, "subscribe") {
			t.Errorf("reply %d after SUBSCRIBE×50 RESET: %q", i, got)
			break
		}
	}
}

// TestNoMessageAfterUnsubscribe: publish snapshots the hub, then
// pushes; a connection that unsubscribed meanwhile (and left subscribed
// mode) still gets the message, after its UNSUBSCRIBE reply, among its
// ordinary replies.
func TestNoMessageAfterUnsubscribe(t *testing.T) {
	e := startEnv(t, 3, nil)
	ch := redisson.ChannelPrefix + ":{late}"
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			e.srv.rs.Publish(ch, "0")
		}
	}()
	defer func() { stop.Store(true); <-done }()
	c := dialRaw(t, e.addr)
	for i := 0; i < 200; i++ {
		c.sendCmd("SUBSCRIBE", ch)
		for got := c.read(); got != pushed("subscribe", ch, 1); got = c.read() {
			if !strings.Contains(got, "message") {
				t.Fatalf("iteration %d: waiting for the subscribe reply: %q", i, got)
			}
		}
		c.sendCmd("UNSUBSCRIBE", ch)
		for got := c.read(); got != pushed("unsubscribe", ch, 0); got = c.read() {
			if !strings.Contains(got, "message") {
				t.Fatalf("iteration %d: waiting for the unsubscribe reply: %q", i, got)
			}
		}
		if got := c.cmd("ECHO", "x"); got != "$1\r\nx\r\n" {
			t.Fatalf("iteration %d: ECHO in normal mode answered %q", i, got)
		}
	}
}
