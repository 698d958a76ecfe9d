package clockfront

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/internal/localmaster"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/resp"
)

// master starts one real redis-server for t (skipping t without one,
// unless REDLOCK_REQUIRE_REDIS=1) and returns its address.
func master(t *testing.T, o localmaster.Options) string {
	t.Helper()
	o.N = 1
	s := mastertest.StartWith(t, o)
	mastertest.RequireReal(t, s)
	return s.Addrs()[0]
}

// client is a raw RESP connection that keeps each reply's bytes.
type client struct {
	t  *testing.T
	nc net.Conn
	tp *tap
	rd *resp.Reader
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	if err := nc.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	tp := &tap{r: nc}
	return &client{t: t, nc: nc, tp: tp, rd: resp.NewReader(tp)}
}

func (c *client) write(b []byte) {
	c.t.Helper()
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

// read returns the next reply and its bytes as they came.
func (c *client) read() (resp.Reply, []byte) {
	c.t.Helper()
	rep, err := c.rd.ReadReply()
	if err != nil {
		c.t.Fatal(err)
	}
	n := len(c.tp.pending()) - c.rd.Buffered()
	raw := bytes.Clone(c.tp.pending()[:n])
	c.tp.consume(n)
	return rep.Clone(), raw
}

func (c *client) do(args ...string) resp.Reply {
	c.t.Helper()
	c.write(resp.AppendCommandStrings(nil, args...))
	rep, _ := c.read()
	return rep
}

// micros returns a TIME reply as microseconds since the epoch.
func micros(t *testing.T, rep resp.Reply) int64 {
	t.Helper()
	if rep.Type != resp.TypeArray || len(rep.Elems) != 2 {
		t.Fatalf("not a TIME reply: %v", rep)
	}
	sec, ok1 := resp.ParseInt(rep.Elems[0].Str)
	usec, ok2 := resp.ParseInt(rep.Elems[1].Str)
	if !ok1 || !ok2 {
		t.Fatalf("not a TIME reply: %v", rep)
	}
	return sec*1e6 + usec
}

// checkShift checks that TIME through front is the master's TIME plus
// off: between a direct TIME before and one after.
func checkShift(t *testing.T, direct, front *client, off time.Duration) {
	t.Helper()
	before := micros(t, direct.do("TIME"))
	got := micros(t, front.do("TIME")) - off.Microseconds()
	after := micros(t, direct.do("TIME"))
	if got < before || got > after {
		t.Fatalf("TIME through the front minus %v = %d, not within the master's [%d, %d]", off, got, before, after)
	}
}

func jump(t *testing.T, f *Front, d time.Duration) {
	t.Helper()
	if err := f.Jump(t.Context(), d); err != nil {
		t.Fatal(err)
	}
}

func TestTimeShift(t *testing.T) {
	addr := master(t, localmaster.Options{})
	f := Start(t, addr)
	direct, front := dial(t, addr), dial(t, f.Addr())
	if f.Target() != addr {
		t.Errorf("Target() = %q, want %q", f.Target(), addr)
	}
	checkShift(t, direct, front, 0)
	var off time.Duration
	for _, d := range []time.Duration{10 * time.Second, 5 * time.Second, -20 * time.Second, -250 * time.Microsecond, 0} {
		jump(t, f, d)
		off += d
		if f.Offset() != off {
			t.Fatalf("after Jump(%v): Offset() = %v, want %v", d, f.Offset(), off)
		}
		checkShift(t, direct, front, off)             // a connection open across the jump
		checkShift(t, direct, dial(t, f.Addr()), off) // and a new one
	}
	t.Run("inline", func(t *testing.T) {
		front := dial(t, f.Addr())
		front.write([]byte("PING\r\n\r\ntime\r\n"))
		if rep, _ := front.read(); rep.Text() != "PONG" {
			t.Fatalf("PING: %v", rep)
		}
		before := micros(t, direct.do("TIME"))
		rep, _ := front.read()
		if got := micros(t, rep) - off.Microseconds(); got < before-time.Second.Microseconds() || got > before+time.Second.Microseconds() {
			t.Fatalf("inline TIME not shifted by %v: %d vs %d", off, got, before)
		}
	})
}

// pipeline is every reply type Redis 7 sends in RESP2, each case once.
var pipeline = [][]string{
	{"SET", "cf:k", "v"},
	{"GET", "cf:k"},
	{"GET", "cf:missing"}, // null bulk
	{"TIME"},
	{"EVAL", "return {1, {2, {'x', false}}, {}, 'y'}", "0"}, // nested, null bulk inside, empty
	{"EVAL", "return redis.error_reply('MY failure')", "0"},
	{"INCR", "cf:k"},               // error
	{"BLPOP", "cf:nolist", "0.01"}, // null array
	{"MULTI"}, {"TIME"}, {"EXEC"},  // +OK, +QUEUED, an array with TIME's (not shifted)
	{"TIME"},
	{"EVAL", "return 42", "0"},
	{"SET", "cf:big", strings.Repeat("b", 40<<10)},
	{"GET", "cf:big"}, // longer than any buffer
	{"NOSUCHCOMMAND"},
	{"PING"},
}

func TestPipeline(t *testing.T) {
	addr := master(t, localmaster.Options{})
	f := Start(t, addr)
	const off = time.Hour
	jump(t, f, off)
	var cmds []byte
	for _, c := range pipeline {
		cmds = resp.AppendCommandStrings(cmds, c...)
	}
	run := func(c *client, write func([]byte)) (reps []resp.Reply, raws [][]byte) {
		write(cmds)
		for range pipeline {
			rep, raw := c.read()
			reps, raws = append(reps, rep), append(raws, raw)
		}
		return reps, raws
	}
	direct := dial(t, addr)
	_, wantRaw := run(direct, direct.write)
	for _, tc := range []struct {
		name  string
		chunk int // bytes per write; 0: one write
	}{{"one write", 0}, {"one byte per write", 1}, {"7 bytes per write", 7}} {
		t.Run(tc.name, func(t *testing.T) {
			front := dial(t, f.Addr())
			// The master's clock is this machine's: its TIME lies within
			// the run (a byte-by-byte run takes seconds on a busy machine:
			// the direct run's TIME is no reference, issue #43).
			lo := time.Now().Add(-time.Second).UnixMicro()
			got, gotRaw := run(front, func(b []byte) {
				if tc.chunk == 0 {
					front.write(b)
					return
				}
				for len(b) > 0 {
					n := min(tc.chunk, len(b))
					front.write(b[:n])
					b = b[n:]
				}
			})
			for i, c := range pipeline {
				switch {
				case c[0] == "TIME" && i > 0 && pipeline[i-1][0] == "MULTI":
					if got[i].Text() != "QUEUED" {
						t.Errorf("TIME in MULTI: %v", got[i])
					}
				case c[0] == "TIME":
					assertWithin(t, "TIME", micros(t, got[i])-off.Microseconds(), lo)
				case c[0] == "EXEC":
					// Documented: TIME inside MULTI is not shifted.
					if len(got[i].Elems) != 1 {
						t.Fatalf("EXEC: %v", got[i])
					}
					assertWithin(t, "TIME in EXEC", micros(t, got[i].Elems[0]), lo)
				default:
					if !bytes.Equal(gotRaw[i], wantRaw[i]) {
						t.Errorf("%.40q: through the front %.80q, direct %.80q", c, gotRaw[i], wantRaw[i])
					}
				}
			}
			if !bytes.HasPrefix(wantRaw[7], []byte("*-1\r\n")) || !bytes.HasPrefix(wantRaw[2], []byte("$-1\r\n")) {
				t.Errorf("the pipeline lost its null array or null bulk: %q, %q", wantRaw[7], wantRaw[2])
			}
		})
	}
}

// assertNear checks that two TIMEs in microseconds are within a second.
// assertWithin fails t unless got (µs) lies between lo and a second
// after now.
func assertWithin(t *testing.T, what string, got, lo int64) {
	t.Helper()
	if hi := time.Now().Add(time.Second).UnixMicro(); got < lo || got > hi {
		t.Errorf("%s: %d, want within [%d, %d] (the run, ± 1 s)", what, got, lo, hi)
	}
}

func assertNear(t *testing.T, what string, got, want int64) {
	t.Helper()
	if d := got - want; d < -1e6 || d > 1e6 {
		t.Errorf("%s: %d, want %d ± 1 s", what, got, want)
	}
}

func TestJumpCutsTTLs(t *testing.T) {
	addr := master(t, localmaster.Options{})
	f := Start(t, addr)
	c := dial(t, addr)
	for _, cmd := range [][]string{
		{"SET", "long", "v", "PX", "5000"},
		{"SET", "short", "v", "PX", "1500"},
		{"SET", "edge", "v", "PX", "2000"},
		{"SET", "forever", "v"},
		{"SELECT", "1"},
		{"SET", "long1", "v", "PX", "5000"},
		{"SET", "short1", "v", "PX", "1500"},
		{"SELECT", "0"},
	} {
		if rep := c.do(cmd...); !rep.IsOK() {
			t.Fatalf("%q: %v", cmd, rep)
		}
	}
	jump(t, f, 2*time.Second)
	pttl := func(key string) int64 { return c.do("PTTL", key).Int }
	checkCut := func(key string) {
		t.Helper()
		if p := pttl(key); p < 2500 || p > 3000 {
			t.Errorf("PTTL %s after Jump(2s) = %d, want ≈ 3000", key, p)
		}
	}
	checkCut("long")
	for _, k := range []string{"short", "edge"} {
		if p := pttl(k); p != -2 {
			t.Errorf("PTTL %s after Jump(2s) = %d, want -2 (expired)", k, p)
		}
	}
	if p := pttl("forever"); p != -1 {
		t.Errorf("PTTL forever = %d, want -1", p)
	}
	c.do("SELECT", "1")
	checkCut("long1")
	if p := pttl("short1"); p != -2 {
		t.Errorf("PTTL short1 (db 1) = %d, want -2", p)
	}
	c.do("SELECT", "0")

	before := pttl("long")
	jump(t, f, -time.Minute) // a backward jump leaves TTLs alone
	if p := pttl("long"); p > before || p < before-500 {
		t.Errorf("PTTL long after Jump(-1m) = %d, was %d", p, before)
	}
}

func TestJumpPassword(t *testing.T) {
	addr := master(t, localmaster.Options{Password: "s3cret"})
	t.Run("with", func(t *testing.T) {
		f := StartWith(t, addr, Options{Password: "s3cret"})
		jump(t, f, time.Second)
		if f.Offset() != time.Second {
			t.Fatalf("Offset() = %v", f.Offset())
		}
	})
	t.Run("without", func(t *testing.T) {
		f := Start(t, addr)
		err := f.Jump(t.Context(), time.Second)
		var re *resp.Error
		if !errors.As(err, &re) || re.Prefix() != "NOAUTH" {
			t.Fatalf("Jump without the password: %v, want NOAUTH", err)
		}
		if f.Offset() != 0 {
			t.Fatalf("a failed Jump moved the offset: %v", f.Offset())
		}
	})
}

func TestConnThroughFront(t *testing.T) {
	addr := master(t, localmaster.Options{})
	f := Start(t, addr)
	jump(t, f, time.Hour)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	c, err := conn.Dial(ctx, f.Addr(), conn.Config{DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Exec(ctx, "SET", "cf:conn", "hello"); err != nil {
		t.Fatal(err)
	}
	if rep, err := c.Exec(ctx, "GET", "cf:conn"); err != nil || rep.Text() != "hello" {
		t.Fatalf("GET: %v, %v", rep, err)
	}
	direct := dial(t, addr)
	rep, err := c.Exec(ctx, "TIME")
	if err != nil {
		t.Fatal(err)
	}
	assertNear(t, "TIME through conn", micros(t, rep)-time.Hour.Microseconds(), micros(t, direct.do("TIME")))
}

func TestRelayModes(t *testing.T) {
	addr := master(t, localmaster.Options{})
	f := Start(t, addr)
	jump(t, f, time.Hour)
	direct := dial(t, addr)
	unshifted := func(t *testing.T, c *client) {
		t.Helper()
		assertNear(t, "TIME after the switch", micros(t, c.do("TIME")), micros(t, direct.do("TIME")))
	}
	t.Run("subscribe", func(t *testing.T) {
		sub := dial(t, f.Addr())
		if rep := sub.do("SUBSCRIBE", "cf:ch"); len(rep.Elems) != 3 {
			t.Fatalf("SUBSCRIBE: %v", rep)
		}
		if rep := direct.do("PUBLISH", "cf:ch", "hi"); rep.Int != 1 {
			t.Fatalf("PUBLISH: %v", rep)
		}
		if rep, _ := sub.read(); len(rep.Elems) != 3 || rep.Elems[2].Text() != "hi" {
			t.Fatalf("message: %v", rep)
		}
		if rep := sub.do("RESET"); rep.Text() != "RESET" {
			t.Fatalf("RESET: %v", rep)
		}
		unshifted(t, sub)
	})
	t.Run("hello 3", func(t *testing.T) {
		c := dial(t, f.Addr())
		if rep := c.do("HELLO", "3"); rep.Type != resp.TypeMap {
			t.Fatalf("HELLO 3: %v", rep)
		}
		unshifted(t, c)
	})
	t.Run("client reply", func(t *testing.T) {
		c := dial(t, f.Addr())
		c.write(resp.AppendCommandStrings(nil, "CLIENT", "REPLY", "OFF"))
		c.write(resp.AppendCommandStrings(nil, "SET", "cf:quiet", "1"))
		if rep := c.do("CLIENT", "REPLY", "ON"); !rep.IsOK() {
			t.Fatalf("CLIENT REPLY ON: %v", rep)
		}
		unshifted(t, c)
	})
	t.Run("bad request", func(t *testing.T) {
		c := dial(t, f.Addr())
		c.write([]byte("TIME\r\n*1\r\n$x\r\n"))
		if rep, _ := c.read(); micros(t, rep) < micros(t, direct.do("TIME"))+time.Minute.Microseconds() {
			t.Fatalf("TIME before the bad request not shifted: %v", rep)
		}
		if rep, _ := c.read(); !rep.HasErrorPrefix("ERR") {
			t.Fatalf("bad request: %v, want the server's protocol error", rep)
		}
	})
}

func TestClose(t *testing.T) {
	addr := master(t, localmaster.Options{})
	base := runtime.NumGoroutine()
	f, err := New(addr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var cs []*client
	for range 3 {
		c := dial(t, f.Addr())
		if rep := c.do("PING"); rep.Text() != "PONG" {
			t.Fatalf("PING: %v", rep)
		}
		cs = append(cs, c)
	}
	cs[0].write(resp.AppendCommandStrings(nil, "BLPOP", "cf:never", "0")) // a reply in wait
	cs[1].write(resp.AppendCommandStrings(nil, "SUBSCRIBE", "cf:ch"))     // a plain relay
	if rep, _ := cs[1].read(); len(rep.Elems) != 3 {
		t.Fatalf("SUBSCRIBE: %v", rep)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for i, c := range cs {
		if _, err := c.rd.ReadReply(); !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !isReset(err) {
			t.Errorf("client %d after Close: %v, want EOF", i, err)
		}
	}
	if _, err := net.DialTimeout("tcp", f.Addr(), time.Second); err == nil {
		t.Error("the front still accepts after Close")
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines after Close, %d before Start:\n%s", n, base, buf[:runtime.Stack(buf, true)])
	}
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op)
}
