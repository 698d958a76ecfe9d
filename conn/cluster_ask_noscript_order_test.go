package conn_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/internal/scripts"
)

// TestClusterAskNoScriptKeepsKeyOrder: E1 (extend k to 8 s) then E2 (to
// 30 s), pipelined to A, both answered -ASK B (the slot migrating). On B,
// E1 is answered NOSCRIPT while E2 is queued behind it. E1's entry, sent
// after ASKING, was of unknown key (doAsking zeroed its KeyHash), so it was
// re-sent as EVAL at the end of B's queue: B applied E2 then E1, both
// succeeded, and the engine counted 30 s while B kept 8 s (found by the
// review of the cluster redirects, issue #46; the same as
// TestNoScriptResendKeepsKeyOrder on one connection). Now E1 fails with its
// NOSCRIPT (no vote), or B applies the two in order.
func TestClusterAskNoScriptKeepsKeyOrder(t *testing.T) {
	const aAddr, bAddr = "127.0.0.1:7001", "127.0.0.1:7002"
	const key = "k"
	a, b := newFake(t), newFake(t)
	slots := "*1\r\n*3\r\n:0\r\n:16383\r\n*3\r\n$9\r\n127.0.0.1\r\n:7001\r\n$2\r\nid\r\n"
	a.handle("CLUSTER", func(s *fakeSession, _ []string) { s.reply(slots) })
	b.handle("CLUSTER", func(s *fakeSession, _ []string) { s.reply(slots) })
	var amu sync.Mutex
	aGate := make(chan struct{})
	aN := 0
	a.handle("EVALSHA", func(s *fakeSession, args []string) {
		amu.Lock()
		aN++
		if aN == 2 {
			close(aGate) // both on A's queue before either is answered
		}
		amu.Unlock()
		s.replyAfter(aGate, fmt.Sprintf("-ASK %d %s\r\n", conn.Slot(key), bAddr))
	})
	b.handle("ASKING", func(s *fakeSession, _ []string) { s.reply("+OK\r\n") })
	var bmu sync.Mutex
	var applied []string // ttl args in the order B applied them
	bGate := make(chan struct{})
	bN := 0
	b.handle("EVALSHA", func(s *fakeSession, args []string) {
		bmu.Lock()
		defer bmu.Unlock()
		bN++
		if bN == 1 { // E1: NOSCRIPT, answered once E2 is on B's queue
			s.replyAfter(bGate, "-NOSCRIPT No matching script. Please use EVAL.\r\n")
			return
		}
		if bN == 2 {
			applied = append(applied, "EVALSHA "+args[len(args)-1])
			s.reply(":1\r\n")
			close(bGate)
			return
		}
		applied = append(applied, "EVALSHA "+args[len(args)-1])
		s.reply(":1\r\n")
	})
	b.handle("EVAL", func(s *fakeSession, args []string) {
		bmu.Lock()
		applied = append(applied, "EVAL "+args[len(args)-1])
		bmu.Unlock()
		s.reply(":1\r\n")
	})
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == bAddr {
			return b.Dial(ctx, network, addr)
		}
		return a.Dial(ctx, network, addr)
	}
	cl := conn.NewClusterWith(conn.ClusterConfig{Seeds: []string{aAddr}, Conn: conn.Config{Dialer: dial}})
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	dl := time.Now().Add(5 * time.Second)
	for i, ms := range []int{8000, 30000} {
		if err := cl.Do(conn.Request{Cmd: noscriptExtendCmd(key, "tok", ms), Script: scripts.Extend, Stable: true,
			Callback: rec, Tag: uint64(i), Deadline: dl, KeyHash: 42, Key: key}); err != nil {
			t.Fatal(err)
		}
	}
	got := rec.wait(t, 2, 10*time.Second)
	bmu.Lock()
	defer bmu.Unlock()
	t.Logf("outcomes %+v; B applied %v; stats %+v", got, applied, cl.Stats())
	ok := map[uint64]bool{}
	for _, o := range got {
		ok[o.tag] = o.err == nil && !o.rep.IsError() && o.rep.Int == 1
	}
	if ok[0] && ok[1] && len(applied) == 2 && applied[0] == "EVALSHA 30000" {
		t.Fatalf("E1 (8 s) and E2 (30 s) both succeeded, but B applied %v: the member keeps 8 s while the engine counts 30 s", applied)
	}
}
