package conn_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/internal/localmaster"
	"github.com/redlock-dev/redlock/internal/test/check"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/resp"
)

// realConn starts one local master and a Conn to it, both closed when t ends.
// restartAndReconnect restarts m and waits until c is connected to it again.
func restartAndReconnect(t testing.TB, m *localmaster.Master, c *conn.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := m.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	if err := c.WaitConnected(wctx); err != nil {
		t.Fatalf("WaitConnected after restart: %v", err)
	}
}

func realConn(t testing.TB, cfg conn.Config) (*conn.Conn, *localmaster.Master, *localmaster.Set) {
	t.Helper()
	set := mastertest.Start(t, 1)
	m := set.Masters()[0]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	c, err := conn.Dial(ctx, m.Addr(), cfg)
	if err != nil {
		t.Fatalf("Dial %s: %v", m.Addr(), err)
	}
	t.Cleanup(func() { c.Close() })
	return c, m, set
}

func exec(t testing.TB, c *conn.Conn, args ...string) resp.Reply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rep, err := c.Exec(ctx, args...)
	if err != nil {
		t.Fatalf("Exec %q: %v", args, err)
	}
	return rep
}

var runIDRe = regexp.MustCompile(`^[0-9a-f]{40}$`)

func TestRealRoundTrip(t *testing.T) {
	c, _, set := realConn(t, conn.Config{})
	if rep := exec(t, c, "SET", "k", "v\r\n with CRLF"); !rep.IsOK() {
		t.Errorf("SET: %v", rep)
	}
	if rep := exec(t, c, "GET", "k"); rep.Text() != "v\r\n with CRLF" {
		t.Errorf("GET: %v", rep)
	}
	if rep := exec(t, c, "GET", "missing"); !rep.IsNull() {
		t.Errorf("GET missing: %v", rep)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var re *resp.Error
	if _, err := c.Exec(ctx, "INCR", "k"); !errors.As(err, &re) || re.Prefix() != "ERR" {
		t.Errorf("INCR of a string: %v", err)
	}
	if set.Embedded() {
		t.Skip("embedded master: no INFO server identity")
	}
	info := c.Info()
	if !runIDRe.MatchString(info.RunID) || info.Version == "" || info.ConnectedAt.IsZero() {
		t.Errorf("Info %+v", info)
	}
	if rep := exec(t, c, "INFO", "server"); !regexp.MustCompile(`run_id:` + info.RunID).Match(rep.Str) {
		t.Errorf("Info().RunID %q not in INFO server", info.RunID)
	}
}

// waiter is a reusable Callback that hands the outcome to one waiting
// goroutine through a pre-made channel.
type waiter struct {
	ch  chan struct{}
	rep resp.Reply // cloned only when keep is set
	err error
	n   int64 // integer replies
}

func newWaiter() *waiter { return &waiter{ch: make(chan struct{}, 1)} }

func (w *waiter) Complete(_ uint64, r resp.Reply, err error) {
	w.err, w.n = err, r.Int
	if err == nil && r.IsError() {
		w.err = r.Err()
	}
	w.ch <- struct{}{}
}

func TestRealConcurrentIncr(t *testing.T) {
	c, _, _ := realConn(t, conn.Config{})
	const goroutines, perG = 64, 500
	incr := cmd("INCR", "counter")
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := newWaiter()
			last := int64(0)
			for range perG {
				if err := c.Do(conn.Request{Cmd: incr, Callback: w}); err != nil {
					t.Errorf("Do: %v", err)
					return
				}
				<-w.ch
				if w.err != nil {
					t.Errorf("INCR: %v", w.err)
					return
				}
				if w.n <= last {
					t.Errorf("INCR went from %d to %d on one goroutine", last, w.n)
				}
				last = w.n
			}
		}()
	}
	wg.Wait()
	if rep := exec(t, c, "GET", "counter"); rep.Text() != strconv.Itoa(goroutines*perG) {
		t.Errorf("counter = %v, want %d", rep, goroutines*perG)
	}
	st := c.Stats()
	t.Logf("requests %d, writes %d (%.1f per write)", st.Requests, st.Writes, float64(st.Requests)/float64(st.Writes))
	if st.Writes >= st.Requests {
		t.Errorf("Writes %d >= Requests %d: no pipelining", st.Writes, st.Requests)
	}
}

