package conn_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/resp"
)

type replyCB chan error

func (ch replyCB) Complete(_ uint64, r resp.Reply, err error) {
	if err == nil && r.IsError() {
		err = r.Err()
	}
	ch <- err
}

// armCB arms the stall as its reply is delivered (on the reader).
type armCB struct {
	ch    replyCB
	stall *atomic.Bool
}

func (a armCB) Complete(tag uint64, r resp.Reply, err error) {
	a.stall.Store(true)
	a.ch.Complete(tag, r, err)
}

// TestReaderBehindNoTimeout: a request whose reply arrived in time is not
// timed out because the reader had not run yet (a process short of CPU:
// its expiry timer fires as it is scheduled again, before its socket is
// read) — the reply waiting in the socket is read first. A master that
// sends nothing still times out at the deadline.
func TestReaderBehindNoTimeout(t *testing.T) {
	set := mastertest.Start(t, 1)
	mastertest.RequireReal(t, set)
	ctx := context.Background()
	c, err := conn.Dial(ctx, set.Addrs()[0], conn.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var stall atomic.Bool
	conn.SetReadHook(func() {
		if stall.CompareAndSwap(true, false) {
			time.Sleep(150 * time.Millisecond)
		}
	})
	defer conn.SetReadHook(nil)

	// The reader delivers the first reply (arming the stall), then
	// stalls before its next read while the second request's reply waits
	// in the socket.
	first, second := make(replyCB, 1), make(replyCB, 1)
	if err := c.Do(conn.Request{Cmd: resp.AppendCommandStrings(nil, "PING"), Deadline: time.Now().Add(time.Second), Callback: armCB{first, &stall}}); err != nil {
		t.Fatal(err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := c.Do(conn.Request{Cmd: resp.AppendCommandStrings(nil, "PING"), Deadline: time.Now().Add(30 * time.Millisecond), Callback: second}); err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil || time.Since(start) < 100*time.Millisecond {
		t.Fatalf("a reply that came in time, read %v later by a stalled reader: %v; want it delivered after the stall", time.Since(start).Round(time.Millisecond), err)
	}

	// A stopped master sends nothing: its request times out on time.
	if err := set.Masters()[0].Pause(); err != nil {
		t.Fatal(err)
	}
	defer set.Masters()[0].Resume()
	third := make(replyCB, 1)
	start = time.Now()
	if err := c.Do(conn.Request{Cmd: resp.AppendCommandStrings(nil, "PING"), Deadline: time.Now().Add(30 * time.Millisecond), Callback: third}); err != nil {
		t.Fatal(err)
	}
	if err := <-third; !errors.Is(err, conn.ErrTimeout) {
		t.Fatalf("stopped master: %v; want ErrTimeout", err)
	}
	if d := time.Since(start); d > 150*time.Millisecond {
		t.Fatalf("stopped master timed out after %v; want about the 30ms deadline", d)
	}
}
