package proxy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/resp"
)

// TestOverloadBusy: pipelined commands beyond the admission limit wait in
// the proxy, not on the masters; one whose wait passes QueueTimeout is
// answered -BUSY naming the proxy's queue, and never reaches a master.
// The masters are stopped, so the admitted commands take the per-master
// timeout and nothing else can start before it.
func TestOverloadBusy(t *testing.T) {
	e := startEnv(t, 5, func(c *Config) { c.QueueTimeout = time.Millisecond })
	ms := e.set.Masters()
	const n = 200
	rc := stopAndPipeline(t, e, "busy:", n)
	var busy []int
	unavailable := 0
	for i := range n {
		r := rc.read()
		switch {
		case strings.HasPrefix(r, "-BUSY redlock proxy: overloaded: "):
			if !strings.Contains(r, "in the proxy's queue") || !strings.Contains(r, "the masters were not asked") {
				t.Errorf("reply %d: %q; want it to name the proxy's queue and say the masters were not asked", i, r)
			}
			busy = append(busy, i)
		case strings.Contains(r, "unavailable"):
			unavailable++
		default:
			t.Fatalf("reply %d: %q; want -BUSY or unavailable with every master stopped", i, r)
		}
	}
	// The limit starts at 64: the rest waited for the stopped masters'
	// timeout, far past the 1ms queue timeout.
	if len(busy) < n-64 || unavailable == 0 {
		t.Fatalf("%d BUSY, %d unavailable of %d; want at least %d BUSY (the start limit is 64) and some sent to the masters", len(busy), unavailable, n, n-64)
	}
	if got := e.srv.Stats().OverloadRefusals; got != uint64(len(busy)) {
		t.Errorf("Stats().OverloadRefusals = %d; want %d", got, len(busy))
	}
	if info := rc.cmd("INFO", "proxy"); !strings.Contains(info, fmt.Sprintf("overload_refusals:%d\r\n", len(busy))) {
		t.Errorf("INFO proxy lacks overload_refusals:%d", len(busy))
	}
	for _, m := range ms {
		m.Resume()
	}
	// What was sent to the stopped masters executes now (then its
	// cleanup); what was refused never reaches them.
	time.Sleep(300 * time.Millisecond)
	ctx := context.Background()
	for mi, c := range e.masters {
		for _, i := range busy {
			if n, err := c.Exists(ctx, fmt.Sprint("busy:", i)).Result(); err != nil || n != 0 {
				t.Fatalf("master %d: busy:%d exists (%d, %v): a refused command reached the masters", mi, i, n, err)
			}
		}
	}
}

// stopAndPipeline stops every master of e and pipelines n SET NX PX of
// keys prefix+i on one new connection, which it returns.
func stopAndPipeline(t *testing.T, e *env, prefix string, n int) *rawConn {
	t.Helper()
	for _, m := range e.set.Masters() {
		if err := m.Pause(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Resume() })
	}
	rc := dialRaw(t, e.addr)
	var req []byte
	for i := range n {
		req = resp.AppendCommandStrings(req, "SET", fmt.Sprint(prefix, i), "v", "NX", "PX", "30000")
	}
	rc.send(string(req))
	return rc
}

// TestAdmissionLimit: the limit is cut when commands take longer than
// the target and grows again while commands wait and complete in time.
func TestAdmissionLimit(t *testing.T) {
	a := newAdmission(10*time.Millisecond, time.Second, 1000)
	s := &Server{adm: a}
	start := a.limit
	a.inflight = 1
	s.admitted(time.Now().Add(-50 * time.Millisecond)) // slow
	if a.limit >= start {
		t.Fatalf("limit %v after a slow command; want below %v", a.limit, start)
	}
	cut := a.limit
	a.inflight = 1
	s.admitted(time.Now().Add(-50 * time.Millisecond)) // slow again within the target: one cut per target
	if a.limit != cut {
		t.Fatalf("limit %v after a second slow command at once; want %v (one cut per target)", a.limit, cut)
	}
	a.queue = []*call{{a: &asyncState{arrived: time.Now()}}, {a: &asyncState{arrived: time.Now()}}}
	a.inflight = int(a.limit) + 10 // nothing can start: the queue stays
	for range 100 {
		a.inflight++
		s.admitted(time.Now())
	}
	if a.limit <= cut {
		t.Fatalf("limit %v after fast completions with commands waiting; want above %v", a.limit, cut)
	}
	for range 10000 {
		a.inflight = 1 << 20
		s.admitted(time.Now())
	}
	if a.limit > a.max {
		t.Fatalf("limit %v above the maximum %v", a.limit, a.max)
	}
	a2 := newAdmission(10*time.Millisecond, time.Second, 1000)
	for range 1000 {
		a2.inflight = 1
		(&Server{adm: a2}).admitted(time.Now().Add(-time.Second))
		a2.lastCut = time.Time{}
	}
	if a2.limit < minAdmit {
		t.Fatalf("limit %v below the minimum %d", a2.limit, minAdmit)
	}
}