// TestRealMasterDies: pending and new requests fail without hanging while
// the master is gone; once it is back the Conn reconnects by itself to the
// new process.
func TestRealMasterDies(t *testing.T) {
	for _, tc := range []struct {
		name string
		halt func(*localmaster.Master) error
	}{
		{"kill", (*localmaster.Master).Kill},
		{"stop", (*localmaster.Master).Stop},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, m, set := realConn(t, conn.Config{ReconnectMin: 5 * time.Millisecond, ReconnectMax: 100 * time.Millisecond})
			mastertest.RequireReal(t, set)
			oldID := c.Info().RunID
			rec := newRecorder()
			// BLPOP blocks in the server: these stay pending until it dies.
			for i := range 5 {
				if err := c.Do(conn.Request{Cmd: cmd("BLPOP", "nothing", "0"), Callback: rec, Tag: uint64(i)}); err != nil {
					t.Fatal(err)
				}
			}
			// (BLPOP blocks the whole connection: nothing else can be asked on it.)
			check.Eventually(t, 5*time.Second, "BLPOPs to be written", func() bool { return c.Stats().Writes > 0 })
			time.Sleep(10 * time.Millisecond)
			if err := tc.halt(m); err != nil {
				t.Fatal(err)
			}
			for _, o := range rec.wait(t, 5, 10*time.Second) {
				if !errors.Is(o.err, conn.ErrBroken) {
					t.Errorf("pending BLPOP %d: %v, want ErrBroken", o.tag, o.err)
				}
			}
			// The Conn is down now (the queue was failed after it went down).
			start := time.Now()
			err := c.Do(conn.Request{Cmd: cmd("PING"), Callback: rec})
			if !errors.Is(err, conn.ErrDown) {
				t.Errorf("Do with the master dead: %v, want ErrDown", err)
			}
			if d := time.Since(start); d > 100*time.Millisecond {
				t.Errorf("Do with the master dead took %v", d)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err = c.Exec(ctx, "PING")
			cancel()
			if !errors.Is(err, conn.ErrDown) {
				t.Errorf("Exec with the master dead: %v, want ErrDown", err)
			}

			restartAndReconnect(t, m, c)
			if newID := c.Info().RunID; newID == oldID || !runIDRe.MatchString(newID) {
				t.Errorf("RunID after restart %q (before %q)", newID, oldID)
			}
			if rep := exec(t, c, "SET", "k", "v"); !rep.IsOK() {
				t.Errorf("SET after restart: %v", rep)
			}
			if got := len(rec.all()); got != 5 {
				t.Errorf("%d callbacks, want 5", got)
			}
		})
	}
}

// TestRealMasterPaused: a SIGSTOPped master answers nothing; requests with
// deadlines fail at their deadline and the connection survives the pause.
func TestRealMasterPaused(t *testing.T) {
	c, m, set := realConn(t, conn.Config{})
	mastertest.RequireReal(t, set)
	retryTiming(t, func() (violations []string) {
		exec(t, c, "SET", "n", "0")
		before := c.Stats()
		if err := m.Pause(); err != nil {
			t.Fatal(err)
		}
		resumed := false
		defer func() {
			if !resumed {
				m.Resume()
			}
		}()
		rec := newRecorder()
		const n = 3
		var dls []time.Time
		var ctls []control
		for i := range n {
			dl := time.Now().Add(20 * time.Millisecond)
			dls, ctls = append(dls, dl), append(ctls, newControl(dl))
			if err := c.Do(conn.Request{Cmd: cmd("INCR", "n"), Deadline: dl, Callback: rec, Tag: uint64(i)}); err != nil {
				t.Fatal(err)
			}
		}
		for _, o := range rec.wait(t, n, 5*time.Second) {
			if !errors.Is(o.err, conn.ErrTimeout) {
				t.Errorf("request %d: %v, want ErrTimeout", o.tag, o.err)
			}
			// 20ms deadline, failed well within 200ms (relative to a control
			// timer: the machine may stall the process, not the Conn).
			ctl := ctls[o.tag].firedAt(t)
			if late := o.at.Sub(dls[o.tag]); late < 0 {
				t.Errorf("request %d failed %v before its deadline", o.tag, -late)
			} else if o.at.After(ctl.Add(180 * time.Millisecond)) {
				violations = append(violations, fmt.Sprintf("request %d failed %v after its deadline (control %v)",
					o.tag, late, ctl.Sub(dls[o.tag])))
			}
		}
		if err := m.Resume(); err != nil {
			t.Fatal(err)
		}
		resumed = true
		// The timed-out INCRs were on the wire: the master runs them, their
		// replies are dropped, and the next request gets its own reply.
		if rep := exec(t, c, "GET", "n"); rep.Text() != strconv.Itoa(n) {
			t.Errorf("GET n = %v, want %d", rep, n)
		}
		if st := c.Stats(); st.Connects != 1 || st.Timeouts-before.Timeouts != n || st.Broken != 0 {
			t.Errorf("stats %+v: want the same connection, %d more timeouts", st, n)
		}
		return violations
	})
}

