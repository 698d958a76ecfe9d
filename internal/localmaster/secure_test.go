//go:build unix

package localmaster

import (
	"bufio"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/test/check"
	"github.com/redlock-dev/redlock/internal/test/testcerts"
)

// dialTLS is dial over TLS with cfg; it fails t if the handshake fails.
func dialTLS(t *testing.T, addr string, cfg *tls.Config) *client {
	t.Helper()
	c, err := tryTLS(addr, cfg)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.c.Close() })
	return c
}

// tryTLS dials addr with cfg and completes the handshake. With TLS 1.3 a
// server that refuses the client's certificate says so only after the
// handshake, so the caller learns it at its first read.
func tryTLS(addr string, cfg *tls.Config) (*client, error) {
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: time.Second}, Config: cfg}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &client{c: c, r: bufio.NewReader(c)}, nil
}

func certs(t *testing.T) (testcerts.Files, *tls.Config) {
	t.Helper()
	f, err := testcerts.Generate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := f.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	return f, cfg
}

func tlsFiles(f testcerts.Files) *TLSFiles {
	return &TLSFiles{CertFile: f.ServerCert, KeyFile: f.ServerKey, CAFile: f.CA, ClientCertFile: f.ClientCert, ClientKeyFile: f.ClientKey}
}

