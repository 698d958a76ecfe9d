package localmaster

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/test/check"
)

// client is a minimal RESP client for tests.
type client struct {
	c net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{c: c, r: bufio.NewReader(c)}
}

func (c *client) send(args ...string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	_ = c.c.SetWriteDeadline(time.Now().Add(time.Second))
	_, err := io.WriteString(c.c, b.String())
	return err
}

// read reads one reply within d: "+OK", ":1", "-ERR ...", a bulk string's
// contents, or "(nil)".
func (c *client) read(d time.Duration) (string, error) {
	_ = c.c.SetReadDeadline(time.Now().Add(d))
	line, err := c.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if !strings.HasPrefix(line, "$") {
		return line, nil
	}
	n, err := strconv.Atoi(line[1:])
	if err != nil || n < 0 {
		return "(nil)", err
	}
	buf := make([]byte, n+2)
	if _, err := io.ReadFull(c.r, buf); err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

func (c *client) do(t *testing.T, args ...string) string {
	t.Helper()
	if err := c.send(args...); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	reply, err := c.read(2 * time.Second)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return reply
}

func expect(t *testing.T, got, want string) {
	t.Helper()
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestEmbedded(t *testing.T) {
	before := runtime.NumGoroutine()
	var notice bytes.Buffer
	s, err := Start(t.Context(), Options{N: 2, Embedded: true, Notice: &notice})
	if err != nil {
		t.Fatal(err)
	}
	if !s.Embedded() || len(s.Addrs()) != 2 {
		t.Fatalf("embedded=%v addrs=%v", s.Embedded(), s.Addrs())
	}
	if got := notice.String(); strings.Count(got, "\n") != 1 || !strings.Contains(got, "(forced)") {
		t.Fatalf("notice = %q", got)
	}
	m := s.Masters()[0]
	if m.PID() != 0 || !m.Running() {
		t.Fatalf("pid=%d running=%v", m.PID(), m.Running())
	}
	if !errors.Is(m.Pause(), ErrUnsupported) || !errors.Is(m.Resume(), ErrUnsupported) {
		t.Fatal("Pause/Resume should return ErrUnsupported")
	}

	c := dial(t, m.Addr())
	expect(t, c.do(t, "PING"), "+PONG")
	expect(t, c.do(t, "SET", "lock", "tok", "NX", "PX", "1000"), "+OK")
	expect(t, c.do(t, "SET", "lock", "other", "NX", "PX", "1000"), "(nil)")
	const unlock = `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`
	expect(t, c.do(t, "EVAL", unlock, "1", "lock", "other"), ":0")
	expect(t, c.do(t, "EVAL", unlock, "1", "lock", "tok"), ":1")
	sha := c.do(t, "SCRIPT", "LOAD", unlock)
	if len(sha) != 40 {
		t.Fatalf("SCRIPT LOAD = %q", sha)
	}
	expect(t, c.do(t, "SET", "lock", "tok", "NX", "PX", "1000"), "+OK")
	expect(t, c.do(t, "EVALSHA", sha, "1", "lock", "tok"), ":1")

	// Keys expire in real time, as in Redis.
	expect(t, c.do(t, "SET", "short", "v", "NX", "PX", "50"), "+OK")
	time.Sleep(100 * time.Millisecond)
	expect(t, c.do(t, "GET", "short"), "(nil)")
	expect(t, c.do(t, "SET", "short", "v", "NX", "PX", "50"), "+OK")

	// Kill drops the data and connections; Restart comes back empty on the same address.
	addr := m.Addr()
	expect(t, c.do(t, "SET", "k", "v"), "+OK")
	if err := m.Kill(); err != nil {
		t.Fatal(err)
	}
	if m.Running() {
		t.Fatal("killed master running")
	}
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		t.Fatal("killed master still accepts connections")
	}
	if err := m.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	if m.Addr() != addr {
		t.Fatalf("addr %q after Restart, want %q", m.Addr(), addr)
	}
	expect(t, dial(t, addr).do(t, "GET", "k"), "(nil)")
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Restart(t.Context()); err == nil {
		t.Fatal("Restart after Close succeeded")
	}
	check.NoLeak(t, before, 0)
}

func TestFallbackAndRequireReal(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	if Available() {
		t.Fatal("Available with empty PATH")
	}
	if _, err := Start(t.Context(), Options{N: 1, RequireReal: true}); !errors.Is(err, ErrNoRedisServer) {
		t.Fatalf("err = %v, want ErrNoRedisServer", err)
	}
	if _, err := Start(t.Context(), Options{N: 1, ServerPath: "/nonexistent/redis-server"}); !errors.Is(err, ErrNoRedisServer) {
		t.Fatalf("err = %v, want ErrNoRedisServer", err)
	}
	var notice bytes.Buffer
	s, err := Start(t.Context(), Options{Notice: &notice})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := "redlock: redis-server not found; using 5 embedded in-process masters (miniredis) — numbers are not representative\n"
	if !s.Embedded() || len(s.Masters()) != DefaultN || notice.String() != want {
		t.Fatalf("embedded=%v n=%d notice=%q", s.Embedded(), len(s.Masters()), notice.String())
	}
}

func TestInvalidOptions(t *testing.T) {
	for _, o := range []Options{{N: -1}, {Embedded: true, RequireReal: true}} {
		if _, err := Start(t.Context(), o); err == nil || !strings.HasPrefix(err.Error(), "localmaster: ") {
			t.Errorf("Start(%+v) err = %v", o, err)
		}
	}
}