// TestStableCmdUntouched: the Conn keeps a reference to a Stable request's
// Cmd, and later requests that reuse its queue slot must not write into it.
func TestStableCmdUntouched(t *testing.T) {
	script := conn.NewScript(testScript)
	c, _, _ := realConn(t, conn.Config{Scripts: []*conn.Script{script}})
	w := newWaiter()
	stable := evalShaCmd(script, []string{"st"}, []string{"1"})
	orig := slices.Clone(stable)
	if err := c.Do(conn.Request{Cmd: stable, Callback: w, Script: script, Stable: true}); err != nil {
		t.Fatal(err)
	}
	if <-w.ch; w.err != nil {
		t.Fatal(w.err)
	}
	for i := range 300 { // wraps the queue's ring several times
		cmd := evalShaCmd(script, []string{"ot"}, []string{strconv.Itoa(i % 10)}) // as long as stable
		if err := c.Do(conn.Request{Cmd: cmd, Callback: w, Script: script}); err != nil {
			t.Fatal(err)
		}
		if <-w.ch; w.err != nil {
			t.Fatal(w.err)
		}
	}
	if !bytes.Equal(stable, orig) {
		t.Fatalf("Stable Cmd changed:\n%q\nwant\n%q", stable, orig)
	}
}

func TestRealNoScriptFallback(t *testing.T) {
	script := conn.NewScript(testScript)
	c, _, _ := realConn(t, conn.Config{Scripts: []*conn.Script{script}})
	w := newWaiter()
	evalsha := evalShaCmd(script, []string{"s"}, []string{"5"})

	// Loaded at connect: EVALSHA works directly.
	if err := c.Do(conn.Request{Cmd: evalsha, Callback: w, Script: script}); err != nil {
		t.Fatal(err)
	}
	if <-w.ch; w.err != nil || w.n != 5 {
		t.Fatalf("EVALSHA: %d %v", w.n, w.err)
	}
	if rep := exec(t, c, "SCRIPT", "FLUSH"); !rep.IsOK() {
		t.Fatalf("SCRIPT FLUSH: %v", rep)
	}
	// Without Script the NOSCRIPT error is the reply...
	if err := c.Do(conn.Request{Cmd: evalsha, Callback: w}); err != nil {
		t.Fatal(err)
	}
	if <-w.ch; w.err == nil || !resp.HasErrorPrefix([]byte(w.err.Error()), "NOSCRIPT") {
		t.Fatalf("EVALSHA after flush without Script: %v, want NOSCRIPT", w.err)
	}
	// ...with it the Conn falls back to EVAL transparently.
	if err := c.Do(conn.Request{Cmd: evalsha, Callback: w, Script: script}); err != nil {
		t.Fatal(err)
	}
	if <-w.ch; w.err != nil || w.n != 10 {
		t.Fatalf("EVALSHA after flush: %d %v, want 10", w.n, w.err)
	}
	if rep := exec(t, c, "GET", "s"); rep.Text() != "10" {
		t.Errorf("s = %v, want 10 (script ran once per request)", rep)
	}
}

// onceTracker counts callback calls per tag, to check that every request
// accepted by Do is completed exactly once.
type onceTracker struct {
	calls                              []atomic.Int32
	completed                          atomic.Int64
	ok, broken, timeout, closed, other atomic.Int64
}

func newOnceTracker(n int) *onceTracker { return &onceTracker{calls: make([]atomic.Int32, n)} }

func (tr *onceTracker) record(tag uint64, r resp.Reply, err error) {
	tr.calls[tag].Add(1)
	switch {
	case err == nil && !r.IsError():
		tr.ok.Add(1)
	case errors.Is(err, conn.ErrBroken):
		tr.broken.Add(1)
	case errors.Is(err, conn.ErrTimeout):
		tr.timeout.Add(1)
	case errors.Is(err, conn.ErrClosed):
		tr.closed.Add(1)
	default:
		tr.other.Add(1)
	}
	tr.completed.Add(1)
}

// check reports tags whose call count differs from accepted (1) or not (0).
func (tr *onceTracker) check(t *testing.T, accepted []bool) {
	t.Helper()
	bad := 0
	for tag, acc := range accepted {
		want := int32(0)
		if acc {
			want = 1
		}
		if got := tr.calls[tag].Load(); got != want && bad < 10 {
			bad++
			t.Errorf("tag %d (accepted %v) completed %d times", tag, acc, got)
		}
	}
}

