package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/internal/test/proctest"
	"github.com/redlock-dev/redlock/internal/test/testcerts"
	"github.com/redlock-dev/redlock/proxy/internal/respserver"
)

// TestLogsRefusedClients: wrong passwords and protocol errors are logged
// with the client's address (never the password tried), and a flood of
// them is capped per window.
func TestLogsRefusedClients(t *testing.T) {
	var logs proctest.Buffer
	e := startEnv(t, 1, func(c *Config) {
		c.RequirePass = "right-secret"
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	send := func(cmd string) string {
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, cmd)
		line, _ := bufio.NewReader(c).ReadString('\n')
		return line
	}
	if got := send("AUTH wrong-secret\r\n"); !strings.HasPrefix(got, "-WRONGPASS") {
		t.Fatalf("AUTH: %q", got)
	}
	if got := send("*1\r\n$-5\r\n"); !strings.HasPrefix(got, "-ERR Protocol error") {
		t.Fatalf("bad bulk length: %q", got)
	}
	deadline := time.Now().Add(2 * time.Second)
	for !strings.Contains(logs.String(), "protocol error") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	out := logs.String()
	if !strings.Contains(out, `msg="proxy: wrong password" remote=127.0.0.1:`) || !strings.Contains(out, `msg="proxy: protocol error; closing the client" remote=127.0.0.1:`) {
		t.Fatalf("log lacks the refused clients:\n%s", out)
	}
	if strings.Contains(out, "secret") {
		t.Fatalf("a password reached the log:\n%s", out)
	}
	for range 2 * respserver.LogBurst {
		send("AUTH wrong-secret\r\n")
	}
	if n := strings.Count(logs.String(), "wrong password"); n > respserver.LogBurst {
		t.Fatalf("%d wrong-password lines in one window, want at most %d", n, respserver.LogBurst)
	}
	// The clients' flood used up their budget, not the masters': a master
	// failure behind a client's error reply is still logged, with the
	// address the reply leaves out.
	if err := e.set.Masters()[0].Kill(); err != nil {
		t.Fatal(err)
	}
	c := e.client(t)
	c.Do(t.Context(), "AUTH", "right-secret")
	if err := c.Do(t.Context(), "SET", "lg:1", "v", "NX", "PX", "5000").Err(); err == nil || !strings.Contains(err.Error(), "unavailable") {
		t.Fatalf("SET with the only master down: %v", err)
	}
	addr := e.set.Addrs()[0]
	for deadline := time.Now().Add(2 * time.Second); !strings.Contains(logs.String(), "command failed"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the master failure was not logged after the clients' flood:\n%s", logs.String())
		}
	}
	if line := logs.String()[strings.Index(logs.String(), "command failed"):]; !strings.Contains(line[:strings.IndexByte(line, '\n')], addr) {
		t.Fatalf("the logged failure lacks the master's address %s: %s", addr, line)
	}
}

// TestTLSHandshakeBounded: on a TLS listener a client that never sends its
// hello, or sends plain text, is closed within the request timeout and
// logged; it does not keep a client slot (here the only one).
func TestTLSHandshakeBounded(t *testing.T) {
	files, err := testcerts.Generate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	stc, err := files.ServerTLS(false)
	if err != nil {
		t.Fatal(err)
	}
	var logs proctest.Buffer
	set := mastertest.Start(t, 1)
	srv, err := New(Config{EngineConfig: engine.Config{FreshMasters: true, Addrs: set.Addrs()}, MaxClients: 1, RequestTimeout: 300 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(tls.NewListener(ln, stc))
	defer srv.Close()
	silent, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	start := time.Now()
	silent.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := silent.Read(make([]byte, 1)); err == nil || time.Since(start) > 3*time.Second {
		t.Fatalf("a silent client was not closed within the request timeout (%v after %v)", err, time.Since(start))
	}
	// The slot is free again: a real TLS client is served.
	ctc, err := files.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		c, err := tls.Dial("tcp", ln.Addr().String(), ctc)
		if err == nil {
			c.SetDeadline(time.Now().Add(3 * time.Second))
			io.WriteString(c, "PING\r\n")
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if line == "+PONG\r\n" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("TLS client not served after the silent one was closed: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Plain text on the TLS port: refused and logged (retried while the
	// TLS client's slot may still be taken: over MaxClients nothing is
	// logged).
	deadline = time.Now().Add(3 * time.Second)
	for strings.Count(logs.String(), "TLS handshake failed") < 2 && time.Now().Before(deadline) {
		plain, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(plain, "PING\r\n")
		plain.SetReadDeadline(time.Now().Add(3 * time.Second))
		plain.Read(make([]byte, 64))
		plain.Close()
		time.Sleep(20 * time.Millisecond)
	}
	if n := strings.Count(logs.String(), `msg="proxy: TLS handshake failed; closing the client" remote=127.0.0.1:`); n < 2 {
		t.Fatalf("%d handshake failures logged, want 2 (silent, plain text):\n%s", n, logs.String())
	}
}

// TestEveryFailureLogged: every failure behind an engine error reply is
// logged (within the budgets) — the caller's own timeout, a shutdown and
// a client's bad argument too, not only master failures (issue 31 item 6:
// "command timed out" returned before logging).
func TestEveryFailureLogged(t *testing.T) {
	var logs proctest.Buffer
	// Port 1 refuses at once: the engine is never used here.
	srv, err := New(Config{EngineConfig: engine.Config{FreshMasters: true, Addrs: []string{"127.0.0.1:1"}},
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, tc := range []struct {
		err   error
		reply string
	}{
		{context.DeadlineExceeded, "ERR redlock proxy: command timed out"},
		{engine.ErrClosed, respserver.MsgShuttingDown},
		{fmt.Errorf("%w: empty key", engine.ErrBadArgument), "ERR redlock proxy: invalid argument: empty key"},
		{fmt.Errorf("%w: 1/3 masters", engine.ErrLockLost), "ERR redlock proxy: lock lost"},
	} {
		before := strings.Count(logs.String(), `msg="proxy: command failed"`)
		if got := string(srv.lc.EngineErr(tc.err)); got != "-"+tc.reply+"\r\n" {
			t.Errorf("engineErr(%v) = %q, want %q", tc.err, got, tc.reply)
		}
		out := logs.String()
		if n := strings.Count(out, `msg="proxy: command failed"`); n != before+1 || !strings.Contains(out, tc.err.Error()) {
			t.Errorf("engineErr(%v) logged %d lines, want 1 with the error:\n%s", tc.err, n-before, out)
		}
	}
}
