package conn_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/internal/test/check"
	"github.com/redlock-dev/redlock/internal/test/netgate"
	"github.com/redlock-dev/redlock/resp"
)

// The single-key script and its merged form used by these tests: add
// ARGV[1] to KEYS[1] if it holds a number; the merged one does it per key
// with pcall, so that one key's error is that member's reply alone.
var (
	addOne   = conn.NewScript(`return redis.call("incrby",KEYS[1],ARGV[1])`)
	addMulti = conn.NewScript(`local r = {}
for i = 1, #KEYS do r[i] = redis.pcall("incrby", KEYS[i], ARGV[i]) end
return r`)
)

// gatedRealConn is realConn whose writes pass through a netgate.Gate.
func gatedRealConn(t *testing.T, cfg conn.Config) (*conn.Conn, *netgate.Gate) {
	t.Helper()
	g := netgate.New()
	cfg.Dialer = g.Dialer()
	c, _, _ := realConn(t, cfg)
	return c, g
}

// busyWriter holds c's writer inside the write of a PING (tag 100, on
// rec) until release is called: what is queued meanwhile goes out in the
// next write.
func busyWriter(t *testing.T, c *conn.Conn, g *netgate.Gate, rec *recorder) (release func()) {
	t.Helper()
	release = g.Hold()
	if err := c.Do(conn.Request{Cmd: cmd("PING"), Callback: rec, Tag: 100}); err != nil {
		release()
		t.Fatal(err)
	}
	g.WaitInside(1)
	return release
}

func memberCmd(key string, n int) []byte {
	b := addOne.AppendEvalSha(nil, 1, 1)
	b = resp.AppendBulkString(b, key)
	return resp.AppendBulkInt(b, int64(n))
}

// TestMergeRequests: members queued behind a write in progress go out as
// calls of the multi-key script (a second member on a key already held
// starts a new call after the first); each gets its own element (a
// number, or its key's error alone); a request on the key of a held
// member waits for it; a lone member goes out as its own command.
func TestMergeRequests(t *testing.T) {
	m := conn.NewMerge(addOne, addMulti, 1, 8)
	c, g := gatedRealConn(t, conn.Config{Scripts: []*conn.Script{addOne, addMulti}})
	exec(t, c, "SET", "m:0", "100")
	exec(t, c, "HSET", "m:bad", "f", "v") // INCRBY fails on it: WRONGTYPE

	rec := newRecorder()
	release := busyWriter(t, c, g, rec)
	keys := []string{"m:0", "m:1", "m:bad", "m:0", "m:3"}
	for i, k := range keys {
		req := conn.Request{Cmd: memberCmd(k, i+1), Callback: rec, Tag: uint64(i), Merge: m, Stable: true, KeyHash: uint64(len(k))<<8 | uint64(k[len(k)-1])}
		if err := c.Do(req); err != nil {
			t.Fatalf("Do member %d: %v", i, err)
		}
	}
	// A plain command on m:3 must run after the members (it reads their sum).
	if err := c.Do(conn.Request{Cmd: cmd("GET", "m:3"), Callback: rec, Tag: 200, KeyHash: uint64(len("m:3"))<<8 | '3'}); err != nil {
		t.Fatal(err)
	}
	release()
	got := rec.wait(t, 7, 5*time.Second)
	want := map[uint64]string{0: "101", 1: "2", 3: "105", 4: "5", 200: "5"}
	for _, o := range got {
		switch {
		case o.tag == 100:
		case o.tag == 2:
			if o.err != nil || !o.rep.HasErrorPrefix("WRONGTYPE") {
				t.Errorf("member on a hash: %v %v, want its own WRONGTYPE", o.rep, o.err)
			}
		case o.err != nil || o.rep.Text() != want[o.tag]:
			t.Errorf("tag %d: %v %v, want %s", o.tag, o.rep, o.err, want[o.tag])
		}
	}
	writes := g.Writes()
	if len(writes) != 2 {
		t.Fatalf("%d writes, want the PING's and one more", len(writes))
	}
	second := string(writes[1])
	if n, multi := strings.Count(second, "EVALSHA"), strings.Count(second, addMulti.SHA()); n != 2 || multi != 2 {
		t.Errorf("second write has %d EVALSHA (%d merged), want two merged calls (m:0 twice):\n%q", n, multi, second)
	}
	if i, j := strings.Index(second, addMulti.SHA()), strings.Index(second, "GET"); j < i {
		t.Errorf("GET m:3 was written before the merged call holding m:3:\n%q", second)
	}

	// A lone member, with the writer idle, goes out unchanged.
	w := newWaiter()
	if err := c.Do(conn.Request{Cmd: memberCmd("m:1", 10), Callback: w, Merge: m, Stable: true, KeyHash: 1}); err != nil {
		t.Fatal(err)
	}
	if <-w.ch; w.err != nil || w.n != 12 {
		t.Fatalf("lone member: %d %v, want 12", w.n, w.err)
	}
	info := exec(t, c, "INFO", "commandstats").Text()
	if !strings.Contains(info, "cmdstat_evalsha:calls=3,") {
		t.Errorf("want 3 EVALSHA calls (the two merged ones, the lone one):\n%s", info)
	}
}

