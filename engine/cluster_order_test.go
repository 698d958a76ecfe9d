package engine

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/internal/localmaster"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/internal/test/netgate"
	"github.com/redlock-dev/redlock/resp"
)

// TestClusterExtendOrderAcrossMoved: TestExtendOrder's rule per cluster
// member. Extend(8s) is written to node A, which serves the key's slot;
// before A reads it the slot (with the key) moves to node B and the
// engine's map learns it, so Extend(30s) goes to B directly and is
// applied there. Then A answers the first extension -MOVED and it is
// re-sent to B, where it is applied last: B holds the key for 8s. The
// later extension's success must not leave the lock reporting more than
// the member holds.
func TestClusterExtendOrderAcrossMoved(t *testing.T) {
	lc := mastertest.StartCluster(t, localmaster.ClusterOptions{Shards: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	direct := conn.NewCluster(lc.Addrs()[:1], conn.Config{})
	t.Cleanup(func() { direct.Close() })
	if err := direct.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	const key = "corder:key"
	a := direct.NodeFor(key).Addr()
	gate := netgate.New()
	gated := gate.Dialer()
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == a {
			return gated(ctx, network, addr)
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	e, err := New(Config{FreshMasters: true, Clusters: []ClusterMember{{Seeds: lc.Addrs()}}, MasterTimeout: 5 * time.Second,
		Conn: conn.Config{Dialer: dial, StallTimeout: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if _, err := e.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	cl := e.cluster(0)
	l, err := e.TryLock(ctx, key, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := cl.NodeFor(key).Addr(); got != a {
		t.Fatalf("the engine routes %s to %s; the cluster serves it on %s", key, got, a)
	}

	release := gate.Hold()
	released := false
	defer func() {
		if !released {
			release()
		}
	}()
	first := l.sendExtend(8*time.Second, 8000, false) // queued to A, not yet written
	from, b, err := lc.MoveSlot(ctx, conn.Slot(key), 0)
	if err != nil || from != a {
		t.Fatalf("moving %s's slot: from %s to %s: %v (want from %s)", key, from, b, err, a)
	}
	// Make the engine's map learn the move without going through A: a
	// request for a slot another node serves, moved meanwhile, is answered
	// -MOVED, which reloads the map.
	other := ""
	for i := 0; other == ""; i++ {
		k := fmt.Sprintf("corder:other:%d", i)
		if n := direct.NodeFor(k).Addr(); n == b {
			other = k
		}
	}
	if _, _, err := lc.MoveSlot(ctx, conn.Slot(other), 0); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	if err := cl.Do(conn.Request{Cmd: resp.AppendCommandStrings(nil, "GET", other), Key: other, Deadline: time.Now().Add(5 * time.Second),
		Callback: callbackFunc(func(_ resp.Reply, err error) { got <- err })}); err != nil {
		t.Fatal(err)
	}
	for cl.NodeFor(key).Addr() != b {
		if ctx.Err() != nil {
			t.Fatalf("the engine's map still routes %s to %s", key, cl.NodeFor(key).Addr())
		}
		time.Sleep(5 * time.Millisecond)
	}
	moved := cl.Stats().Moved

	second := l.sendExtend(30*time.Second, 30000, false) // B serves the slot now
	// As two callers would: whichever extension is answered first is
	// decided first. (Routed to B directly, the second one was answered at
	// once; in order, it waits behind the first one's redirect.)
	secondDone := false
	early, stop := context.WithTimeout(ctx, 300*time.Millisecond)
	if second.wait(early) == nil {
		secondDone = true
		if err := l.extendDone(second); err != nil {
			t.Fatalf("Extend(30s): %v", err)
		}
	}
	stop()
	release()
	released = true
	if err := first.wait(ctx); err != nil {
		t.Fatal(err)
	}
	firstErr := l.extendDone(first)
	if !secondDone {
		if err := second.wait(ctx); err != nil {
			t.Fatal(err)
		}
		if err := l.extendDone(second); err != nil {
			t.Fatalf("Extend(30s): %v", err)
		}
	}
	if cl.Stats().Moved == moved {
		t.Fatal("the first extension was not redirected: the interleaving did not happen")
	}
	pttl := time.Duration(directDo(t, direct, "PTTL", key).Int) * time.Millisecond
	left := l.Remaining()
	t.Logf("Extend(8s) redirected: %v; Extend(30s) answered before it: %v; the lock reports %v left; B holds the key for %v", firstErr, secondDone, left, pttl)
	if l.Valid() && left > pttl {
		t.Fatalf("the lock reports %v left; the member holds the key for %v (the re-sent earlier extension was applied after the later one)", left, pttl)
	}
}

type callbackFunc func(resp.Reply, error)

func (f callbackFunc) Complete(_ uint64, r resp.Reply, err error) { f(r, err) }

// directDo runs one command on key's node through cl.
func directDo(t *testing.T, cl *conn.Cluster, args ...string) resp.Reply {
	t.Helper()
	w := make(chan resp.Reply, 1)
	cb := callbackFunc(func(r resp.Reply, err error) {
		if err != nil {
			r = resp.Reply{Type: resp.TypeError, Str: []byte(err.Error())}
		}
		w <- r.Clone()
	})
	if err := cl.Do(conn.Request{Cmd: resp.AppendCommandStrings(nil, args...), Key: args[1], Callback: cb, Deadline: time.Now().Add(5 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	r := <-w
	if r.IsError() {
		t.Fatalf("%q: %s", args, r.Str)
	}
	return r
}
