package conn_test

import (
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/resp"
)

// rawRESP is a plain RESP client (not a conn.Conn: the read hook below
// is global and must only stall the Conn under test).
type rawRESP struct {
	nc net.Conn
	rd *resp.Reader
}

func newRawRESP(t *testing.T, addr string) *rawRESP {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawRESP{nc: nc, rd: resp.NewReader(nc)}
}

func (r *rawRESP) do(t *testing.T, args ...string) resp.Reply {
	t.Helper()
	r.nc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.nc.Write(resp.AppendCommandStrings(nil, args...)); err != nil {
		t.Fatal(err)
	}
	rep, err := r.rd.ReadReply()
	if err != nil {
		t.Fatal(err)
	}
	return rep.Clone()
}

func noscriptExtendCmd(key, tok string, ms int) []byte {
	b := scripts.Extend.AppendEvalSha(nil, 1, 2)
	b = resp.AppendBulkString(b, key)
	b = resp.AppendBulkString(b, tok)
	return resp.AppendBulkString(b, strconv.Itoa(ms))
}

// TestNoScriptResendKeepsKeyOrder: one key's commands reach the master in
// the order sent, across a NOSCRIPT. After SCRIPT FLUSH, E1 (k's
// extension to 8 s) and E2 (to 30 s, sent after E1 once another key's
// EVAL re-send had cached the script again) were applied as E2 then E1:
// E1's re-send went to the end of the queue, behind E2; both answered 1,
// and the engine counted 30 s where the master kept 8 s (found by the
// review of issue #46). Now E1 fails with its NOSCRIPT (no vote), E2 stands.
func TestNoScriptResendKeepsKeyOrder(t *testing.T) {
	c, m, _ := realConn(t, conn.Config{Scripts: []*conn.Script{scripts.Extend}})
	raw := newRawRESP(t, m.Addr())
	raw.do(t, "SET", "k0", "t0", "PX", "60000")
	raw.do(t, "SET", "k", "tok", "PX", "60000")
	raw.do(t, "SCRIPT", "FLUSH") // an operator's; the Conn stays up

	// Stall the reader once, right after it handled one reply (E0's).
	var armed atomic.Bool
	release := make(chan struct{})
	conn.SetReadHook(func() {
		if armed.CompareAndSwap(true, false) {
			<-release
		}
	})
	defer conn.SetReadHook(nil)

	dl := time.Now().Add(20 * time.Second)
	rec := newRecorder()
	c.Cork()
	armed.Store(true)
	// E0: another lock's extension; E1: k's extension to 8 s. One batch.
	if err := c.Do(conn.Request{Cmd: noscriptExtendCmd("k0", "t0", 60000), Script: scripts.Extend, Stable: true, Callback: rec, Tag: 0, Deadline: dl, KeyHash: 100}); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(conn.Request{Cmd: noscriptExtendCmd("k", "tok", 8000), Script: scripts.Extend, Stable: true, Callback: rec, Tag: 1, Deadline: dl, KeyHash: 200}); err != nil {
		t.Fatal(err)
	}
	c.Uncork()

	// The reader handled E0's NOSCRIPT (re-sent as EVAL, which caches the
	// script again) and is stalled before E1's NOSCRIPT. Wait for the
	// EVAL of E0 to have run on the master (it re-sets k0's TTL).
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for end := time.Now().Add(5 * time.Second); !ok(); time.Sleep(time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	waitFor("the script to be cached again", func() bool {
		r := raw.do(t, "SCRIPT", "EXISTS", scripts.Extend.SHA())
		return len(r.Elems) == 1 && r.Elems[0].Int == 1
	})

	// E2: k's extension to 30 s, sent after E1.
	if err := c.Do(conn.Request{Cmd: noscriptExtendCmd("k", "tok", 30000), Script: scripts.Extend, Stable: true, Callback: rec, Tag: 2, Deadline: dl, KeyHash: 200}); err != nil {
		t.Fatal(err)
	}
	waitFor("E2 to run", func() bool { return raw.do(t, "PTTL", "k").Int > 20000 })
	close(release)

	got := rec.wait(t, 3, 10*time.Second)
	for _, o := range got {
		t.Logf("tag %d: reply %s err %v", o.tag, textOf(o.rep), o.err)
	}
	e1, e2 := byTag(got, 1), byTag(got, 2)
	pttl := raw.do(t, "PTTL", "k").Int
	t.Logf("PTTL k after both answered: %d ms", pttl)
	if len(e2) != 1 || e2[0].err != nil || e2[0].rep.Int != 1 {
		t.Fatalf("E2 (30 s, sent last): %+v, want 1", e2)
	}
	if pttl < 20000 {
		t.Fatalf("E2 answered 1, yet the master holds k for %d ms: E1 (8 s, sent first) was applied after it (E1: %+v)", pttl, e1)
	}
	if len(e1) != 1 || !e1[0].rep.HasErrorPrefix("NOSCRIPT") {
		t.Fatalf("E1: %+v, want its NOSCRIPT (not re-sent behind E2)", e1)
	}
}
