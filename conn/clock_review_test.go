package conn_test

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
)

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
	log := &jumpLog{}
	c := conn.New("fake:6379", conn.Config{Dialer: f.Dial, OnClockJump: log.jumped, DialTimeout: 5 * time.Second})
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
