package conn_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/internal/test/check"
)

// TestEmptyCommandRefused: a command of no words gets no reply from a
// server, so queued it would take the next command's reply and every
// later one would go to the wrong caller. Exec without arguments and Do
// with an empty array, a negative count or an empty line are refused; the
// connection stays in step (found by the review of issue #46: Exec() took
// ECHO's reply).
func TestEmptyCommandRefused(t *testing.T) {
	c, _, _ := realConn(t, conn.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Exec(ctx); !errors.Is(err, conn.ErrBadCommand) {
		t.Fatalf("Exec(): %v, want ErrBadCommand", err)
	}
	// Nor does a server reply to a negative count or an empty inline line
	// (found by the review of the conn layer); an inline command is not
	// the RESP the connection counts replies by.
	for _, cmd := range []string{"*0\r\n", "*-1\r\n", "\r\n", " \r\n", "PING\r\n"} {
		if err := c.Do(conn.Request{Cmd: []byte(cmd), Callback: newRecorder(), Deadline: time.Now().Add(time.Second)}); !errors.Is(err, conn.ErrBadCommand) {
			t.Fatalf("Do(%q): %v, want ErrBadCommand", cmd, err)
		}
	}
	if r, err := c.Exec(ctx, "ECHO", "mine"); err != nil || r.Text() != "mine" {
		t.Fatalf("ECHO mine: %v %q (the replies are out of step)", err, r.Text())
	}
}

// TestNonPositiveBackoffDefaults: a negative ReconnectMin or ReconnectMax
// is the default, not a crash of the Conn's goroutine at its first failed
// connect (rand.N of a negative number; found by the review of issue
// #46). The dialer fails at once; the Conn keeps retrying.
func TestNonPositiveBackoffDefaults(t *testing.T) {
	for _, cfg := range []conn.Config{{ReconnectMin: -10 * time.Millisecond}, {ReconnectMin: -time.Second, ReconnectMax: -time.Millisecond}} {
		var dials atomic.Int32
		cfg.Dialer = func(context.Context, string, string) (net.Conn, error) {
			dials.Add(1)
			return nil, errors.New("refused")
		}
		c := conn.New("127.0.0.1:1", cfg)
		check.Eventually(t, 10*time.Second, "a reconnect after the first failed connect", func() bool { return dials.Load() >= 2 })
		c.Close()
	}
}
