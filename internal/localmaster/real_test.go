//go:build unix

package localmaster

import (
	"context"
	"errors"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/test/check"
)

// requireServer skips the test unless redis-server is available; with
// REDLOCK_REQUIRE_REDIS=1 a missing server is a failure instead.
func requireServer(t *testing.T) {
	t.Helper()
	if Available() {
		return
	}
	if os.Getenv("REDLOCK_REQUIRE_REDIS") == "1" {
		t.Fatal("redis-server not on PATH and REDLOCK_REQUIRE_REDIS=1")
	}
	t.Skip("redis-server not on PATH")
}

func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

func TestReal(t *testing.T) {
	requireServer(t)
	before := runtime.NumGoroutine()
	s, err := Start(t.Context(), Options{N: 3, RequireReal: true})
	if err != nil {
		t.Fatal(err)
	}
	if s.Embedded() || len(s.Masters()) != 3 || len(s.Addrs()) != 3 {
		t.Fatalf("embedded=%v masters=%d", s.Embedded(), len(s.Masters()))
	}
	pids := map[int]bool{}
	for i, m := range s.Masters() {
		if m.Index() != i || m.Addr() != s.Addrs()[i] || !strings.HasPrefix(m.Addr(), "127.0.0.1:") {
			t.Fatalf("master %d: index %d addr %q", i, m.Index(), m.Addr())
		}
		if !m.Running() || m.PID() <= 0 || pids[m.PID()] {
			t.Fatalf("master %d: running=%v pid=%d", i, m.Running(), m.PID())
		}
		pids[m.PID()] = true
		expect(t, dial(t, m.Addr()).do(t, "PING"), "+PONG")
	}

	t.Run("KillRestart", func(t *testing.T) {
		m := s.Masters()[0]
		addr, pid := m.Addr(), m.PID()
		expect(t, dial(t, addr).do(t, "SET", "k", "v"), "+OK")
		if err := m.Kill(); err != nil {
			t.Fatal(err)
		}
		if m.Running() || m.PID() != 0 || !processGone(pid) {
			t.Fatalf("after Kill: running=%v pid=%d gone=%v", m.Running(), m.PID(), processGone(pid))
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Fatal("killed master still accepts connections")
		}
		if err := m.Kill(); err != nil {
			t.Fatalf("second Kill: %v", err)
		}
		if err := m.Restart(t.Context()); err != nil {
			t.Fatal(err)
		}
		if m.Addr() != addr || m.PID() == pid || m.PID() == 0 {
			t.Fatalf("after Restart: addr %q (was %q), pid %d (was %d)", m.Addr(), addr, m.PID(), pid)
		}
		pids[m.PID()] = true
		c := dial(t, addr)
		expect(t, c.do(t, "PING"), "+PONG")
		expect(t, c.do(t, "GET", "k"), "(nil)")
	})

	t.Run("PauseResume", func(t *testing.T) {
		m := s.Masters()[1]
		c := dial(t, m.Addr())
		expect(t, c.do(t, "PING"), "+PONG")
		if err := m.Pause(); err != nil {
			t.Fatal(err)
		}
		if !m.Running() {
			t.Fatal("paused master not running")
		}
		if err := c.send("PING"); err != nil {
			t.Fatal(err)
		}
		if reply, err := c.read(200 * time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("paused master replied %q, %v", reply, err)
		}
		if err := m.Resume(); err != nil {
			t.Fatal(err)
		}
		reply, err := c.read(2 * time.Second)
		if err != nil || reply != "+PONG" {
			t.Fatalf("after Resume: %q, %v", reply, err)
		}
		// Stop must work on a paused master (SIGCONT before SIGTERM).
		if err := m.Pause(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := m.Stop(); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("Stop of paused master took %v (SIGKILL fallback?)", d)
		}
		if m.Running() {
			t.Fatal("stopped master running")
		}
		if err := m.Pause(); err == nil {
			t.Fatal("Pause of stopped master succeeded")
		}
	})

	t.Run("Stop", func(t *testing.T) {
		m := s.Masters()[2]
		pid := m.PID()
		if err := m.Stop(); err != nil {
			t.Fatal(err)
		}
		if m.Running() || !processGone(pid) {
			t.Fatal("master still running after Stop")
		}
		if err := m.Stop(); err != nil {
			t.Fatalf("second Stop: %v", err)
		}
		if err := m.Restart(t.Context()); err != nil {
			t.Fatal(err)
		}
		pids[m.PID()] = true
		expect(t, dial(t, m.Addr()).do(t, "PING"), "+PONG")
	})

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for pid := range pids {
		if !processGone(pid) {
			t.Errorf("process %d still exists after Close", pid)
		}
	}
	for _, m := range s.Masters() {
		if m.Running() {
			t.Errorf("master %d running after Close", m.Index())
		}
		if err := m.Restart(t.Context()); err == nil {
			t.Errorf("master %d restarted after Close", m.Index())
		}
	}
	if _, err := os.Stat(s.dir); !os.IsNotExist(err) {
		t.Errorf("temp dir %s not removed: %v", s.dir, err)
	}
	check.NoLeak(t, before, 0)
}