func TestRealTLS(t *testing.T) {
	requireServer(t)
	before := runtime.NumGoroutine()
	f, cfg := certs(t)
	s, err := Start(t.Context(), Options{N: 2, TLS: tlsFiles(f)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Embedded() {
		t.Fatal("TLS masters are embedded")
	}
	for _, m := range s.Masters() {
		expect(t, dialTLS(t, m.Addr(), cfg).do(t, "PING"), "+PONG")
	}
	m := s.Masters()[0]
	addr, pid := m.Addr(), m.PID()

	t.Run("no plain text", func(t *testing.T) {
		c := dial(t, addr)
		if err := c.send("PING"); err != nil {
			return // refused at once: fine
		}
		reply, err := c.read(2 * time.Second)
		if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("plain-text PING to the TLS port: %q, %v; want the connection closed", reply, err)
		}
		t.Logf("refused: %v", err)
	})
	t.Run("no client certificate", func(t *testing.T) {
		bare := cfg.Clone()
		bare.Certificates = nil
		c, err := tryTLS(addr, bare)
		if err == nil {
			defer c.c.Close()
			if err = c.send("PING"); err == nil {
				var reply string
				reply, err = c.read(2 * time.Second)
				if err == nil {
					t.Fatalf("PING without a client certificate: %q", reply)
				}
			}
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("no answer instead of a refusal: %v", err)
		}
		t.Logf("refused: %v", err)
	})
	t.Run("restart on the same port", func(t *testing.T) {
		c := dialTLS(t, addr, cfg)
		expect(t, c.do(t, "SET", "k", "v"), "+OK")
		if err := m.Restart(t.Context()); err != nil {
			t.Fatal(err)
		}
		if m.Addr() != addr || m.PID() == pid || m.PID() == 0 {
			t.Fatalf("after Restart: addr %q (was %q), pid %d (was %d)", m.Addr(), addr, m.PID(), pid)
		}
		expect(t, dialTLS(t, addr, cfg).do(t, "GET", "k"), "(nil)")
	})
	t.Run("pause, kill, restart", func(t *testing.T) {
		m := s.Masters()[1]
		c := dialTLS(t, m.Addr(), cfg)
		if err := m.Pause(); err != nil {
			t.Fatal(err)
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
		if reply, err := c.read(2 * time.Second); err != nil || reply != "+PONG" {
			t.Fatalf("after Resume: %q, %v", reply, err)
		}
		if err := m.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := m.Restart(t.Context()); err != nil {
			t.Fatal(err)
		}
		expect(t, dialTLS(t, m.Addr(), cfg).do(t, "PING"), "+PONG")
		if err := m.Stop(); err != nil {
			t.Fatal(err)
		}
	})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	check.NoLeak(t, before, 0)
}

func TestRealPassword(t *testing.T) {
	requireServer(t)
	const pw = "s3cret with spaces"
	t.Run("plain", func(t *testing.T) {
		s, err := Start(t.Context(), Options{N: 1, Password: pw})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		m := s.Masters()[0]
		c := dial(t, m.Addr())
		if got := c.do(t, "PING"); !strings.HasPrefix(got, "-NOAUTH") {
			t.Fatalf("PING before AUTH: %q, want -NOAUTH", got)
		}
		expect(t, c.do(t, "AUTH", "wrong"), "-WRONGPASS invalid username-password pair or user is disabled.")
		expect(t, c.do(t, "AUTH", pw), "+OK")
		expect(t, c.do(t, "PING"), "+PONG")
		if err := m.Restart(t.Context()); err != nil { // the probe authenticates
			t.Fatal(err)
		}
		c = dial(t, m.Addr())
		expect(t, c.do(t, "AUTH", pw), "+OK")
		expect(t, c.do(t, "PING"), "+PONG")
	})
	t.Run("TLS and ACL user", func(t *testing.T) {
		f, cfg := certs(t)
		s, err := Start(t.Context(), Options{N: 1, Password: pw, TLS: tlsFiles(f),
			ExtraArgs: []string{"--user", "locker", "on", ">lockpw", "~*", "&*", "+@all"}})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		c := dialTLS(t, s.Addrs()[0], cfg)
		expect(t, c.do(t, "AUTH", "locker", "lockpw"), "+OK")
		expect(t, c.do(t, "ACL", "WHOAMI"), "locker")
	})
}

func TestSecureOptions(t *testing.T) {
	f, _ := certs(t)
	t.Run("embedded", func(t *testing.T) {
		for _, o := range []Options{{N: 1, Embedded: true, Password: "pw"}, {N: 1, Embedded: true, TLS: tlsFiles(f)}} {
			if _, err := Start(t.Context(), o); err == nil || !strings.Contains(err.Error(), "embedded masters support neither") {
				t.Errorf("Start(%+v) err = %v", o, err)
			}
		}
	})
	t.Run("no fallback", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		for _, o := range []Options{{N: 1, Password: "pw"}, {N: 1, TLS: tlsFiles(f)}} {
			if _, err := Start(t.Context(), o); !errors.Is(err, ErrNoRedisServer) {
				t.Errorf("Start(%+v) err = %v, want ErrNoRedisServer", o, err)
			}
		}
	})
	t.Run("bad files", func(t *testing.T) {
		requireServer(t)
		missing := tlsFiles(f)
		missing.ClientKeyFile = ""
		wrongKey := tlsFiles(f)
		wrongKey.ClientKeyFile = f.ServerKey
		noCA := tlsFiles(f)
		noCA.CAFile = f.ServerKey
		for name, files := range map[string]*TLSFiles{"missing": missing, "wrong key": wrongKey, "no CA": noCA} {
			if _, err := Start(t.Context(), Options{N: 1, TLS: files}); err == nil || !strings.HasPrefix(err.Error(), "localmaster: Options.TLS") {
				t.Errorf("%s: err = %v", name, err)
			}
		}
	})
}

// TestSecureArgs checks the redis-server command lines: unchanged
// without Password and TLS, TLS-only listening with TLS.
func TestSecureArgs(t *testing.T) {
	plain := (&spec{extra: []string{"--x", "y"}}).args(0, 7000, "/d", "/d/l")
	want := "--port 7000 --bind 127.0.0.1 --save  --appendonly no --protected-mode no --daemonize no --dir /d --logfile /d/l --x y"
	if got := strings.Join(plain, " "); got != want {
		t.Errorf("plain args:\n%s\nwant\n%s", got, want)
	}
	sec := (&spec{password: "pw", tls: &TLSFiles{CertFile: "/c", KeyFile: "/k", CAFile: "/ca"}}).args(0, 7000, "/d", "/d/l")
	want = "--port 0 --tls-port 7000 --tls-cert-file /c --tls-key-file /k --tls-ca-cert-file /ca --tls-auth-clients yes --bind 127.0.0.1 --save  --appendonly no --protected-mode no --daemonize no --dir /d --logfile /d/l --requirepass pw"
	if got := strings.Join(sec, " "); got != want {
		t.Errorf("secure args:\n%s\nwant\n%s", got, want)
	}
}