// loadWorker keeps up to cap(sem) requests in flight.
type loadWorker struct {
	tr  *onceTracker
	sem chan struct{}
}

func (w *loadWorker) Complete(tag uint64, r resp.Reply, err error) {
	w.tr.record(tag, r, err)
	<-w.sem
}

func TestRealExactlyOnceAcrossKill(t *testing.T) {
	c, m, set := realConn(t, conn.Config{ReconnectMin: 5 * time.Millisecond, ReconnectMax: 50 * time.Millisecond})
	mastertest.RequireReal(t, set)
	const maxTags = 1 << 20
	tr := newOnceTracker(maxTags)
	accepted := make([]bool, maxTags)
	var nextTag atomic.Uint64
	var nAccepted atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &loadWorker{tr: tr, sem: make(chan struct{}, 16)}
			incr := cmd("INCR", "load")
			for {
				select {
				case <-stop:
					return
				case w.sem <- struct{}{}:
				}
				tag := nextTag.Add(1) - 1
				if tag >= maxTags {
					<-w.sem
					return
				}
				req := conn.Request{Cmd: incr, Callback: w, Tag: tag}
				if g%2 == 0 {
					req.Deadline = time.Now().Add(time.Duration(1+tag%20) * time.Millisecond)
				}
				if err := c.Do(req); err != nil {
					<-w.sem
					if !errors.Is(err, conn.ErrDown) && !errors.Is(err, conn.ErrOverloaded) {
						t.Errorf("Do: %v", err)
					}
					time.Sleep(time.Millisecond)
					continue
				}
				accepted[tag] = true // written by this goroutine only, read after wg.Wait
				nAccepted.Add(1)
			}
		}()
	}
	phase := func(what string, d time.Duration) {
		time.Sleep(d)
		t.Logf("%s: accepted %d, completed %d", what, nAccepted.Load(), tr.completed.Load())
	}
	phase("before kill", 150*time.Millisecond)
	if err := m.Kill(); err != nil {
		t.Fatal(err)
	}
	phase("after kill", 100*time.Millisecond)
	restartAndReconnect(t, m, c)
	phase("after restart", 150*time.Millisecond)
	close(stop)
	wg.Wait()
	check.Eventually(t, 10*time.Second, "all accepted requests to complete", func() bool {
		return tr.completed.Load() == nAccepted.Load()
	})
	c.Close()
	time.Sleep(20 * time.Millisecond) // a late duplicate would show up here
	if got, want := tr.completed.Load(), nAccepted.Load(); got != want {
		t.Errorf("completed %d, accepted %d", got, want)
	}
	tr.check(t, accepted)
	t.Logf("ok %d, broken %d, timeout %d, closed %d, other %d",
		tr.ok.Load(), tr.broken.Load(), tr.timeout.Load(), tr.closed.Load(), tr.other.Load())
	if tr.other.Load() != 0 {
		t.Errorf("%d requests failed with an unexpected error", tr.other.Load())
	}
	if tr.ok.Load() == 0 {
		t.Error("no request succeeded")
	}
}

