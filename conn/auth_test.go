package conn_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/internal/test/check"
	"github.com/redlock-dev/redlock/resp"
)

// TestAuthRefused: every way a master refuses to authenticate a connection
// fails the connect attempt with an error matching ErrAuth and ErrDown
// that keeps the server's reply; other handshake errors do not match
// ErrAuth.
func TestAuthRefused(t *testing.T) {
	noauth := func(s *fakeSession, _ []string) { s.reply("-NOAUTH Authentication required.\r\n") }
	script := conn.NewScript(testScript)
	for _, tc := range []struct {
		name     string
		cfg      conn.Config
		password string             // the fake's
		handlers map[string]handler // replacing the fake's defaults
		auth     bool               // want ErrAuth
		want     string             // in the error text
		prefix   string             // of the wrapped *resp.Error
	}{
		{"wrong password", conn.Config{Password: "nope"}, "secret", nil, true,
			"handshake AUTH: conn: authentication refused: WRONGPASS", "WRONGPASS"},
		{"wrong user", conn.Config{Username: "eve", Password: "secret"}, "secret", nil, true,
			"handshake AUTH: conn: authentication refused: WRONGPASS", "WRONGPASS"},
		{"password where none is set", conn.Config{Password: "pw"}, "", map[string]handler{
			"AUTH": func(s *fakeSession, _ []string) {
				s.reply("-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n")
			},
		}, true, "handshake AUTH: conn: authentication refused: ERR AUTH <password> called without", "ERR"},
		{"no password: NOAUTH on INFO", conn.Config{}, "secret", map[string]handler{"INFO": noauth}, true,
			"handshake INFO: conn: authentication refused: NOAUTH Authentication required.", "NOAUTH"},
		{"no password: NOAUTH on SCRIPT LOAD", conn.Config{Scripts: []*conn.Script{script}}, "secret",
			map[string]handler{"SCRIPT": noauth, "INFO": noauth}, true,
			"handshake SCRIPT LOAD: conn: authentication refused: NOAUTH", "NOAUTH"},
		{"bad db is not auth", conn.Config{DB: 99}, "", map[string]handler{
			"SELECT": func(s *fakeSession, _ []string) { s.reply("-ERR DB index is out of range\r\n") },
		}, false, "handshake SELECT: ERR DB index is out of range", "ERR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			f.password = tc.password
			for name, h := range tc.handlers {
				f.handle(name, h)
			}
			cfg := tc.cfg
			cfg.Dialer = f.Dial
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, err := conn.Dial(ctx, "fake:6379", cfg)
			if err == nil {
				c.Close()
				t.Fatal("Dial succeeded")
			}
			if errors.Is(err, conn.ErrAuth) != tc.auth || !errors.Is(err, conn.ErrDown) {
				t.Errorf("Dial error %v: matches ErrAuth %v (want %v), ErrDown %v",
					err, errors.Is(err, conn.ErrAuth), tc.auth, errors.Is(err, conn.ErrDown))
			}
			var re *resp.Error
			if !errors.As(err, &re) || re.Prefix() != tc.prefix {
				t.Errorf("Dial error %v does not wrap a *resp.Error %s", err, tc.prefix)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Dial error %q does not contain %q", err, tc.want)
			}
		})
	}
}

// TestAuthRefusedWhileDown: after a refused authentication the Conn keeps
// reconnecting, and its down error (Do's answer, DownErr, the state change)
// matches ErrAuth, so callers above (the engine's per-master errors) can
// tell a credentials problem from an outage.
func TestAuthRefusedWhileDown(t *testing.T) {
	f := newFake(t)
	f.password = "secret"
	states := make(chan conn.StateChange, 16)
	c := conn.New("fake:6379", conn.Config{
		Dialer:       f.Dial,
		Password:     "nope",
		DialTimeout:  10 * time.Second,
		ReconnectMin: time.Millisecond,
		ReconnectMax: 5 * time.Millisecond,
		OnState: func(sc conn.StateChange) {
			select {
			case states <- sc:
			default:
			}
		},
	})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitFirstAttempt(ctx); !errors.Is(err, conn.ErrAuth) {
		t.Fatalf("first attempt: %v, want ErrAuth", err)
	}
	select {
	case sc := <-states:
		if sc.Up || !errors.Is(sc.Err, conn.ErrAuth) {
			t.Errorf("state change %+v, want down with ErrAuth", sc)
		}
	case <-ctx.Done():
		t.Fatal("no state change")
	}
	err := c.Do(conn.Request{Cmd: cmd("PING"), Callback: newRecorder()})
	if !errors.Is(err, conn.ErrAuth) || !errors.Is(err, conn.ErrDown) {
		t.Errorf("Do while refused: %v, want ErrAuth and ErrDown", err)
	}
	if err := c.DownErr(); !errors.Is(err, conn.ErrAuth) {
		t.Errorf("DownErr: %v, want ErrAuth", err)
	}
	check.Eventually(t, 5*time.Second, "a second attempt", func() bool { return len(f.dialTimes()) >= 2 })
}
