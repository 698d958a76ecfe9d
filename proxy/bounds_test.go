package proxy

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/proxy/internal/redisson"
	"github.com/redlock-dev/redlock/resp"
)

// Regression tests for findings of a security read of the proxy.

// panicConn's Write blocks until release is closed, then panics: the
// writer goroutine fails while the reader waits for it.
type panicConn struct {
	net.Conn
	release chan struct{}
}

func (c panicConn) Write([]byte) (int, error) {
	<-c.release
	panic("test: write panics")
}

type panicListener struct {
	net.Listener
	release chan struct{}
}

func (l panicListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return panicConn{c, l.release}, nil
}

// TestWriterPanicNoDeadlock: a writer that panics while the reader waits
// for it to drain (backpressure) must not leave the reader, or Close,
// waiting forever.
func TestWriterPanicNoDeadlock(t *testing.T) {
	set := mastertest.Start(t, 3)
	srv, err := New(Config{EngineConfig: engine.Config{FreshMasters: true, Addrs: set.Addrs()}, MaxRequestBytes: 1024})
	if err != nil {
		t.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	release := make(chan struct{})
	go srv.Serve(panicListener{ln, release})
	c := dialRaw(t, ln.Addr().String())
	echo := string(resp.AppendCommandStrings(nil, "ECHO", strings.Repeat("e", 900)))
	c.send(echo)
	time.Sleep(100 * time.Millisecond) // the writer is stuck in its first Write
	c.send(echo + echo)
	// The reader has read the second ECHO and waits for the writer to
	// drain (backpressure: its request and reply are over 1024 bytes).
	time.Sleep(200 * time.Millisecond)
	close(release) // now the Write panics
	time.Sleep(100 * time.Millisecond)
	closed := make(chan struct{})
	go func() { srv.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close hangs: the connection's reader and writer wait for each other")
	}
	if srv.rs.Stats().PanicsRecovered == 0 {
		t.Fatal("the writer's panic was not counted")
	}
}

// TestWaitingCommandsHoldNoSlot: commands waiting for an earlier command on
// their key hold no MaxInFlight slot, so one client's chain on one key
// (slow, with a master stalled) does not starve another client.
func TestWaitingCommandsHoldNoSlot(t *testing.T) {
	e := startEnv(t, 5, func(c *Config) {
		c.MaxInFlight = 4
		c.EngineConfig.MasterTimeout = time.Second
	})
	mastertest.RequireReal(t, e.set)
	m := e.set.Masters()[4]
	if err := m.Pause(); err != nil {
		t.Fatal(err)
	}
	defer m.Resume()
	chain := dialRaw(t, e.addr)
	var b []byte
	for range 20 {
		b = resp.AppendCommandStrings(b, "GET", "chain") // each waits 1s for the stalled master
	}
	chain.send(string(b))
	time.Sleep(50 * time.Millisecond)
	other := dialRaw(t, e.addr)
	start := time.Now()
	if got := other.cmd("SET", "free", "tok", "NX", "PX", "10000"); got != "+OK\r\n" {
		t.Fatalf("SET: %q", got)
	}
	// Free slots: it runs at once. (Taking one slot per waiting GET, the
	// chain held all 4 and the SET waited at least the 1s GET.)
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("another client's SET waited %v behind one client's chain of GETs on one key", d)
	}
}

// TestUnauthenticatedBounds: before AUTH a connection gets its free 16 KiB
// only, and is closed if it does not authenticate in time; a request that
// does not complete in time closes the connection (slow-loris).
func TestUnauthenticatedBounds(t *testing.T) {
	e := startEnv(t, 3, func(c *Config) {
		c.RequirePass = "pw"
		c.AuthTimeout = time.Second
		c.RequestTimeout = time.Second
	})
	t.Run("20 KiB in one request", func(t *testing.T) {
		c := dialRaw(t, e.addr)
		args := []string{"AUTH"}
		for range 9 {
			args = append(args, strings.Repeat("p", 2300))
		}
		c.send(string(resp.AppendCommandStrings(nil, args...)))
		if got := c.read(); !strings.HasPrefix(got, "-ERR Protocol error: unauthenticated requests larger than 16 KiB") {
			t.Fatalf("got %q", got)
		}
	})
	t.Run("auth timeout", func(t *testing.T) {
		c := dialRaw(t, e.addr)
		if got := c.cmd("PING"); !strings.HasPrefix(got, "-NOAUTH") {
			t.Fatalf("got %q", got)
		}
		start := time.Now()
		if got := c.read(); got != "" {
			t.Fatalf("got %q", got)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("an unauthenticated connection stayed %v", d)
		}
	})
	t.Run("slow request", func(t *testing.T) {
		c := dialRaw(t, e.addr)
		if got := c.cmd("AUTH", "pw"); got != "+OK\r\n" {
			t.Fatalf("AUTH: %q", got)
		}
		time.Sleep(1500 * time.Millisecond) // idle longer than RequestTimeout between requests is fine (no idle timeout)
		if got := c.cmd("PING"); got != "+PONG\r\n" {
			t.Fatalf("after idling: %q", got)
		}
		c.send("*2\r\n$4\r\nECHO\r\n$10\r\nabc") // and never the rest
		start := time.Now()
		if got := c.read(); got != "" {
			t.Fatalf("got %q", got)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("a half-sent request kept the connection %v", d)
		}
	})
}

// TestRedissonRWBounds: a read-write lock's value is bounded (owners, and
// their bytes: long owner names are refused before 256 of them fit), and
// a batched read renewal names at most 512 owners (each is searched for
// in its lock's value on every master).
func TestRedissonRWBounds(t *testing.T) {
	e := startEnv(t, 3, nil)
	c := dialRaw(t, e.addr)
	read := rSHA(t, "redisson-3.20.0-rwReadTryLock")
	long := strings.Repeat("o", 200)
	refused := 0
	for i := range 120 {
		o := long + strconv.Itoa(i)
		r := c.cmd("EVALSHA", read, "2", "bounded", "{bounded}:"+o+":rwlock_timeout", "30000", o, o+":write")
		switch {
		case r == "$-1\r\n":
		case strings.Contains(r, "KiB"):
			refused++
		default:
			t.Fatalf("reader %d: %q", i, r)
		}
	}
	if refused == 0 {
		t.Fatal("120 readers with 200-byte names all joined: the value is not bounded")
	}
	if v := e.masters[0].Get(context.Background(), "bounded").Val(); len(v) > redisson.MaxRWValue {
		t.Fatalf("a value of %d bytes", len(v))
	}
	task := rSHA(t, "redisson-4.4.0-rwReadLockTask")
	renewal := func(counts ...int) []string {
		keys, argv := []string{}, []string{"30000"}
		for l, n := range counts {
			k := "lock" + strconv.Itoa(l)
			keys = append(keys, k, "{"+k+"}")
			argv = append(argv, strconv.Itoa(n))
			for i := range n {
				argv = append(argv, "o:"+strconv.Itoa(i))
			}
		}
		return append(append([]string{"EVALSHA", task, strconv.Itoa(len(keys))}, keys...), argv...)
	}
	if r := c.cmd(renewal(200, 200, 112)...); strings.Contains(r, "shape") {
		t.Fatalf("a renewal naming 512 owners: %q", r)
	}
	if r := c.cmd(renewal(200, 200, 113)...); !strings.Contains(r, "shape") {
		t.Fatalf("a renewal naming 513 owners: %q", r)
	}
}
