package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/localmaster"
	"github.com/redlock-dev/redlock/internal/test/netns"
	"github.com/redlock-dev/redlock/internal/test/proctest"
	"github.com/redlock-dev/redlock/proxy/internal/respserver"
)

// TestPartitionedMasters: with 3 of 5 masters behind links that drop
// packets (a partition: dials time out, nothing is refused), every SET NX
// PX through the proxy — not only the first — answers the unavailable
// error naming each cut master, never "command timed out", and every
// failure is logged with the masters' addresses (rate-limited). Healing
// the links brings locks back without restarting anything. (Issue 31 item
// 6: once the reconnect dials had timed out, the dial's "i/o timeout"
// matched context.DeadlineExceeded through the engine's error, and the
// proxy answered "command timed out" in under a millisecond, unlogged.)
func TestPartitionedMasters(t *testing.T) {
	m := netns.StartMasters(t, localmaster.Options{N: 5})
	var logs proctest.Buffer
	srv, addr := serve(t, Config{
		EngineConfig: engine.Config{FreshMasters: true, Addrs: m.Addrs(), MasterTimeout: 100 * time.Millisecond,
			// Short timeouts: the cut masters' sessions stall out within
			// a few hundred milliseconds and their reconnects time out.
			Conn: conn.Config{Dialer: m.DialContext, DialTimeout: 100 * time.Millisecond, StallTimeout: 200 * time.Millisecond,
				ReconnectMin: 20 * time.Millisecond, ReconnectMax: 100 * time.Millisecond}},
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	ctx := context.Background()
	// Every master up before the cut (each first dial has 100 ms, which a
	// loaded host can miss: WaitReady returns after the first attempts, so
	// wait for the reconnects too).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		up := 0
		for _, st := range srv.Engine().Status() {
			if st.Up {
				up++
			}
		}
		if up == len(m.Addrs()) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the masters did not all come up within 10s: %+v", srv.Engine().Status())
		}
	}
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	set := func(key string) error { return c.SetNX(ctx, key, "tok-"+key, 10*time.Second).Err() }
	if err := set("part:before"); err != nil {
		t.Fatalf("SET with every master reachable: %v", err)
	}

	cut := []int{0, 1, 2}
	if err := m.Cut(cut...); err != nil {
		t.Fatal(err)
	}
	unavailable := func(i int, err error, kind string) {
		t.Helper()
		if err == nil {
			t.Fatalf("SET %d with 3 of 5 masters cut off: OK", i)
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "ERR redlock proxy: unavailable: ") || strings.Contains(msg, "command timed out") {
			t.Fatalf("SET %d with 3 of 5 masters cut off: %q; want the unavailable error naming the masters", i, msg)
		}
		for _, j := range cut {
			if !strings.Contains(msg, fmt.Sprintf("master %d: %s", j, kind)) {
				t.Fatalf("SET %d: %q does not say cut master %d: %s", i, msg, j, kind)
			}
		}
	}
	// The first SET times out on the cut masters' open sessions, which
	// then stall out; from then on their reconnect dials time out.
	unavailable(0, set("part:0"), "timed out")
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		dialed := 0
		for _, j := range cut {
			if err := srv.Engine().Status()[j].Err; err != nil && strings.Contains(err.Error(), "i/o timeout") {
				dialed++
			}
		}
		if dialed == len(cut) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cut masters' reconnects did not time out within 5s: %+v", srv.Engine().Status())
		}
	}
	// What read as "command timed out": every SET, not only the first.
	const failures = 51
	for i := 1; i < failures; i++ {
		unavailable(i, set(fmt.Sprint("part:", i)), "not connected")
	}
	// A quorum read: the same error.
	if err := c.Get(ctx, "part:before").Err(); err == nil || !strings.Contains(err.Error(), "unavailable: ") {
		t.Errorf("GET with 3 of 5 masters cut off: %v; want the unavailable error", err)
	}
	// Every failure was logged, up to the budget, with the addresses the
	// replies leave out and the dials' timeouts.
	out := logs.String()
	if n := strings.Count(out, `msg="proxy: command failed"`); n < min(failures, respserver.LogBurst) {
		t.Errorf("%d of %d failed SETs logged, want %d (the budget):\n%s", n, failures, min(failures, respserver.LogBurst), out)
	}
	for _, j := range cut {
		if !strings.Contains(out, m.Addrs()[j]) {
			t.Errorf("the log never names cut master %d (%s):\n%s", j, m.Addrs()[j], out)
		}
	}
	if !strings.Contains(out, "i/o timeout") {
		t.Errorf("the log never shows a reconnect that timed out:\n%s", out)
	}

	if err := m.Heal(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; ; i++ {
		err := set(fmt.Sprint("part:healed:", i))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("SET 10s after the links healed: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i := range 10 {
		if err := set(fmt.Sprint("part:after:", i)); err != nil {
			t.Fatalf("SET %d after the links healed: %v", i, err)
		}
	}
}
