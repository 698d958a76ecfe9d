package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
)

// TestQuarantineEveryConnection: with two connections per master, the
// connection that meets a restarted, empty master first quarantines it,
// whichever it is. Here connection 0 of the restarted masters never comes
// back (as if it had not reconnected yet) and the key's commands travel on
// connection 1. Before, only connection 0 reported state changes:
// connection 1 counted the restarted masters' grants at once and a second
// holder got the key while the first lock was valid.
func TestQuarantineEveryConnection(t *testing.T) {
	set := mastertest.Start(t, 5)
	mastertest.RequireReal(t, set)
	e, err := New(Config{FreshMasters: true, Addrs: set.Addrs(), ConnsPerMaster: 2, MasterTimeout: 500 * time.Millisecond,
		Conn: conn.Config{ReconnectMin: time.Millisecond, ReconnectMax: 20 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := e.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	key := ""
	for i := 0; key == ""; i++ {
		if k := fmt.Sprintf("two:%d", i); e.connFor(k)%2 == 1 {
			key = k
		}
	}
	holder, err := e.TryLock(ctx, key, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		e.conns[i][0].Close()
		m := set.Masters()[i]
		if err := m.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := m.Restart(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		if err := e.conns[i][1].WaitConnected(ctx); err != nil {
			t.Fatal(err)
		}
	}
	_, err = e.TryLock(ctx, key, 5*time.Second)
	if err == nil {
		t.Fatalf("a second holder got %s over connection 1 while the first is valid until %v", key, holder.Until())
	}
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, ErrQuarantined) {
		t.Fatalf("second holder: %v; want ErrUnavailable naming ErrQuarantined", err)
	}
	if !holder.Valid() {
		t.Fatal("the holder's lock ran out before the second try: the test proves nothing")
	}
}

// TestValidityOnWhatWasSent: a TTL with a sub-millisecond part is sent as
// whole milliseconds (PX), and the validity is computed on what was sent:
// Until − start = ttl truncated − drift, for an acquisition and for an
// extension. Before, the validity counted the fraction the masters never
// got.
func TestValidityOnWhatWasSent(t *testing.T) {
	set := mastertest.Start(t, 3)
	e, err := New(Config{FreshMasters: true, Addrs: set.Addrs(), MasterTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	ctx := context.Background()
	const sent = time.Second
	l, err := e.TryLock(ctx, "ms:key", sent+999*time.Microsecond)
	if err != nil {
		t.Fatal(err)
	}
	want := sent - e.cfg.drift(sent)
	validity := func() time.Duration { return time.Duration(l.until.Load() - l.granted.Load()) }
	if got := validity(); got != want {
		t.Fatalf("acquired for 1.000999s: validity %v after the start, want %v (1s sent)", got, want)
	}
	if err := l.Extend(ctx, sent+999*time.Microsecond); err != nil {
		t.Fatal(err)
	}
	if got := validity(); got != want {
		t.Fatalf("extended for 1.000999s: validity %v after the start, want %v (1s sent)", got, want)
	}
}

// TestQuarantineServerSwap: another server, with a long uptime, takes over
// the addresses of three masters (a failover to replicas, a VIP or DNS
// moved) while a lock is held: the new servers never saw the lock. They
// started long before the quarantine period, so the uptime rule alone lets
// them vote at once, and a second holder got the key (found by the review
// of issue #22). A new run_id at an address now quarantines the server
// from that session on for the period.
func TestQuarantineServerSwap(t *testing.T) {
	set := mastertest.Start(t, 8) // 0-4 the masters, 5-7 the servers that take over 0-2
	mastertest.RequireReal(t, set)
	all := set.Addrs()
	var target [3]atomic.Value
	for i := range target {
		target[i].Store(all[i])
	}
	dialer := func(ctx context.Context, network, addr string) (net.Conn, error) {
		for i := range target {
			if addr == all[i] {
				addr = target[i].Load().(string)
			}
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	// Every server is then older than the quarantine period plus the
	// second Redis's uptime rounding can add.
	time.Sleep(2100 * time.Millisecond)
	const ttl = time.Second
	e, err := New(Config{FreshMasters: true, Addrs: all[:5], MaxTTL: ttl, MasterTimeout: 200 * time.Millisecond,
		Conn: conn.Config{Dialer: dialer, ReconnectMin: time.Millisecond, ReconnectMax: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := e.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	holder, err := e.TryLock(ctx, "swap:key", ttl)
	if err != nil {
		t.Fatal(err)
	}
	for i := range target {
		target[i].Store(all[5+i])
		c, err := conn.Dial(ctx, all[i], conn.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Exec(ctx, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); {
		up := 0
		for _, st := range e.Status()[:3] {
			if st.Up {
				up++
			}
		}
		if up == 3 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	second, err := e.TryLock(ctx, "swap:key", ttl)
	if err == nil {
		defer second.Unlock(ctx)
		if holder.Valid() {
			t.Fatalf("two holders: the servers that took over masters 0-2 granted the key while the first lock is valid (%v left)", holder.Remaining())
		}
	} else if !errors.Is(err, ErrUnavailable) && !errors.Is(err, ErrNotAcquired) {
		t.Fatal(err)
	}
	for i, st := range e.Status()[:3] {
		if st.Up && !st.Quarantined {
			t.Errorf("master %d: another server (run_id %s) answers at its address and it is not quarantined", i, st.Info.RunID)
		}
	}
}
