package conn_test

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
)

// Do's inline write (a request alone on an idle connection is written by
// the caller) across a session's teardown: found by this round's review
// (issue #46's change), which gated RawConn.Write to stand for the
// scheduler descheduling the caller between releasing mu and its write(2)
// while the session ends. Before the fix the write's bytes went back into
// the buffer and out on the next session: a request reported failed was
// executed, and the next requests got each other's replies (3/3).

// inlineGate stands for the scheduler: the goroutine in Do's writeInline is
// descheduled between releasing mu and its write(2).
type inlineGate struct {
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

type inlineGateRaw struct {
	syscall.RawConn
	g *inlineGate
}

func (r inlineGateRaw) Write(f func(uintptr) bool) error {
	if r.g.armed.CompareAndSwap(true, false) {
		r.g.entered <- struct{}{}
		<-r.g.release
	}
	return r.RawConn.Write(f)
}

type inlineGateConn struct {
	*net.TCPConn
	g *inlineGate
}

func (c inlineGateConn) SyscallConn() (syscall.RawConn, error) {
	raw, err := c.TCPConn.SyscallConn()
	if err != nil {
		return nil, err
	}
	return inlineGateRaw{raw, c.g}, nil
}

// gatedConn dials a master through sockets whose inline write waits at
// the gate once armed; dropFirst closes the first session's socket (the
// session ends, as when the master drops it).
func gatedConn(t *testing.T) (c *conn.Conn, g *inlineGate, dropFirst func()) {
	set := mastertest.Start(t, 1)
	g = &inlineGate{entered: make(chan struct{}), release: make(chan struct{})}
	var mu sync.Mutex
	var socks []*net.TCPConn
	cfg := conn.Config{DialTimeout: 5 * time.Second, Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		nc, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		socks = append(socks, nc.(*net.TCPConn))
		mu.Unlock()
		return inlineGateConn{nc.(*net.TCPConn), g}, nil
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := conn.Dial(ctx, set.Masters()[0].Addr(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, g, func() {
		mu.Lock()
		socks[0].Close()
		mu.Unlock()
	}
}

// TestInlineWriteAcrossTeardown: a request whose inline write is
// descheduled while its session ends is failed to its caller and never
// executed; the next session serves the next requests, each its own reply.
func TestInlineWriteAcrossTeardown(t *testing.T) {
	c, g, dropFirst := gatedConn(t)
	exec(t, c, "DEL", "iw:stale", "iw:probe")

	g.armed.Store(true)
	rec := newRecorder()
	go func() {
		if err := c.Do(conn.Request{Cmd: cmd("SET", "iw:stale", "from-a-failed-request"), Callback: rec, Tag: 1}); err != nil {
			t.Errorf("Do: %v", err)
		}
	}()
	select {
	case <-g.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the request was not written inline")
	}
	// The session ends (the master's socket drops) while Do is descheduled.
	dropFirst()
	got := rec.wait(t, 1, 5*time.Second)
	t.Logf("the request's outcome: err=%v", got[0].err)
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	time.Sleep(50 * time.Millisecond)
	if err := c.WaitConnected(wctx); err != nil {
		t.Fatal(err)
	}
	connects := c.Stats().Connects
	// The next session is up; the descheduled Do now runs on.
	close(g.release)
	ok, failed, wrong := 0, 0, 0
	var firstErr error
	for i := 0; i < 30; i++ {
		ectx, ecancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		rep, err := c.Exec(ectx, "GET", "iw:probe")
		ecancel()
		switch {
		case err != nil:
			failed++
			if firstErr == nil {
				firstErr = err
			}
		case rep.Text() != "":
			wrong++
			t.Logf("GET of an absent key answered %q", rep.Text())
		default:
			ok++
		}
	}
	t.Logf("30 GETs over the next seconds: %d answered nil, %d failed (first: %v), %d answered another request's reply; connects %d -> %d", ok, failed, firstErr, wrong, connects, c.Stats().Connects)
	r2 := exec(t, c, "GET", "iw:stale")
	if r2.Text() != "" {
		t.Errorf("a request reported failed (%v) was executed by the master: iw:stale = %q", got[0].err, r2.Text())
	}
	if failed > 0 || wrong > 0 {
		t.Errorf("after the descheduled inline write, the Conn failed %d of 30 requests and misattributed %d", failed, wrong)
	}
}

// TestInlineWriteNotSentOnNextSession: as above, the descheduled write ends
// after the session did (before the next one is up): a client polling
// through the reconnect never gets the failed request's reply as its own.
func TestInlineWriteNotSentOnNextSession(t *testing.T) {
	c, g, dropFirst := gatedConn(t)
	exec(t, c, "DEL", "iw:probe")
	g.armed.Store(true)
	rec := newRecorder()
	go c.Do(conn.Request{Cmd: cmd("SET", "iw:stale2", "x"), Callback: rec, Tag: 1})
	<-g.entered
	dropFirst()
	rec.wait(t, 1, 5*time.Second)
	close(g.release) // the session is down: the stale bytes wait for the next
	var wrong []string
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		ectx, ecancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		rep, err := c.Exec(ectx, "GET", "iw:probe")
		ecancel()
		if err == nil && rep.Text() != "" {
			wrong = append(wrong, rep.Text())
		}
	}
	if len(wrong) > 0 {
		t.Errorf("GET of an absent key answered %q: another request's reply", wrong)
	}
}
