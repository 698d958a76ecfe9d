package conn_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/resp"
)

// doneCallback is a pooled completion: Complete signals ch, the caller
// waits on it and puts the struct back in the pool.
type doneCallback struct {
	ch  chan struct{}
	err error
}

func (d *doneCallback) Complete(_ uint64, r resp.Reply, err error) {
	if err == nil && r.IsError() {
		err = errServerReply
	}
	d.err = err
	d.ch <- struct{}{}
}

var errServerReply = errors.New("server error reply")

var donePool = sync.Pool{New: func() any { return &doneCallback{ch: make(chan struct{}, 1)} }}

func BenchmarkDoParallel(b *testing.B) {
	set := mastertest.Start(b, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := conn.Dial(ctx, set.Addrs()[0], conn.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for _, bc := range []struct {
		name string
		cmd  []byte
	}{
		{"PING", cmd("PING")},
		{"SET", cmd("SET", "bench:key", "0123456789abcdef")},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(16) // many callers per CPU: what auto-pipelining is for
			before := c.Stats()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					d := donePool.Get().(*doneCallback)
					if err := c.Do(conn.Request{Cmd: bc.cmd, Callback: d}); err != nil {
						b.Error(err)
						return
					}
					<-d.ch
					if d.err != nil {
						b.Error(d.err)
						return
					}
					donePool.Put(d)
				}
			})
			after := c.Stats()
			if w := after.Writes - before.Writes; w > 0 {
				b.ReportMetric(float64(after.Requests-before.Requests)/float64(w), "reqs/write")
			}
		})
	}
}

// TestDoAllocs: one request and its reply on a warm connection allocate at
// most once (the Conn itself aims for zero).
func TestDoAllocs(t *testing.T) {
	c, _, _ := realConn(t, conn.Config{})
	ping := cmd("PING")
	w := &doneCallback{ch: make(chan struct{}, 1)}
	do := func() {
		if err := c.Do(conn.Request{Cmd: ping, Callback: w}); err != nil {
			t.Fatal(err)
		}
		<-w.ch
		if w.err != nil {
			t.Fatal(w.err)
		}
	}
	for range 1000 { // warm the buffers and the queue
		do()
	}
	allocs := testing.AllocsPerRun(2000, do)
	t.Logf("%.3f allocs per request", allocs)
	if allocs > 1 {
		t.Errorf("%.3f allocs per Do+reply, want <= 1", allocs)
	}
}
