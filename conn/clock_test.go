package conn_test

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/resp"
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

// jumpLog records the clock check's reports, and the order of reports
// and replies.
type jumpLog struct {
	mu      sync.Mutex
	jumps   []conn.ClockJump
	events  []string
	replies int
}

func (l *jumpLog) jumped(j conn.ClockJump) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.jumps = append(l.jumps, j)
	l.events = append(l.events, "jump")
}

func (l *jumpLog) Complete(tag uint64, r resp.Reply, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, "reply")
	l.replies++
}

func (l *jumpLog) snapshot() ([]conn.ClockJump, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]conn.ClockJump(nil), l.jumps...), append([]string(nil), l.events...)
}

// TestClockCheck: with OnClockJump set every write batch starts with TIME;
// a forward jump of the server's clock beyond the allowance is reported
// once, before the reply of the request sent in the batch that saw it; a
// backward jump is reported negative; without jumps nothing is reported,
// and with the check off no TIME is sent.
func TestClockCheck(t *testing.T) {
	f, offset := clockFake(t)
	log := &jumpLog{}
	c := fakeConn(t, f, conn.Config{OnClockJump: log.jumped})
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
	log := &jumpLog{}
	c := fakeConn(t, f, conn.Config{OnClockJump: log.jumped})
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
	log := &jumpLog{}
	c := fakeConn(t, f, conn.Config{OnClockJump: log.jumped, ClockRefresh: 20 * time.Millisecond})
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
