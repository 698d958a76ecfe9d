package conn_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
)

// TestLoneRequestWrittenByCaller: on an idle connection a lone request is
// written by the goroutine that called Do — no writer wake-up — with the
// clock check's TIME in the same write, and answered.
func TestLoneRequestWrittenByCaller(t *testing.T) {
	var jumps atomic.Int64
	c, _, _ := realConn(t, conn.Config{OnClockJump: func(conn.ClockJump) { jumps.Add(1) }})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	exec(t, c, "PING") // settle
	d0, w0 := c.WriteCounts()
	st0 := c.Stats()
	const n = 50
	for i := range n {
		rep, err := c.Exec(ctx, "ECHO", "x")
		if err != nil || string(rep.Str) != "x" {
			t.Fatalf("ECHO %d: %v %v", i, rep, err)
		}
	}
	d1, w1 := c.WriteCounts()
	st1 := c.Stats()
	if d1-d0 != n || w1 != w0 {
		t.Fatalf("%d lone requests: %d written by the caller, %d writer wake-ups; want %d and 0", n, d1-d0, w1-w0, n)
	}
	if w := st1.Writes - st0.Writes; w != n {
		t.Fatalf("%d writes for %d lone requests (TIME must share the request's write)", w, n)
	}
	if n := jumps.Load(); n != 0 {
		t.Fatalf("%d clock jumps reported", n)
	}
}