// TestRealOversizedReply: a script whose reply is nested deeper than the
// codec accepts fails only its own request; the connection stays up and
// the requests pipelined behind it get their replies.
func TestRealOversizedReply(t *testing.T) {
	c, _, _ := realConn(t, conn.Config{})
	deep := "local t = 1 for i = 1, 100 do t = {t} end return t"
	rec := newRecorder()
	for i, args := range [][]string{{"SET", "k", "v"}, {"EVAL", deep, "0"}, {"GET", "k"}, {"EVAL", "return string.rep('x', 100)", "0"}} {
		if err := c.Do(conn.Request{Cmd: cmd(args...), Callback: rec, Tag: uint64(i), Deadline: time.Now().Add(5 * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	got := rec.wait(t, 4, 5*time.Second)
	if o := byTag(got, 1); len(o) != 1 || !errors.Is(o[0].err, resp.ErrTooLarge) {
		t.Fatalf("deep reply: %+v; want an error matching resp.ErrTooLarge", o)
	}
	if o := byTag(got, 2); len(o) != 1 || o[0].err != nil || o[0].rep.Text() != "v" {
		t.Fatalf("GET after the deep reply: %+v", o)
	}
	if o := byTag(got, 3); len(o) != 1 || o[0].err != nil || len(o[0].rep.Text()) != 100 {
		t.Fatalf("EVAL after the deep reply: %+v", o)
	}
	if st := c.Stats(); st.Connects != 1 || st.Broken != 0 {
		t.Fatalf("the connection was torn down: %+v", st)
	}
}

// TestRealStateChanges: OnState reports up, down (once, however many
// reconnect attempts fail) and up again with Restarted after a restart.
func TestRealStateChanges(t *testing.T) {
	var mu sync.Mutex
	var got []conn.StateChange
	c, m, _ := realConn(t, conn.Config{ReconnectMin: time.Millisecond, ReconnectMax: 5 * time.Millisecond, OnState: func(sc conn.StateChange) {
		mu.Lock()
		got = append(got, sc)
		mu.Unlock()
	}})
	if err := m.Kill(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // dozens of failed reconnects
	restartAndReconnect(t, m, c)
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 || !got[0].Up || got[0].Restarted || got[1].Up || got[1].Err == nil || !got[2].Up || !got[2].Restarted {
		t.Fatalf("state changes: %+v; want up, down (with a cause), up restarted", got)
	}
	if got[0].Info.RunID == got[2].Info.RunID || got[2].Addr != m.Addr() {
		t.Fatalf("run_ids %s then %s at %s", got[0].Info.RunID, got[2].Info.RunID, got[2].Addr)
	}
}

// countingCallback counts completions by outcome.
type countingCallback struct{ ok, timeout, broken atomic.Int64 }

func (cc *countingCallback) Complete(_ uint64, _ resp.Reply, err error) {
	switch {
	case err == nil:
		cc.ok.Add(1)
	case errors.Is(err, conn.ErrTimeout):
		cc.timeout.Add(1)
	default:
		cc.broken.Add(1)
	}
}

// TestRealMasterStalled: a master SIGSTOPped under steady load. Timed-out
// requests stay queued until their replies come (FIFO matching); without a
// bound they pile up to MaxPending. StallTimeout after the oldest one's
// deadline the session is dropped, requests fail fast with ErrDown while
// the master stays stopped, and the Conn comes back when it resumes.
func TestRealMasterStalled(t *testing.T) {
	const stall = 200 * time.Millisecond
	var stalledSeen atomic.Bool
	c, m, set := realConn(t, conn.Config{StallTimeout: stall, DialTimeout: 300 * time.Millisecond,
		ReconnectMin: 5 * time.Millisecond, ReconnectMax: 50 * time.Millisecond,
		OnState: func(sc conn.StateChange) {
			if !sc.Up && errors.Is(sc.Err, conn.ErrStalled) {
				stalledSeen.Store(true)
			}
		}})
	mastertest.RequireReal(t, set)
	if err := m.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			m.Resume()
		}
	}()
	cb := &countingCallback{}
	var sent, refused, maxPending int
	const period = 1500 * time.Millisecond
	start := time.Now()
	for time.Since(start) < period {
		for range 5 {
			err := c.Do(conn.Request{Cmd: cmd("INCR", "stalled"), Deadline: time.Now().Add(10 * time.Millisecond), Callback: cb})
			switch {
			case err == nil:
				sent++
			case errors.Is(err, conn.ErrDown):
				refused++
			default:
				t.Fatalf("Do: %v", err)
			}
		}
		maxPending = max(maxPending, c.Stats().Pending)
		time.Sleep(time.Millisecond)
	}
	t.Logf("paused %v: %d requests queued, %d refused fast (ErrDown), at most %d in flight", period, sent, refused, maxPending)
	if !stalledSeen.Load() {
		t.Fatal("the session was never dropped as stalled")
	}
	if refused == 0 {
		t.Error("no request was refused fast while the master stayed stopped")
	}
	// Bound: what arrives in StallTimeout plus the deadline, with slack
	// for a slow machine — far below one entry per request sent.
	if limit := (sent + refused) / 3; maxPending > limit {
		t.Errorf("%d requests in flight at most; want ≤ %d (a third of the %d made)", maxPending, limit, sent+refused)
	}
	if err := m.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitConnected(ctx); err != nil {
		t.Fatalf("not reconnected after the master resumed: %v", err)
	}
	exec(t, c, "PING")
	if got := int(cb.ok.Load() + cb.timeout.Load() + cb.broken.Load()); got != sent {
		// every accepted request is completed exactly once
		time.Sleep(100 * time.Millisecond)
		if got = int(cb.ok.Load() + cb.timeout.Load() + cb.broken.Load()); got != sent {
			t.Errorf("%d completions for %d accepted requests", got, sent)
		}
	}
}
