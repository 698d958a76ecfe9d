package conn_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
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

// TestMain fails the package if any goroutine of a Conn or of the fake
// server outlives the tests (every test closes what it opened).
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if stacks := waitGoroutinesGone(5*time.Second, leakMarkers...); stacks != "" {
			fmt.Fprintf(os.Stderr, "leaked goroutines after tests:\n%s\n", stacks)
			code = 1
		}
	}
	os.Exit(code)
}

// leakMarkers identify goroutines started by this package's code or by the
// fake server in these tests.
var leakMarkers = []string{"redlock/conn.(*Conn)", "redlock/conn_test.(*fakeSession)"}

// waitGoroutinesGone waits until no goroutine's stack contains any of the
// markers and returns "" or, on timeout, the offending stacks.
func waitGoroutinesGone(timeout time.Duration, markers ...string) string {
	deadline := time.Now().Add(timeout)
	for {
		var bad []string
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		for _, g := range strings.Split(string(buf), "\n\n") {
			for _, m := range markers {
				if strings.Contains(g, m) {
					bad = append(bad, g)
					break
				}
			}
		}
		if len(bad) == 0 {
			return ""
		}
		if time.Now().After(deadline) {
			return strings.Join(bad, "\n\n")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cmd encodes a command.
func cmd(args ...string) []byte { return resp.AppendCommandStrings(nil, args...) }

// outcome is one callback call seen by a recorder.
type outcome struct {
	tag uint64
	rep resp.Reply
	err error
	at  time.Time
}

// recorder is a Callback that keeps every call (with a cloned reply and the
// time of the call, taken inside the callback).
type recorder struct {
	mu     sync.Mutex
	got    []outcome
	notify chan struct{}
}

func newRecorder() *recorder { return &recorder{notify: make(chan struct{}, 1)} }

func (r *recorder) Complete(tag uint64, rep resp.Reply, err error) {
	now := time.Now()
	r.mu.Lock()
	r.got = append(r.got, outcome{tag: tag, rep: rep.Clone(), err: err, at: now})
	r.mu.Unlock()
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

func (r *recorder) all() []outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// wait waits until at least n calls were recorded and returns them all.
func (r *recorder) wait(t testing.TB, n int, timeout time.Duration) []outcome {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		if got := r.all(); len(got) >= n {
			return got
		}
		select {
		case <-r.notify:
		case <-deadline.C:
			got := r.all()
			t.Fatalf("timed out after %v waiting for %d callbacks; got %d: %v", timeout, n, len(got), got)
			return nil
		}
	}
}

// byTag returns the calls for tag.
func byTag(got []outcome, tag uint64) []outcome {
	var out []outcome
	for _, o := range got {
		if o.tag == tag {
			out = append(out, o)
		}
	}
	return out
}

// control is a plain runtime timer armed for a deadline. The machine is
// small and shared: a timer may fire 100ms+ late when the process is not
// scheduled. The control suffers the same delay, so timing checks bound the
// Conn's lateness relative to it rather than to the wall clock.
type control chan time.Time

func newControl(dl time.Time) control {
	ch := make(control, 1)
	time.AfterFunc(time.Until(dl), func() { ch <- time.Now() })
	return ch
}

// firedAt waits for the control to fire and returns when it did.
func (c control) firedAt(t testing.TB) time.Time {
	t.Helper()
	select {
	case at := <-c:
		c <- at
		return at
	case <-time.After(10 * time.Second):
		t.Fatal("control timer did not fire")
		return time.Time{}
	}
}

// retryTiming runs attempt up to 3 times while it returns timing
// violations only (lateness on a loaded machine); a real timing bug fails
// every attempt. Functional failures are reported by attempt through t.
func retryTiming(t *testing.T, attempt func() (violations []string)) {
	t.Helper()
	const attempts = 3
	for i := 1; ; i++ {
		v := attempt()
		if len(v) == 0 || t.Failed() {
			return
		}
		if i == attempts {
			for _, msg := range v {
				t.Error(msg)
			}
			return
		}
		t.Logf("attempt %d: timing violations, retrying: %q", i, v)
	}
}

// ---------------------------------------------------------------------------
// Scripted fake master over net.Pipe.

// handler answers one command of a fake session (by calling reply, replyAfter
// or nothing). It runs on the session's read goroutine, in command order.
type handler func(s *fakeSession, args []string)

// fake is a scripted master. Its Dial method is a Config.Dialer that
// returns one end of a net.Pipe and serves the other. It answers the
// handshake (AUTH, SELECT, SCRIPT LOAD, INFO server) by itself, PING and
// ECHO by default, and anything else through handlers.
type fake struct {
	t testing.TB

	// Set before the first dial:
	username, password string        // AUTH must match when password != ""
	infoErr            bool          // INFO server answers an error
	readDelay          time.Duration // sleep before each read of the socket (a slow server)

	mu       sync.Mutex
	closed   bool
	runID    string
	handlers map[string]handler
	dialErr  error
	dials    []time.Time // every dial attempt, failed ones included
	sessions []*fakeSession
	wg       sync.WaitGroup
}

// newFake returns a fake closed (all sessions' sockets closed and goroutines
// waited for) when t ends, after the Conns registered later are closed.
func newFake(t testing.TB) *fake {
	f := &fake{t: t, runID: "abc", handlers: map[string]handler{}}
	t.Cleanup(f.close)
	return f
}

func (f *fake) handle(name string, h handler) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handlers[strings.ToUpper(name)] = h
}

func (f *fake) setDialErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dialErr = err
}

func (f *fake) setRunID(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runID = id
}

func (f *fake) dialTimes() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.dials)
}

