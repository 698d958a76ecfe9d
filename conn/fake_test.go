package conn_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/internal/test/check"
	"github.com/redlock-dev/redlock/resp"
)

// timerSlack is how much later than a control timer armed for the same
// deadline (see control) a timed-out request may be failed.
const timerSlack = 50 * time.Millisecond

func TestFIFOCompletion(t *testing.T) {
	for _, tc := range []struct {
		name      string
		n         int
		readDelay time.Duration
	}{
		{"fast server", 100, 0},
		{"slow server", 100, 2 * time.Millisecond},
		{"many", 2000, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			f.readDelay = tc.readDelay
			c := fakeConn(t, f, conn.Config{})
			rec := newRecorder()
			var wg sync.WaitGroup
			for i := range tc.n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					tag := uint64(i)
					err := c.Do(conn.Request{Cmd: cmd("ECHO", "reply-"+strconv.Itoa(i)), Callback: rec, Tag: tag})
					if err != nil {
						t.Errorf("Do %d: %v", i, err)
					}
				}()
			}
			wg.Wait()
			got := rec.wait(t, tc.n, 10*time.Second)
			if len(got) != tc.n {
				t.Fatalf("got %d callbacks, want %d", len(got), tc.n)
			}
			seen := make([]bool, tc.n)
			for _, o := range got {
				if o.err != nil {
					t.Errorf("tag %d: err %v", o.tag, o.err)
					continue
				}
				if want := "reply-" + strconv.FormatUint(o.tag, 10); o.rep.Text() != want {
					t.Errorf("tag %d got reply %q, want %q", o.tag, o.rep.Text(), want)
				}
				if seen[o.tag] {
					t.Errorf("tag %d completed twice", o.tag)
				}
				seen[o.tag] = true
			}
			st := c.Stats()
			if st.Requests != uint64(tc.n) || st.Pending != 0 || st.Timeouts != 0 || st.Broken != 0 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

func TestAutoPipelining(t *testing.T) {
	f := newFake(t)
	f.readDelay = 5 * time.Millisecond // every read of the socket takes 5ms
	c := fakeConn(t, f, conn.Config{})
	const workers, perWorker = 8, 100
	rec := newRecorder()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				tag := uint64(w*perWorker + i)
				if err := c.Do(conn.Request{Cmd: cmd("ECHO", strconv.FormatUint(tag, 10)), Callback: rec, Tag: tag}); err != nil {
					t.Errorf("Do: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	got := rec.wait(t, workers*perWorker, 10*time.Second)
	for _, o := range got {
		if o.err != nil || o.rep.Text() != strconv.FormatUint(o.tag, 10) {
			t.Errorf("tag %d: reply %v err %v", o.tag, o.rep, o.err)
		}
	}
	st := c.Stats()
	t.Logf("requests %d, writes %d", st.Requests, st.Writes)
	if st.Requests != workers*perWorker {
		t.Errorf("Requests = %d, want %d", st.Requests, workers*perWorker)
	}
	if st.Writes == 0 || st.Writes > st.Requests/10 {
		t.Errorf("Writes = %d for %d requests: not batched", st.Writes, st.Requests)
	}
}

// TestDeadline: a request the server does not answer fails with ErrTimeout
// at its deadline even though the server is stuck; its late reply is
// dropped and FIFO stays aligned.
func TestDeadline(t *testing.T) {
	type req struct {
		stall   bool          // the server holds this reply (and so all after it) until released
		timeout time.Duration // 0: no deadline; the request must get its own reply
	}
	for _, tc := range []struct {
		name string
		reqs []req
	}{
		{"stalled head times out, next gets its reply", []req{{stall: true, timeout: 100 * time.Millisecond}, {}}},
		{"later-queued earlier deadline fires first", []req{{stall: true, timeout: 300 * time.Millisecond}, {timeout: 60 * time.Millisecond}, {}}},
		{"no-deadline head does not block expiry", []req{{stall: true}, {timeout: 60 * time.Millisecond}, {timeout: 120 * time.Millisecond}, {}}},
		{"deadline already passed", []req{{stall: true, timeout: -time.Millisecond}, {}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			retryTiming(t, func() (violations []string) {
				f := newFake(t)
				release := make(chan struct{})
				var releaseOnce sync.Once
				defer releaseOnce.Do(func() { close(release) })
				f.handle("STALL", func(s *fakeSession, args []string) { s.replyAfter(release, bulk(args[1])) })
				c := fakeConn(t, f, conn.Config{})
				rec := newRecorder()

				deadlines := make([]time.Time, len(tc.reqs))
				controls := make([]control, len(tc.reqs))
				nTimeouts := 0
				for i, r := range tc.reqs {
					name, tag := "ECHO", strconv.Itoa(i)
					if r.stall {
						name = "STALL"
					}
					if r.timeout != 0 {
						deadlines[i] = time.Now().Add(r.timeout)
						controls[i] = newControl(deadlines[i])
						nTimeouts++
					}
					if err := c.Do(conn.Request{Cmd: cmd(name, tag), Deadline: deadlines[i], Callback: rec, Tag: uint64(i)}); err != nil {
						t.Fatalf("Do %d: %v", i, err)
					}
				}
				// Only the deadlines can complete anything while the server stalls.
				got := rec.wait(t, nTimeouts, 5*time.Second)
				for _, o := range got {
					dl := deadlines[o.tag]
					if dl.IsZero() {
						t.Fatalf("request %d without deadline completed while the server stalls: %v %v", o.tag, o.rep, o.err)
					}
					if !errors.Is(o.err, conn.ErrTimeout) {
						t.Errorf("request %d: err %v, want ErrTimeout", o.tag, o.err)
					}
					ctl := controls[o.tag].firedAt(t)
					if o.at.Before(dl) {
						t.Errorf("request %d failed %v before its deadline", o.tag, dl.Sub(o.at))
					}
					if o.at.After(ctl.Add(timerSlack)) {
						violations = append(violations, fmt.Sprintf(
							"request %d failed %v after its deadline (control timer: %v), want <= control + %v",
							o.tag, o.at.Sub(dl), ctl.Sub(dl), timerSlack))
					}
				}
				// Timeouts is counted right after the callbacks return.
				check.Eventually(t, 5*time.Second, "Stats.Timeouts", func() bool { return c.Stats().Timeouts == uint64(nTimeouts) })
				if st := c.Stats(); st.Pending != len(tc.reqs) {
					t.Errorf("stats while stalled: %+v (want %d pending)", st, len(tc.reqs))
				}

				// The server catches up: late replies are dropped, the others
				// go to their own requests, and a new request gets its own.
				releaseOnce.Do(func() { close(release) })
				if err := c.Do(conn.Request{Cmd: cmd("ECHO", "after"), Callback: rec, Tag: 1000}); err != nil {
					t.Fatal(err)
				}
				got = rec.wait(t, len(tc.reqs)+1, 5*time.Second)
				for i := range tc.reqs {
					calls := byTag(got, uint64(i))
					if len(calls) != 1 {
						t.Fatalf("request %d completed %d times: %v", i, len(calls), calls)
					}
					if deadlines[i].IsZero() && (calls[0].err != nil || calls[0].rep.Text() != strconv.Itoa(i)) {
						t.Errorf("request %d: reply %v err %v, want %q", i, calls[0].rep, calls[0].err, strconv.Itoa(i))
					}
				}
				after := byTag(got, 1000)
				if len(after) != 1 || after[0].err != nil || after[0].rep.Text() != "after" {
					t.Errorf("request after the stall: %v", after)
				}
				if len(got) != len(tc.reqs)+1 {
					t.Errorf("%d callbacks, want %d: %v", len(got), len(tc.reqs)+1, got)
				}
				if st := c.Stats(); st.Pending != 0 || st.Connects != 1 {
					t.Errorf("stats after: %+v", st)
				}
				return violations
			})
		})
	}
}

// TestBadReply: malformed bytes from the server break the connection; every
// pending request fails with ErrBroken wrapping the protocol error, and the
// Conn reconnects.
func TestBadReply(t *testing.T) {
	for _, tc := range []struct{ name, garbage string }{
		{"unknown type byte", "?junk\r\n"},
		{"bad integer", ":12x\r\n"},
		{"bad bulk length", "$abc\r\n"},
		{"empty line", "\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			gate := make(chan struct{})
			f.handle("BAD", func(s *fakeSession, args []string) { s.replyAfter(gate, tc.garbage) })
			c := fakeConn(t, f, conn.Config{ReconnectMin: time.Millisecond, ReconnectMax: 5 * time.Millisecond})
			rec := newRecorder()
			const n = 5
			if err := c.Do(conn.Request{Cmd: cmd("BAD"), Callback: rec, Tag: 0}); err != nil {
				t.Fatal(err)
			}
			for i := 1; i < n; i++ {
				if err := c.Do(conn.Request{Cmd: cmd("ECHO", "x"), Callback: rec, Tag: uint64(i)}); err != nil {
					t.Fatal(err)
				}
			}
			close(gate)
			got := rec.wait(t, n, 5*time.Second)
			for _, o := range got {
				var be *conn.BrokenError
				if !errors.Is(o.err, conn.ErrBroken) || !errors.As(o.err, &be) || !errors.Is(o.err, resp.ErrProtocol) {
					t.Errorf("tag %d: err %v, want a *BrokenError matching ErrBroken and resp.ErrProtocol", o.tag, o.err)
				}
			}
			checkReconnects(t, c, f, 2)
			if st := c.Stats(); st.Broken != n {
				t.Errorf("Stats.Broken = %d, want %d", st.Broken, n)
			}
		})
	}
}

// checkReconnects waits until the Conn is on its wantSessions-th session and
// checks that it works there.
func checkReconnects(t *testing.T, c *conn.Conn, f *fake, wantSessions int) {
	t.Helper()
	check.Eventually(t, 5*time.Second, "reconnect", func() bool { return c.Stats().Connects >= uint64(wantSessions) })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.WaitConnected(ctx); err != nil {
		t.Fatalf("WaitConnected: %v", err)
	}
	rep, err := c.Exec(ctx, "ECHO", "again")
	if err != nil || rep.Text() != "again" {
		t.Fatalf("Exec after reconnect: %v %v", rep, err)
	}
	if got := f.numSessions(); got != wantSessions {
		t.Errorf("fake saw %d sessions, want %d", got, wantSessions)
	}
}

// TestUnexpectedReply: a reply with no request pending means the stream is
// out of step: the connection is treated as broken and re-established.
func TestUnexpectedReply(t *testing.T) {
	for _, tc := range []struct {
		name string
		send func(t *testing.T, c *conn.Conn, f *fake)
	}{
		{"unsolicited", func(t *testing.T, c *conn.Conn, f *fake) {
			f.session(0).reply("+surprise\r\n")
		}},
		{"double reply", func(t *testing.T, c *conn.Conn, f *fake) {
			f.handle("DOUBLE", func(s *fakeSession, args []string) {
				s.reply("+one\r\n")
				s.reply("+two\r\n")
			})
			rec := newRecorder()
			if err := c.Do(conn.Request{Cmd: cmd("DOUBLE"), Callback: rec}); err != nil {
				t.Fatal(err)
			}
			got := rec.wait(t, 1, 5*time.Second)
			if got[0].err != nil || got[0].rep.Text() != "one" {
				t.Errorf("first reply: %v %v", got[0].rep, got[0].err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			c := fakeConn(t, f, conn.Config{ReconnectMin: time.Millisecond, ReconnectMax: 5 * time.Millisecond})
			tc.send(t, c, f)
			checkReconnects(t, c, f, 2)
		})
	}
}

// TestServerClosesMidPipeline: every pending request fails at once with a
// *BrokenError; while the master cannot be dialed Do fails fast with ErrDown
// (wrapping the dial error) and the Conn retries with backoff; it then
// reconnects by itself.
func TestServerClosesMidPipeline(t *testing.T) {
	f := newFake(t)
	gate := make(chan struct{})
	defer close(gate)
	f.handle("HOLD", func(s *fakeSession, args []string) { s.replyAfter(gate, "+OK\r\n") })
	const rmin, rmax = 10 * time.Millisecond, 40 * time.Millisecond
	c := fakeConn(t, f, conn.Config{ReconnectMin: rmin, ReconnectMax: rmax})
	rec := newRecorder()
	const n = 50
	for i := range n {
		if err := c.Do(conn.Request{Cmd: cmd("HOLD"), Callback: rec, Tag: uint64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	check.Eventually(t, 5*time.Second, "fake to read all requests", func() bool { return len(f.session(0).commands()) >= n+1 })
	errDialRefused := errors.New("fake: connection refused")
	f.setDialErr(errDialRefused)
	dialsBefore := len(f.dialTimes())
	f.session(0).nc.Close()

	got := rec.wait(t, n, 5*time.Second)
	first, last := got[0].at, got[0].at
	var cause *conn.BrokenError
	for _, o := range got {
		var be *conn.BrokenError
		if !errors.As(o.err, &be) || !errors.Is(o.err, conn.ErrBroken) {
			t.Fatalf("tag %d: err %v, want *BrokenError", o.tag, o.err)
		}
		if cause == nil {
			cause = be
		} else if be != cause {
			t.Errorf("tag %d failed with a different BrokenError (%p vs %p): not failed at once", o.tag, be, cause)
		}
		if o.at.Before(first) {
			first = o.at
		}
		if o.at.After(last) {
			last = o.at
		}
	}
	if cause.Addr != "fake:6379" {
		t.Errorf("BrokenError.Addr = %q", cause.Addr)
	}
	if spread := last.Sub(first); spread > time.Second {
		t.Errorf("pending requests failed over %v, want at once", spread)
	}

	// Down: Do fails fast.
	var durs []time.Duration
	for range 100 {
		start := time.Now()
		err := c.Do(conn.Request{Cmd: cmd("PING"), Callback: rec})
		durs = append(durs, time.Since(start))
		if !errors.Is(err, conn.ErrDown) {
			t.Fatalf("Do while down: %v, want ErrDown", err)
		}
	}
	slices.Sort(durs)
	if med := durs[len(durs)/2]; med >= time.Millisecond {
		t.Errorf("median Do while down took %v, want < 1ms", med)
	}

	// Reconnect attempts back off: gaps at least ReconnectMin/2 (full
	// jitter), growing to at most ReconnectMax. Only lower bounds on gaps
	// are checked: a loaded machine makes timers late, never early.
	check.Eventually(t, 10*time.Second, "6 reconnect attempts", func() bool { return len(f.dialTimes())-dialsBefore >= 6 })
	err := c.Do(conn.Request{Cmd: cmd("PING"), Callback: rec})
	if !errors.Is(err, conn.ErrDown) || !errors.Is(err, errDialRefused) {
		t.Errorf("Do while down: %v, want ErrDown wrapping the dial error", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	err = c.WaitConnected(ctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, conn.ErrDown) || !errors.Is(err, errDialRefused) {
		t.Errorf("WaitConnected while down: %v", err)
	}
	dials := f.dialTimes()[dialsBefore:]
	// Backoff b doubles 10, 20, 40, 40ms; each wait is in [b/2, b].
	minGap := []time.Duration{0, rmin / 2, rmin, rmax / 2, rmax / 2, rmax / 2}
	for i := 1; i < 6; i++ {
		if gap := dials[i].Sub(dials[i-1]); gap < minGap[i]-time.Millisecond {
			t.Errorf("reconnect attempt %d came %v after the previous one, want >= %v", i, gap, minGap[i])
		}
	}

	f.setDialErr(nil)
	checkReconnects(t, c, f, 2)
	if st := c.Stats(); st.Broken != n || st.Connects != 2 {
		t.Errorf("stats %+v", st)
	}
}

const testScript = "return redis.call('INCRBY', KEYS[1], ARGV[1])"

func evalShaCmd(s *conn.Script, keys []string, args []string) []byte {
	b := s.AppendEvalSha(nil, len(keys), len(args))
	for _, k := range keys {
		b = resp.AppendBulkString(b, k)
	}
	for _, a := range args {
		b = resp.AppendBulkString(b, a)
	}
	return b
}

// TestDrainAfterNoScript: a request answered NOSCRIPT is re-sent as EVAL;
// a Drain begun before the NOSCRIPT came waits for the EVAL's answer too
// (the request is not complete until then).
func TestDrainAfterNoScript(t *testing.T) {
	script := conn.NewScript(testScript)
	f := newFake(t)
	noscript, eval := make(chan struct{}), make(chan struct{})
	evalSeen := make(chan struct{})
	f.handle("EVALSHA", func(s *fakeSession, _ []string) {
		s.replyAfter(noscript, "-NOSCRIPT No matching script. Please use EVAL.\r\n")
	})
	f.handle("EVAL", func(s *fakeSession, _ []string) {
		close(evalSeen)
		s.replyAfter(eval, ":7\r\n")
	})
	c := fakeConn(t, f, conn.Config{})
	rec := newRecorder()
	if err := c.Do(conn.Request{Cmd: evalShaCmd(script, []string{"k"}, nil), Script: script, Callback: rec}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Drain(context.Background()) }()
	time.Sleep(20 * time.Millisecond) // Drain is waiting
	close(noscript)
	select {
	case <-evalSeen: // the NOSCRIPT came back and the EVAL went out
	case <-time.After(5 * time.Second):
		t.Fatal("no EVAL after the NOSCRIPT")
	}
	select {
	case err := <-done:
		t.Fatalf("Drain returned %v before the EVAL was answered", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(eval)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Drain: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Drain did not return after the EVAL's answer")
	}
	if got := rec.wait(t, 1, time.Second); got[0].err != nil || got[0].rep.Int != 7 {
		t.Fatalf("the request completed with %+v", got[0])
	}
}

func TestNoScriptFallback(t *testing.T) {
	script := conn.NewScript(testScript)
	keys, args := []string{"k1", "{k}2"}, []string{"7", "arg two"}
	for _, tc := range []struct {
		name        string
		withScript  bool   // Request.Script set
		stable      bool   // Request.Stable set; otherwise the test scribbles over Cmd after Do
		evalshaRep  string // the fake's EVALSHA reply
		timeout     bool   // the request times out before the NOSCRIPT arrives
		wantCmds    []string
		wantReply   string
		wantTimeout bool
	}{
		{"fallback to EVAL", true, false, "-NOSCRIPT No matching script. Please use EVAL.\r\n", false,
			[]string{"EVALSHA", "EVAL", "ECHO"}, "7", false},
		{"fallback to EVAL from the caller's Cmd", true, true, "-NOSCRIPT No matching script. Please use EVAL.\r\n", false,
			[]string{"EVALSHA", "EVAL", "ECHO"}, "7", false},
		{"no fallback without Script", false, false, "-NOSCRIPT No matching script. Please use EVAL.\r\n", false,
			[]string{"EVALSHA", "ECHO"}, "-NOSCRIPT No matching script. Please use EVAL.", false},
		{"EVALSHA succeeds", true, false, ":1\r\n", false,
			[]string{"EVALSHA", "ECHO"}, "1", false},
		{"other error is not retried", true, false, "-ERR wrong number of arguments\r\n", false,
			[]string{"EVALSHA", "ECHO"}, "-ERR wrong number of arguments", false},
		{"timed out request is not retried", true, false, "-NOSCRIPT No matching script. Please use EVAL.\r\n", true,
			[]string{"EVALSHA", "ECHO"}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			gate := make(chan struct{})
			f.handle("EVALSHA", func(s *fakeSession, a []string) {
				if a[1] != script.SHA() || !slices.Equal(a[2:], append([]string{"2"}, append(keys, args...)...)) {
					t.Errorf("EVALSHA args %q", a)
				}
				s.replyAfter(gate, tc.evalshaRep)
			})
			f.handle("EVAL", func(s *fakeSession, a []string) {
				if !slices.Equal(a[1:], append([]string{testScript, "2"}, append(keys, args...)...)) {
					t.Errorf("EVAL args %q", a)
				}
				s.reply(":7\r\n")
			})
			c := fakeConn(t, f, conn.Config{})
			rec := newRecorder()
			req := conn.Request{Cmd: evalShaCmd(script, keys, args), Callback: rec, Tag: 42, Stable: tc.stable}
			if tc.withScript {
				req.Script = script
			}
			if tc.timeout {
				req.Deadline = time.Now().Add(20 * time.Millisecond)
			}
			if err := c.Do(req); err != nil {
				t.Fatal(err)
			}
			if !tc.stable { // Do copied what it needs
				for i := range req.Cmd {
					req.Cmd[i] = 'x'
				}
			}
			if tc.timeout {
				rec.wait(t, 1, 5*time.Second)
			}
			close(gate)
			got := rec.wait(t, 1, 5*time.Second)
			// A later request's reply proves the stream went past any retry.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if rep, err := c.Exec(ctx, "ECHO", "probe"); err != nil || rep.Text() != "probe" {
				t.Fatalf("probe: %v %v", rep, err)
			}
			got = rec.all()
			if len(got) != 1 {
				t.Fatalf("callback called %d times: %v", len(got), got)
			}
			o := got[0]
			switch {
			case o.tag != 42:
				t.Errorf("tag %d, want 42", o.tag)
			case tc.wantTimeout:
				if !errors.Is(o.err, conn.ErrTimeout) {
					t.Errorf("err %v, want ErrTimeout", o.err)
				}
			case o.err != nil || textOf(o.rep) != tc.wantReply:
				t.Errorf("reply %q err %v, want %q", textOf(o.rep), o.err, tc.wantReply)
			}
			var names []string
			for _, n := range f.session(0).commandNames() {
				if n != "INFO" && n != "COMMAND" { // the handshake's
					names = append(names, n)
				}
			}
			if !slices.Equal(names, tc.wantCmds) {
				t.Errorf("server saw %v, want %v", names, tc.wantCmds)
			}
		})
	}
}

func TestHandshake(t *testing.T) {
	script := conn.NewScript(testScript)
	info := []string{"INFO", "server"}
	probe := [][]string{{"COMMAND", "INFO", "DELEX", "DELIFEQ"}, {"COMMAND", "DOCS", "SET"}} // native commands (the fake has none)
	then := func(head [][]string, tail ...[]string) [][]string {
		return append(append(slices.Clone(head), probe...), tail...)
	}
	for _, tc := range []struct {
		name    string
		cfg     conn.Config
		user    string // the fake's account
		pass    string
		infoErr bool
		want    [][]string
		runID   string
	}{
		{"nothing to set", conn.Config{}, "", "", false, then(nil, info), "abc"},
		{"password", conn.Config{Password: "pw"}, "", "pw", false,
			then([][]string{{"AUTH", "pw"}}, info), "abc"},
		{"username and password", conn.Config{Username: "u", Password: "pw"}, "u", "pw", false,
			then([][]string{{"AUTH", "u", "pw"}}, info), "abc"},
		{"db", conn.Config{DB: 3}, "", "", false, then([][]string{{"SELECT", "3"}}, info), "abc"},
		{"all", conn.Config{Username: "u", Password: "pw", DB: 1, Scripts: []*conn.Script{script}}, "u", "pw", false,
			then([][]string{{"AUTH", "u", "pw"}, {"SELECT", "1"}, {"SCRIPT", "LOAD", testScript}}, info), "abc"},
		{"INFO not supported", conn.Config{}, "", "", true, then(nil, info), ""},
		{"DisableNative", conn.Config{DisableNative: true}, "", "", false, [][]string{info}, "abc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			f.username, f.password, f.infoErr = tc.user, tc.pass, tc.infoErr
			c := fakeConn(t, f, tc.cfg)
			if got := f.session(0).commands(); !slices.EqualFunc(got, tc.want, slices.Equal) {
				t.Errorf("handshake %q, want %q", got, tc.want)
			}
			in := c.Info()
			if in.RunID != tc.runID {
				t.Errorf("RunID %q, want %q", in.RunID, tc.runID)
			}
			if tc.runID != "" && (in.Version != "7.0.0" || in.Uptime != 5*time.Second) {
				t.Errorf("Info %+v", in)
			}
			if in.ConnectedAt.IsZero() || time.Since(in.ConnectedAt) > time.Minute {
				t.Errorf("ConnectedAt %v", in.ConnectedAt)
			}
			if !c.Connected() || c.Addr() != "fake:6379" {
				t.Errorf("Connected %v Addr %q", c.Connected(), c.Addr())
			}
		})
	}
}

func TestHandshakeRejected(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cfg        conn.Config
		selectErr  bool
		wantPrefix string
	}{
		{"wrong password", conn.Config{Password: "nope"}, false, "WRONGPASS"},
		{"wrong user", conn.Config{Username: "eve", Password: "secret"}, false, "WRONGPASS"},
		{"bad db", conn.Config{DB: 99}, true, "ERR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			f.password = "secret"
			if tc.selectErr {
				f.handle("SELECT", func(s *fakeSession, a []string) { s.reply("-ERR DB index is out of range\r\n") })
			}
			cfg := tc.cfg
			cfg.Dialer = f.Dial
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			start := time.Now()
			c, err := conn.Dial(ctx, "fake:6379", cfg)
			if err == nil {
				c.Close()
				t.Fatal("Dial succeeded")
			}
			// The first attempt's error is returned, not the ctx's end.
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("Dial took %v to fail", d)
			}
			var re *resp.Error
			if !errors.As(err, &re) || re.Prefix() != tc.wantPrefix {
				t.Errorf("Dial error %v (%T), want one wrapping a *resp.Error %s", err, err, tc.wantPrefix)
			}
			if !errors.Is(err, conn.ErrDown) {
				t.Errorf("Dial error %v does not match ErrDown", err)
			}
		})
	}
}

func TestDialErrors(t *testing.T) {
	errRefused := errors.New("fake: refused")
	t.Run("dial error returned at once", func(t *testing.T) {
		f := newFake(t)
		f.setDialErr(errRefused)
		start := time.Now()
		_, err := conn.Dial(context.Background(), "fake:6379", conn.Config{Dialer: f.Dial})
		if !errors.Is(err, errRefused) || !errors.Is(err, conn.ErrDown) {
			t.Errorf("Dial: %v", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("Dial took %v", d)
		}
	})
	t.Run("ctx ends first", func(t *testing.T) {
		block := make(chan struct{})
		defer close(block)
		dialer := func(ctx context.Context, _, _ string) (netConn, error) {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-block:
				return nil, errRefused
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		defer cancel()
		_, err := conn.Dial(ctx, "fake:6379", conn.Config{Dialer: dialer})
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, conn.ErrDown) {
			t.Errorf("Dial: %v", err)
		}
	})
	// A connect attempt that runs out of DialTimeout is the Conn's own
	// timeout: its error matches ErrDown and ErrConnectTimeout, never the
	// caller's context.DeadlineExceeded (issue 31 item 6: a partitioned
	// master read as "command timed out" through the engine's errors).
	ownTimeout := func(t *testing.T, what string, err error) {
		t.Helper()
		if !errors.Is(err, conn.ErrDown) || !errors.Is(err, conn.ErrConnectTimeout) {
			t.Errorf("%s: %v, want ErrDown and ErrConnectTimeout", what, err)
		}
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("%s: %v matches a deadline; the dial's own timeout must not read as the caller's", what, err)
		}
	}
	t.Run("handshake times out", func(t *testing.T) {
		f := newFake(t)
		f.handle("INFO", func(*fakeSession, []string) {}) // never answers
		start := time.Now()
		_, err := conn.Dial(context.Background(), "fake:6379", conn.Config{Dialer: f.Dial, DialTimeout: 50 * time.Millisecond})
		ownTimeout(t, "Dial", err)
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("Dial took %v", d)
		}
	})
	t.Run("dial times out", func(t *testing.T) {
		// What a black-holed address gives: Go's own dial timeout
		// ("dial tcp …: i/o timeout", which matches
		// context.DeadlineExceeded), here without sending a packet: the
		// dial starts once its context has ended.
		dialer := func(ctx context.Context, network, addr string) (netConn, error) {
			<-ctx.Done()
			var d net.Dialer
			return d.DialContext(ctx, network, "127.0.0.1:1")
		}
		c := conn.New("blackhole:6379", conn.Config{Dialer: dialer, DialTimeout: 20 * time.Millisecond, ReconnectMin: time.Hour, ReconnectMax: time.Hour})
		defer c.Close()
		ownTimeout(t, "WaitFirstAttempt", c.WaitFirstAttempt(context.Background()))
		ownTimeout(t, "DownErr", c.DownErr())
		err := c.Do(conn.Request{Cmd: cmd("PING"), Callback: newRecorder()})
		ownTimeout(t, "Do", err)
		if !strings.Contains(err.Error(), "i/o timeout") || !strings.Contains(err.Error(), "blackhole:6379") {
			t.Errorf("Do: %q lacks the address or the dial's own words", err)
		}
	})
	t.Run("bad requests", func(t *testing.T) {
		f := newFake(t)
		c := fakeConn(t, f, conn.Config{})
		rec := newRecorder()
		if err := c.Do(conn.Request{Callback: rec}); !errors.Is(err, conn.ErrBadCommand) {
			t.Errorf("empty Cmd: %v", err)
		}
		if err := c.Do(conn.Request{Cmd: cmd("PING")}); !errors.Is(err, conn.ErrBadCommand) {
			t.Errorf("nil Callback: %v", err)
		}
		if st := c.Stats(); st.Requests != 0 {
			t.Errorf("rejected requests counted: %+v", st)
		}
	})
}

func TestMaxPending(t *testing.T) {
	f := newFake(t)
	gate := make(chan struct{})
	f.handle("HOLD", func(s *fakeSession, args []string) { s.replyAfter(gate, "+OK\r\n") })
	const max = 10
	c := fakeConn(t, f, conn.Config{MaxPending: max})
	rec := newRecorder()
	for i := range max {
		if err := c.Do(conn.Request{Cmd: cmd("HOLD"), Callback: rec, Tag: uint64(i)}); err != nil {
			t.Fatalf("Do %d: %v", i, err)
		}
	}
	for range 3 {
		if err := c.Do(conn.Request{Cmd: cmd("HOLD"), Callback: rec}); !errors.Is(err, conn.ErrOverloaded) {
			t.Fatalf("Do past MaxPending: %v, want ErrOverloaded", err)
		}
	}
	if st := c.Stats(); st.Pending != max || st.Requests != max {
		t.Errorf("stats %+v", st)
	}
	close(gate)
	got := rec.wait(t, max, 5*time.Second)
	for _, o := range got {
		if o.err != nil || !o.rep.IsOK() {
			t.Errorf("tag %d: %v %v", o.tag, o.rep, o.err)
		}
	}
	check.Eventually(t, 5*time.Second, "pending to drain", func() bool { return c.Stats().Pending == 0 })
	if err := c.Do(conn.Request{Cmd: cmd("PING"), Callback: rec}); err != nil {
		t.Errorf("Do after the stall: %v", err)
	}
	rec.wait(t, max+1, 5*time.Second)
}

func TestClose(t *testing.T) {
	t.Run("pending requests get ErrClosed", func(t *testing.T) {
		f := newFake(t)
		gate := make(chan struct{})
		defer close(gate)
		f.handle("HOLD", func(s *fakeSession, args []string) { s.replyAfter(gate, "+OK\r\n") })
		c := fakeConn(t, f, conn.Config{})
		rec := newRecorder()
		const n = 20
		for i := range n {
			dl := time.Time{}
			if i%2 == 0 {
				dl = time.Now().Add(time.Hour)
			}
			if err := c.Do(conn.Request{Cmd: cmd("HOLD"), Deadline: dl, Callback: rec, Tag: uint64(i)}); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("Close took %v", d)
		}
		// Close returned, so every callback has been called already.
		got := rec.all()
		if len(got) != n {
			t.Fatalf("%d callbacks after Close, want %d", len(got), n)
		}
		for _, o := range got {
			if !errors.Is(o.err, conn.ErrClosed) {
				t.Errorf("tag %d: err %v, want ErrClosed", o.tag, o.err)
			}
		}
		if err := c.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if err := c.Do(conn.Request{Cmd: cmd("PING"), Callback: rec}); !errors.Is(err, conn.ErrClosed) {
			t.Errorf("Do after Close: %v", err)
		}
		if err := c.WaitConnected(context.Background()); !errors.Is(err, conn.ErrClosed) {
			t.Errorf("WaitConnected after Close: %v", err)
		}
		if c.Connected() {
			t.Error("Connected after Close")
		}
		if _, err := c.Exec(context.Background(), "PING"); !errors.Is(err, conn.ErrClosed) {
			t.Errorf("Exec after Close: %v", err)
		}
		if got := rec.all(); len(got) != n {
			t.Errorf("callbacks after Close: %d", len(got))
		}
		if st := c.Stats(); st.Broken != 0 {
			t.Errorf("closed requests counted as broken: %+v", st)
		}
	})

	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, f *fake) conn.Config
	}{
		{"while dialing", func(t *testing.T, f *fake) conn.Config {
			return conn.Config{Dialer: func(ctx context.Context, _, _ string) (netConn, error) {
				<-ctx.Done()
				return nil, ctx.Err()
			}, DialTimeout: time.Hour}
		}},
		{"during the handshake", func(t *testing.T, f *fake) conn.Config {
			f.handle("INFO", func(*fakeSession, []string) {})
			return conn.Config{Dialer: f.Dial, DialTimeout: time.Hour}
		}},
		{"while backing off", func(t *testing.T, f *fake) conn.Config {
			f.setDialErr(errors.New("refused"))
			return conn.Config{Dialer: f.Dial, ReconnectMin: time.Hour, ReconnectMax: time.Hour}
		}},
		{"connected and idle", func(t *testing.T, f *fake) conn.Config {
			return conn.Config{Dialer: f.Dial}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			c := conn.New("fake:6379", tc.setup(t, f))
			time.Sleep(20 * time.Millisecond) // let it get into the state
			start := time.Now()
			c.Close()
			c.Close()
			if d := time.Since(start); d > time.Second {
				t.Errorf("Close took %v", d)
			}
			// (a goroutine may still be returning from its deferred wg.Done)
			if stacks := waitGoroutinesGone(time.Second, "redlock/conn.(*Conn)"); stacks != "" {
				t.Errorf("Conn goroutines alive after Close returned:\n%s", stacks)
			}
			if err := c.WaitConnected(context.Background()); !errors.Is(err, conn.ErrClosed) {
				t.Errorf("WaitConnected after Close: %v", err)
			}
		})
	}

	t.Run("no goroutine leak", func(t *testing.T) {
		if stacks := waitGoroutinesGone(5*time.Second, leakMarkers...); stacks != "" {
			t.Fatalf("goroutines left from earlier tests:\n%s", stacks)
		}
		before := runtime.NumGoroutine()
		func() {
			f := &fake{t: t, runID: "abc", handlers: map[string]handler{}}
			defer f.close()
			gate := make(chan struct{})
			defer close(gate)
			f.handle("HOLD", func(s *fakeSession, args []string) { s.replyAfter(gate, "+OK\r\n") })
			c, err := conn.Dial(context.Background(), "fake:6379", conn.Config{Dialer: f.Dial})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			rec := newRecorder()
			for i := range 10 {
				dl := time.Now().Add(time.Duration(i) * time.Millisecond)
				if err := c.Do(conn.Request{Cmd: cmd("HOLD"), Callback: rec, Deadline: dl}); err != nil {
					t.Fatal(err)
				}
			}
			rec.wait(t, 10, 5*time.Second) // all timed out; their replies never come
		}()
		check.NoLeak(t, before, 0)
	})
}

// TestExec checks the convenience wrapper: server errors come back as the
// reply and as a *resp.Error.
func TestExec(t *testing.T) {
	f := newFake(t)
	c := fakeConn(t, f, conn.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rep, err := c.Exec(ctx, "NOSUCH")
	var re *resp.Error
	if !errors.As(err, &re) || re.Prefix() != "ERR" || !rep.IsError() {
		t.Errorf("Exec NOSUCH: %v %v", rep, err)
	}
	rep, err = c.Exec(ctx, "PING")
	if err != nil || rep.Text() != "PONG" {
		t.Errorf("Exec PING: %v %v", rep, err)
	}
}

// TestFirstDialInProgress: a request made while the first dial is in
// progress waits for it (within its deadline) instead of failing with
// ErrDown; if the first dial fails, the request fails with its cause.
func TestFirstDialInProgress(t *testing.T) {
	t.Run("queued until connected", func(t *testing.T) {
		f := newFake(t)
		slow := func(ctx context.Context, network, addr string) (netConn, error) {
			time.Sleep(30 * time.Millisecond)
			return f.Dial(ctx, network, addr)
		}
		c := conn.New("fake:6379", conn.Config{Dialer: slow})
		defer c.Close()
		rec := newRecorder()
		if err := c.Do(conn.Request{Cmd: cmd("PING"), Callback: rec, Deadline: time.Now().Add(5 * time.Second)}); err != nil {
			t.Fatalf("Do during the first dial: %v", err)
		}
		got := rec.wait(t, 1, 5*time.Second)
		if got[0].err != nil || got[0].rep.Text() != "PONG" {
			t.Fatalf("PING sent during the first dial: %+v", got[0])
		}
	})
	t.Run("first dial fails", func(t *testing.T) {
		errRefused := errors.New("fake: refused")
		refuse := func(ctx context.Context, network, addr string) (netConn, error) {
			time.Sleep(20 * time.Millisecond)
			return nil, errRefused
		}
		c := conn.New("fake:6379", conn.Config{Dialer: refuse})
		defer c.Close()
		rec := newRecorder()
		start := time.Now()
		if err := c.Do(conn.Request{Cmd: cmd("PING"), Callback: rec, Deadline: time.Now().Add(5 * time.Second)}); err != nil {
			t.Fatalf("Do during the first dial: %v", err)
		}
		got := rec.wait(t, 1, 5*time.Second)
		if !errors.Is(got[0].err, conn.ErrDown) || !errors.Is(got[0].err, errRefused) {
			t.Fatalf("request queued for a failed first dial: %v, want ErrDown wrapping the dial error", got[0].err)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("failed after %v: it waited for its deadline, not for the dial", d)
		}
		// After the first attempt, a down master fails requests at once.
		if err := c.Do(conn.Request{Cmd: cmd("PING"), Callback: rec}); !errors.Is(err, conn.ErrDown) {
			t.Fatalf("Do after the first attempt failed: %v, want ErrDown", err)
		}
	})
	t.Run("closed while connecting", func(t *testing.T) {
		block := make(chan struct{})
		dialer := func(ctx context.Context, _, _ string) (netConn, error) {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-block:
				return nil, errors.New("unblocked")
			}
		}
		c := conn.New("fake:6379", conn.Config{Dialer: dialer})
		rec := newRecorder()
		if err := c.Do(conn.Request{Cmd: cmd("PING"), Callback: rec}); err != nil {
			t.Fatal(err)
		}
		c.Close()
		close(block)
		if got := rec.wait(t, 1, 5*time.Second); got[0].err == nil {
			t.Fatalf("queued request after Close: %+v", got[0])
		}
	})
}

// TestDrain: Drain waits for the requests accepted before it, not for
// later ones, and gives up when its context ends.
func TestDrain(t *testing.T) {
	f := newFake(t)
	gate := make(chan struct{})
	f.handle("HOLD", func(s *fakeSession, args []string) { s.replyAfter(gate, "+OK\r\n") })
	c := fakeConn(t, f, conn.Config{})
	rec := newRecorder()
	for i := range 3 {
		if err := c.Do(conn.Request{Cmd: cmd("HOLD"), Callback: rec, Tag: uint64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := c.Drain(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Drain with replies held back: %v, want DeadlineExceeded", err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Drain(context.Background()) }()
	select {
	case err := <-done:
		t.Fatalf("Drain returned %v before the replies", err)
	case <-time.After(20 * time.Millisecond):
	}
	close(gate)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Drain: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Drain did not return after the replies")
	}
	rec.wait(t, 3, 5*time.Second)
}
