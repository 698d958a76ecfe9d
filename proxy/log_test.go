package proxy

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"
)

// TestLogsRefusedClients: wrong passwords and protocol errors are logged
// with the client's address (never the password tried), and a flood of
// them is capped per window.
func TestLogsRefusedClients(t *testing.T) {
	var logs syncBuffer
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
	for range 2 * logBurst {
		send("AUTH wrong-secret\r\n")
	}
	if n := strings.Count(logs.String(), "wrong password"); n > logBurst {
		t.Fatalf("%d wrong-password lines in one window, want at most %d", n, logBurst)
	}
}