// TestMergeBounds: more members than Max make several calls; Do refuses a
// member that is not Stable or not of its Merge's shape; NOSCRIPT on a
// merged call falls back to EVAL of the multi-key script.
func TestMergeBounds(t *testing.T) {
	m := conn.NewMerge(addOne, addMulti, 1, 4)
	c, g := gatedRealConn(t, conn.Config{Scripts: []*conn.Script{addOne, addMulti}})
	rec := newRecorder()
	for _, bad := range []conn.Request{
		{Cmd: memberCmd("k", 1), Callback: rec, Merge: m},                               // not Stable
		{Cmd: cmd("INCRBY", "k", "1"), Callback: rec, Merge: m, Stable: true},           // not the script
		{Cmd: memberCmd("k", 1), Callback: rec, Merge: m, Stable: true, Script: addOne}, // Script set
		{Cmd: memberCmd("k", 1)[:40], Callback: rec, Merge: m, Stable: true},            // cut
	} {
		if err := c.Do(bad); err == nil {
			t.Errorf("Do accepted a bad member %q", bad.Cmd)
		}
	}
	exec(t, c, "SCRIPT", "FLUSH")
	release := busyWriter(t, c, g, rec)
	const n = 10
	for i := range n {
		if err := c.Do(conn.Request{Cmd: memberCmd("b:"+strconv.Itoa(i), i+1), Callback: rec, Tag: uint64(i), Merge: m, Stable: true, KeyHash: uint64(i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	release()
	got := rec.wait(t, n+1, 5*time.Second)
	for _, o := range got {
		if o.tag == 100 {
			continue
		}
		if o.err != nil || o.rep.Type != resp.TypeInteger || o.rep.Int != int64(o.tag)+1 {
			t.Errorf("member %d: %v %v, want %d", o.tag, o.rep, o.err, o.tag+1)
		}
	}
	info := exec(t, c, "INFO", "commandstats").Text()
	// 10 members, at most 4 per call: 4 + 4 + 2, each NOSCRIPT then EVAL.
	if !strings.Contains(info, "cmdstat_evalsha:calls=3,") || !strings.Contains(info, "cmdstat_eval:calls=3,") {
		t.Errorf("want 3 EVALSHA (NOSCRIPT) and 3 EVAL:\n%s", info)
	}
}

// TestMergeUnknownKey: a member whose key is unknown (KeyHash 0) is never
// overtaken, whatever the later request's KeyHash.
func TestMergeUnknownKey(t *testing.T) {
	m := conn.NewMerge(addOne, addMulti, 1, 8)
	c, g := gatedRealConn(t, conn.Config{Scripts: []*conn.Script{addOne, addMulti}})
	rec := newRecorder()
	release := busyWriter(t, c, g, rec)
	// u's member says it may touch any key; v's member is on v.
	for i, k := range []string{"u", "v"} {
		if err := c.Do(conn.Request{Cmd: memberCmd(k, 1), Callback: rec, Tag: uint64(i), Merge: m, Stable: true, KeyHash: uint64(5 * i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Do(conn.Request{Cmd: cmd("GET", "u"), Callback: rec, Tag: 200, KeyHash: 77}); err != nil {
		t.Fatal(err)
	}
	release()
	for _, o := range rec.wait(t, 4, 5*time.Second) {
		if o.tag == 200 && o.rep.Text() != "1" {
			t.Errorf("GET u = %v, want 1: it overtook a member of unknown key", o.rep)
		}
	}
}

// TestMergeTiming: a held member times out at its own deadline even while
// the writer is stuck; members whose deadlines are far apart are not
// merged into one call.
func TestMergeTiming(t *testing.T) {
	m := conn.NewMerge(addOne, addMulti, 1, 8)
	c, g := gatedRealConn(t, conn.Config{Scripts: []*conn.Script{addOne, addMulti}})
	rec := newRecorder()
	release := busyWriter(t, c, g, rec)
	start := time.Now()
	if err := c.Do(conn.Request{Cmd: memberCmd("t:a", 1), Callback: rec, Tag: 1, Merge: m, Stable: true, KeyHash: 1, Deadline: start.Add(50 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	got := rec.wait(t, 1, 5*time.Second)
	if got[0].tag != 1 || !errors.Is(got[0].err, conn.ErrTimeout) {
		t.Fatalf("held member: %+v, want ErrTimeout while the writer is stuck", got[0])
	}
	if d := time.Since(start); d > time.Second { // a loaded host's timers run late; never released: the writer is held
		t.Errorf("held member timed out after %v, deadline 50ms", d)
	}
	// Deadlines 1 s apart: two calls; 1 ms apart: one.
	dl := time.Now().Add(5 * time.Second)
	for i, d := range []time.Duration{0, time.Second, time.Second + time.Millisecond} {
		if err := c.Do(conn.Request{Cmd: memberCmd("t:"+strconv.Itoa(i), 1), Callback: rec, Tag: uint64(10 + i), Merge: m, Stable: true, KeyHash: uint64(10 + i), Deadline: dl.Add(d)}); err != nil {
			t.Fatal(err)
		}
	}
	release()
	rec.wait(t, 5, 5*time.Second)
	second := string(g.Writes()[1])
	if n, multi := strings.Count(second, "EVALSHA"), strings.Count(second, addMulti.SHA()); n != 2 || multi != 1 {
		t.Errorf("%d EVALSHA, %d merged: want the first alone and the other two merged:\n%q", n, multi, second)
	}
}

// TestMergePending: MaxPending and Stats count every member, held or in a
// merged call on its way.
func TestMergePending(t *testing.T) {
	m := conn.NewMerge(addOne, addMulti, 1, 8)
	c, g := gatedRealConn(t, conn.Config{Scripts: []*conn.Script{addOne, addMulti}, MaxPending: 4})
	rec := newRecorder()
	release := busyWriter(t, c, g, rec)
	for i := range 3 {
		if err := c.Do(conn.Request{Cmd: memberCmd("p:"+strconv.Itoa(i), 1), Callback: rec, Tag: uint64(i), Merge: m, Stable: true, KeyHash: uint64(i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	if p := c.Stats().Pending; p != 4 {
		t.Errorf("Pending %d with 3 members held, want 4", p)
	}
	if err := c.Do(conn.Request{Cmd: memberCmd("p:9", 1), Callback: rec, Merge: m, Stable: true, KeyHash: 9}); !errors.Is(err, conn.ErrOverloaded) {
		t.Errorf("Do over MaxPending with members held: %v, want ErrOverloaded", err)
	}
	release()
	rec.wait(t, 4, 5*time.Second)
	check.Eventually(t, 5*time.Second, "pending to drain", func() bool { return c.Stats().Pending == 0 })
}

// TestMergeBadReply: a merged call answered with an array of the wrong
// length fails every member with a protocol error, never a misattributed
// answer.
func TestMergeBadReply(t *testing.T) {
	short := conn.NewScript(`return {1}`)
	m := conn.NewMerge(addOne, short, 1, 8)
	c, g := gatedRealConn(t, conn.Config{Scripts: []*conn.Script{addOne, short}})
	rec := newRecorder()
	release := busyWriter(t, c, g, rec)
	for i := range 3 {
		if err := c.Do(conn.Request{Cmd: memberCmd("x:"+strconv.Itoa(i), 1), Callback: rec, Tag: uint64(i), Merge: m, Stable: true, KeyHash: uint64(i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	release()
	for _, o := range rec.wait(t, 4, 5*time.Second) {
		if o.tag != 100 && !errors.Is(o.err, resp.ErrProtocol) {
			t.Errorf("member %d: %v %v, want a protocol error", o.tag, o.rep, o.err)
		}
	}
}