func TestRealStartFailureShowsLog(t *testing.T) {
	requireServer(t)
	before := runtime.NumGoroutine()
	_, err := Start(t.Context(), Options{N: 2, ExtraArgs: []string{"--no-such-directive", "x"}})
	if err == nil || !strings.Contains(err.Error(), "no-such-directive") || !strings.HasPrefix(err.Error(), "localmaster: ") {
		t.Fatalf("err = %v, want the redis-server log tail", err)
	}
	check.NoLeak(t, before, 0)
}

func TestRealStartCanceled(t *testing.T) {
	requireServer(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Start(ctx, Options{N: 2}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// loopNet is a Network on this host's loopback: master i on 127.0.0.(2+i),
// started under env (which execs it), dialled with a counting dialer.
type loopNet struct{ dials *atomic.Int64 }

func (n loopNet) Host(i int) string      { return "127.0.0." + strconv.Itoa(2+i) }
func (n loopNet) Command(i int) []string { return []string{"env"} }
func (n loopNet) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	n.dials.Add(1)
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// TestNet: with Options.Net each master listens on its host, runs under
// its command prefix as its own process (the probe checked its pid) and
// is probed through the Network's dialer, restarts included; Net needs
// real masters.
func TestNet(t *testing.T) {
	n := loopNet{dials: new(atomic.Int64)}
	if _, err := Start(t.Context(), Options{N: 1, Embedded: true, Net: n}); err == nil {
		t.Error("Start with Embedded and Net: no error")
	}
	t.Run("no fallback", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		if _, err := Start(t.Context(), Options{N: 1, Net: n}); !errors.Is(err, ErrNoRedisServer) {
			t.Errorf("Start with Net and no redis-server: %v, want ErrNoRedisServer", err)
		}
	})
	requireServer(t)
	s, err := Start(t.Context(), Options{N: 2, Net: n})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i, m := range s.Masters() {
		if want := n.Host(i) + ":"; !strings.HasPrefix(m.Addr(), want) {
			t.Errorf("master %d: address %s, want %s…", i, m.Addr(), want)
		}
		expect(t, dial(t, m.Addr()).do(t, "PING"), "+PONG")
	}
	if n.dials.Load() < 2 {
		t.Errorf("%d probe dials through the Network, want at least 2", n.dials.Load())
	}
	m := s.Masters()[1]
	addr := m.Addr()
	if err := m.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	if m.Addr() != addr {
		t.Errorf("restarted master moved from %s to %s", addr, m.Addr())
	}
	expect(t, dial(t, m.Addr()).do(t, "PING"), "+PONG")
}