func (f *fake) numSessions() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.sessions)
}

// session returns the i-th session (0-based), waiting for it to exist.
func (f *fake) session(i int) *fakeSession {
	f.t.Helper()
	check.Eventually(f.t, 5*time.Second, fmt.Sprintf("fake session %d", i), func() bool { return f.numSessions() > i })
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sessions[i]
}

func (f *fake) close() {
	f.mu.Lock()
	f.closed = true
	sessions := slices.Clone(f.sessions)
	f.mu.Unlock()
	for _, s := range sessions {
		s.nc.Close()
	}
	f.wg.Wait()
}

// Dial implements Config.Dialer.
func (f *fake) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dials = append(f.dials, time.Now())
	if f.closed {
		return nil, errors.New("fake: closed")
	}
	if f.dialErr != nil {
		return nil, f.dialErr
	}
	cli, srv := net.Pipe()
	s := &fakeSession{f: f, nc: srv, out: make(chan outMsg, 1<<14), done: make(chan struct{})}
	f.sessions = append(f.sessions, s)
	f.wg.Add(2)
	go s.readLoop()
	go s.writeLoop()
	return cli, nil
}

// fakeSession is the server side of one connection.
type fakeSession struct {
	f    *fake
	nc   net.Conn
	out  chan outMsg   // replies, written in order by writeLoop
	done chan struct{} // closed when readLoop exits

	mu   sync.Mutex
	cmds [][]string // every command received, handshake included
}

type outMsg struct {
	data []byte
	gate <-chan struct{} // wait for it before writing (nil: write now)
}

// reply queues data to be written after the replies queued before it.
func (s *fakeSession) reply(data string) { s.out <- outMsg{data: []byte(data)} }

// replyAfter queues data to be written once gate is closed; replies queued
// after it wait too (FIFO), like a server stuck on one command.
func (s *fakeSession) replyAfter(gate <-chan struct{}, data string) {
	s.out <- outMsg{data: []byte(data), gate: gate}
}

// commands returns the commands received so far.
func (s *fakeSession) commands() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.cmds)
}

// commandNames returns the upper-cased first word of each command received.
func (s *fakeSession) commandNames() []string {
	var names []string
	for _, c := range s.commands() {
		names = append(names, strings.ToUpper(c[0]))
	}
	return names
}

type slowConn struct {
	net.Conn
	delay time.Duration
}

func (c slowConn) Read(p []byte) (int, error) {
	time.Sleep(c.delay)
	return c.Conn.Read(p)
}

