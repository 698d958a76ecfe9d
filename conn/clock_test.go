package conn_test

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
)

// clockFake answers TIME with the real time plus an offset the test moves.
func clockFake(t *testing.T) (*fake, *atomic.Int64) {
	f := newFake(t)
	var offset atomic.Int64
	f.handle("TIME", func(s *fakeSession, _ []string) {
		now := time.Now().Add(time.Duration(offset.Load()))
		sec, usec := strconv.FormatInt(now.Unix(), 10), strconv.Itoa(now.Nanosecond()/1000)
		s.reply(fmt.Sprintf("*2\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(sec), sec, len(usec), usec))
	})
	f.handle("SET", func(s *fakeSession, _ []string) { s.reply("+OK\r\n") })
	return f, &offset
}

// jumpLog records the clock check's reports (checkLog).
type jumpLog = checkLog[conn.ClockJump]

func newJumpLog() *jumpLog { return &jumpLog{name: "jump"} }

// TestClockCheck: with OnClockJump set every write batch starts with TIME;
// a forward jump of the server's clock beyond the allowance is reported
// once, before the reply of the request sent in the batch that saw it; a
// backward jump is reported negative; without jumps nothing is reported,
// and with the check off no TIME is sent.
func TestClockCheck(t *testing.T) {
	f, offset := clockFake(t)
	log := newJumpLog()
	c := fakeConn(t, f, conn.Config{OnClockJump: log.report})
	replies := 0
	do := func() {
		t.Helper()
		replies++
		if err := c.Do(conn.Request{Cmd: cmd("SET", "k", "v"), Callback: log, Deadline: time.Now().Add(time.Second)}); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			log.mu.Lock()
			n := log.replies
			log.mu.Unlock()
			if n == replies {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("no reply")
			}
			time.Sleep(time.Millisecond)
		}
	}
	for range 5 {
		do()
		time.Sleep(5 * time.Millisecond)
	}
	if j, _ := log.snapshot(); len(j) != 0 {
		t.Fatalf("no jump, yet reported: %+v", j)
	}
	offset.Store(int64(3 * time.Second))
	log.mu.Lock()
	log.events = nil
	log.mu.Unlock()
	do()
	j, ev := log.snapshot()
	if len(j) != 1 || j[0].Ahead < 2900*time.Millisecond || j[0].Ahead > 3100*time.Millisecond {
		t.Fatalf("a 3s forward jump: reported %+v", j)
	}
	if len(ev) != 2 || ev[0] != "jump" || ev[1] != "reply" {
		t.Fatalf("events %v; want the jump reported before the batch's reply", ev)
	}
	do() // the new reading is the baseline: no second report
	if j, _ := log.snapshot(); len(j) != 1 {
		t.Fatalf("reported again without a new jump: %+v", j)
	}
	time.Sleep(5 * time.Millisecond)
	offset.Store(int64(time.Second)) // 2s back
	do()
	if j, _ := log.snapshot(); len(j) != 2 || j[1].Ahead > -1900*time.Millisecond {
		t.Fatalf("a 2s backward jump: reported %+v", j)
	}
	names := f.session(0).commandNames()
	times := 0
	for _, n := range names {
		if n == "TIME" {
			times++
		}
	}
	if times < 8 {
		t.Errorf("%d TIME commands for 8 batches: %v", times, names)
	}

	// Off: no TIME.
	f2, _ := clockFake(t)
	c2 := fakeConn(t, f2, conn.Config{})
	if _, err := c2.Exec(t.Context(), "SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	for _, n := range f2.session(0).commandNames() {
		if n == "TIME" {
			t.Fatalf("the check is off, yet TIME was sent: %v", f2.session(0).commandNames())
		}
	}
}

// TestClockCheckRefused: a server that refuses TIME (an ACL without it)
// still serves; the check takes no reading, and reports the refusal once
// (the engine logs it: jumps there go unseen).
func TestClockCheckRefused(t *testing.T) {
	f := newFake(t)
	f.handle("TIME", func(s *fakeSession, _ []string) {
		s.reply("-NOPERM this user has no permissions to run the 'time' command\r\n")
	})
	f.handle("SET", func(s *fakeSession, _ []string) { s.reply("+OK\r\n") })
	log := newJumpLog()
	c := fakeConn(t, f, conn.Config{OnClockJump: log.report})
	for range 3 {
		if r, err := c.Exec(t.Context(), "SET", "k", "v"); err != nil || !r.IsOK() {
			t.Fatalf("SET with TIME refused: %v %v", r, err)
		}
	}
	// Reported once, at the handshake, as refused: no jump.
	if j, _ := log.snapshot(); len(j) != 1 || j[0].Refused == nil || j[0].Ahead != 0 {
		t.Fatalf("reported %+v; want one report of the refused TIME", j)
	}
}

// TestClockRefresh: an idle connection with the clock check on reads the
// server's clock every ClockRefresh (a PING, after its batch's TIME), and
// the Conn's Close ends that loop.
func TestClockRefresh(t *testing.T) {
	f, _ := clockFake(t)
	log := newJumpLog()
	c := fakeConn(t, f, conn.Config{OnClockJump: log.report, ClockRefresh: 20 * time.Millisecond})
	if err := c.WaitConnected(t.Context()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	times, pings := 0, 0
	for _, n := range f.session(0).commandNames() {
		switch n {
		case "TIME":
			times++
		case "PING":
			pings++
		}
	}
	if pings < 3 || times < pings {
		t.Errorf("idle for 200ms with ClockRefresh 20ms: %d PINGs, %d TIMEs", pings, times)
	}
	if j, _ := log.snapshot(); len(j) != 0 {
		t.Errorf("no jump, yet reported %+v", j)
	}
}

// TestClockTimeExpiredStillChecked (review of #32): a batch's TIME has
// the deadline of the batch's first request. When that request's deadline
// is short and a later request of the same batch (a grant) has a longer
// one, a slow server makes the expirer fail the TIME. Its late reply is
// still read, and the jump reported, before the grant's reply is
// delivered (before, it was skipped and the grant delivered unchecked).
func TestClockTimeExpiredStillChecked(t *testing.T) {
	f := newFake(t)
	var times atomic.Int32
	gate := make(chan struct{})
	f.handle("TIME", func(s *fakeSession, _ []string) {
		now := time.Now()
		n := times.Add(1)
		if n > 1 {
			now = now.Add(10 * time.Second) // the master's clock jumped 10 s
		}
		sec, usec := strconv.FormatInt(now.Unix(), 10), strconv.Itoa(now.Nanosecond()/1000)
		r := fmt.Sprintf("*2\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(sec), sec, len(usec), usec)
		if n == 2 {
			s.replyAfter(gate, r) // the server is slow on this batch
			return
		}
		s.reply(r)
	})
	f.handle("INFO", func(s *fakeSession, _ []string) {
		time.Sleep(30 * time.Millisecond) // both requests below join the first batch
		s.reply(bulk("# Server\r\nrun_id:abc\r\nuptime_in_seconds:500\r\nredis_version:7.0.0\r\n"))
	})
	f.handle("SET", func(s *fakeSession, _ []string) { s.reply("+OK\r\n") })
	log := newJumpLog()
	c := conn.New("fake:6379", conn.Config{Dialer: f.Dial, OnClockJump: log.report, DialTimeout: 5 * time.Second})
	t.Cleanup(func() { c.Close() })
	other := newRecorder()
	// A short request first (e.g. a release or another caller's attempt
	// with a short timeout), then a grant with the usual deadline.
	if err := c.Do(conn.Request{Cmd: cmd("SET", "other", "v"), Callback: other, Deadline: time.Now().Add(80 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(conn.Request{Cmd: cmd("SET", "lock", "tok", "NX", "PX", "10000"), Callback: log, Deadline: time.Now().Add(3 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	other.wait(t, 1, 5*time.Second) // the short one timed out, and the batch's TIME with it
	time.Sleep(20 * time.Millisecond)
	close(gate)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, ev := log.snapshot(); len(ev) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	j, ev := log.snapshot()
	t.Logf("TIMEs answered: %d; events: %v; jumps: %+v; session cmds: %v", times.Load(), ev, j, f.session(0).commandNames())
	if len(ev) == 0 || ev[0] != "jump" {
		t.Errorf("the grant's reply was delivered before (without) any clock check of its batch: events %v", ev)
	}
}

// TestClockRefreshBound (review of #32): readings of a connection that
// wrote once just after a refresh tick stay about ClockRefresh apart (the
// loop ticks at half the period; before, a write just past a tick put the
// next reading 2×ClockRefresh away).
func TestClockRefreshBound(t *testing.T) {
	f := newFake(t)
	var mu = make(chan struct{}, 1)
	mu <- struct{}{}
	var at []time.Time
	f.handle("TIME", func(s *fakeSession, _ []string) {
		<-mu
		at = append(at, time.Now())
		mu <- struct{}{}
		now := time.Now()
		sec, usec := strconv.FormatInt(now.Unix(), 10), strconv.Itoa(now.Nanosecond()/1000)
		s.reply(fmt.Sprintf("*2\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(sec), sec, len(usec), usec))
	})
	f.handle("SET", func(s *fakeSession, _ []string) { s.reply("+OK\r\n") })
	const refresh = 200 * time.Millisecond
	t0 := time.Now() // the ticker starts in New, a moment after this
	c := fakeConn(t, f, conn.Config{OnClockJump: func(conn.ClockJump) {}, ClockRefresh: refresh})
	time.Sleep(time.Until(t0.Add(refresh + 15*time.Millisecond))) // just after the first tick
	if _, err := c.Exec(t.Context(), "SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3*refresh + 50*time.Millisecond)
	<-mu
	got := append([]time.Time(nil), at...)
	mu <- struct{}{}
	var gaps []time.Duration
	maxGap := time.Duration(0)
	for i := 1; i < len(got); i++ {
		g := got[i].Sub(got[i-1])
		gaps = append(gaps, g.Round(time.Millisecond))
		maxGap = max(maxGap, g)
	}
	t.Logf("ClockRefresh %v; gaps between TIME readings: %v", refresh, gaps)
	if maxGap > refresh+refresh/4 {
		t.Errorf("readings %v apart on an idle connection, ClockRefresh %v", maxGap.Round(time.Millisecond), refresh)
	}
}