func (s *fakeSession) readLoop() {
	defer s.f.wg.Done()
	defer close(s.done)
	defer s.nc.Close()
	var src net.Conn = s.nc
	if s.f.readDelay > 0 {
		src = slowConn{s.nc, s.f.readDelay}
	}
	rd := resp.NewReaderSize(src, 64<<10)
	for {
		rep, err := rd.ReadReply()
		if err != nil {
			return // the client closed its end (or the test closed ours)
		}
		if rep.Type != resp.TypeArray || len(rep.Elems) == 0 {
			s.f.t.Errorf("fake: command is not a non-empty array: %v", rep)
			return
		}
		args := make([]string, len(rep.Elems))
		for i, e := range rep.Elems {
			if e.Type != resp.TypeBulkString {
				s.f.t.Errorf("fake: command argument %d is %v, not a bulk string", i, e.Type)
				return
			}
			args[i] = string(e.Str)
		}
		s.mu.Lock()
		s.cmds = append(s.cmds, args)
		s.mu.Unlock()
		s.dispatch(args)
	}
}

func bulk(s string) string { return "$" + strconv.Itoa(len(s)) + "\r\n" + s + "\r\n" }

func sha1hex(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

func (s *fakeSession) dispatch(args []string) {
	f := s.f
	name := strings.ToUpper(args[0])
	f.mu.Lock()
	h := f.handlers[name]
	runID := f.runID
	f.mu.Unlock()
	if h != nil {
		h(s, args)
		return
	}
	switch {
	case name == "INFO":
		if f.infoErr {
			s.reply("-ERR unknown command 'INFO'\r\n")
			return
		}
		s.reply(bulk("# Server\r\nrun_id:" + runID + "\r\nuptime_in_seconds:5\r\nredis_version:7.0.0\r\n"))
	case name == "SCRIPT" && len(args) == 3 && strings.EqualFold(args[1], "LOAD"):
		s.reply(bulk(sha1hex(args[2])))
	case name == "AUTH":
		user, pass := "default", args[len(args)-1]
		if len(args) == 3 {
			user = args[1]
		}
		wantUser := f.username
		if wantUser == "" {
			wantUser = "default"
		}
		if f.password == "" || user != wantUser || pass != f.password {
			s.reply("-WRONGPASS invalid username-password pair or user is disabled.\r\n")
			return
		}
		s.reply("+OK\r\n")
	case name == "SELECT":
		s.reply("+OK\r\n")
	case name == "PING":
		s.reply("+PONG\r\n")
	case name == "ECHO" && len(args) == 2:
		s.reply(bulk(args[1]))
	default:
		s.reply("-ERR unknown command '" + args[0] + "'\r\n")
	}
}

func (s *fakeSession) writeLoop() {
	defer s.f.wg.Done()
	for {
		select {
		case m := <-s.out:
			if m.gate != nil {
				select {
				case <-m.gate:
				case <-s.done:
					return
				}
			}
			if _, err := s.nc.Write(m.data); err != nil {
				return
			}
		case <-s.done:
			return
		}
	}
}

// fakeConn dials a Conn to f (Dialer set, default timeouts unless cfg says
// otherwise) and closes it when t ends.
func fakeConn(t testing.TB, f *fake, cfg conn.Config) *conn.Conn {
	t.Helper()
	cfg.Dialer = f.Dial
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 10 * time.Second // a loaded machine can stall the pipe handshake
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := conn.Dial(ctx, "fake:6379", cfg)
	if err != nil {
		buf := make([]byte, 1<<20)
		t.Fatalf("Dial fake: %v\n%s", err, buf[:runtime.Stack(buf, true)])
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// textOf renders a reply's payload for comparisons.
func textOf(r resp.Reply) string {
	if r.IsError() {
		return "-" + string(r.Str)
	}
	return r.Text()
}

// netConn is net.Conn, for Dialer literals in files that do not import net.
type netConn = net.Conn

// checkLog records a connection check's reports — clock jumps,
// replication changes — and the order of reports and replies (each
// report logged as name, each reply as "reply").
type checkLog[T any] struct {
	mu      sync.Mutex
	name    string
	reports []T
	events  []string
	replies int
}

func (l *checkLog[T]) report(v T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reports = append(l.reports, v)
	l.events = append(l.events, l.name)
}

func (l *checkLog[T]) Complete(uint64, resp.Reply, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, "reply")
	l.replies++
}

func (l *checkLog[T]) snapshot() ([]T, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]T(nil), l.reports...), append([]string(nil), l.events...)
}

// repliesSeen is how many replies were logged.
func (l *checkLog[T]) repliesSeen() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.replies
}
