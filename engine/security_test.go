package engine_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/localmaster"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/internal/test/testcerts"
	"github.com/redlock-dev/redlock/resp"
)

// securedEngine returns an Engine over addrs whose connections use cc,
// once every master's first connect attempt is over.
func securedEngine(t *testing.T, addrs []string, cc conn.Config) *engine.Engine {
	t.Helper()
	cfg := functional
	cfg.Addrs, cfg.Conn = addrs, cc
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatalf("engine.New: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, _ = e.WaitReady(ctx) // its verdict is the callers' to check, through TryLock
	return e
}

// directConns dials every master with cc, for checking their state.
func directConns(t *testing.T, addrs []string, cc conn.Config) []*conn.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var cs []*conn.Conn
	for _, a := range addrs {
		c, err := conn.Dial(ctx, a, cc)
		if err != nil {
			t.Fatalf("dial %s: %v", a, err)
		}
		t.Cleanup(func() { c.Close() })
		cs = append(cs, c)
	}
	return cs
}

// onAll runs a command on every master and returns the replies as text
// (nilValue for a nil reply).
func onAll(t *testing.T, cs []*conn.Conn, args ...string) []string {
	t.Helper()
	out := make([]string, len(cs))
	for i, c := range cs {
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		r, err := c.Exec(ctx, args...)
		cancel()
		if err != nil {
			t.Fatalf("master %d: %q: %v", i, args, err)
		}
		out[i] = nilValue
		if !r.IsNull() {
			out[i] = r.Text()
		}
	}
	return out
}

// lockCycle takes, extends and releases a lock through e, checking on the
// masters through direct (connections that see the key appear, its TTL
// grow, and go).
func lockCycle(t *testing.T, e *engine.Engine, direct []*conn.Conn) {
	t.Helper()
	key := keyName(t)
	ctx := t.Context()
	l, err := e.TryLock(ctx, key, 2*time.Second)
	if err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	waitAll := func(what string, ok func([]string) bool, args ...string) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Second)
		for {
			got := onAll(t, direct, args...)
			if ok(got) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: masters answer %q to %q", what, got, args)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	every := func(pred func(string) bool) func([]string) bool {
		return func(vs []string) bool {
			for _, v := range vs {
				if !pred(v) {
					return false
				}
			}
			return true
		}
	}
	waitAll("held", every(func(v string) bool { return v == l.Token() }), "GET", key)
	if err := l.Extend(ctx, 30*time.Second); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	waitAll("extended", every(func(v string) bool {
		ms, err := strconv.Atoi(v)
		return err == nil && ms > 2000 && ms <= 30000
	}), "PTTL", key)
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	waitAll("released", every(func(v string) bool { return v == nilValue }), "GET", key)
}

// refused tries a lock through e and checks that it failed because no
// master could be reached: the error matches ErrUnavailable and every
// master's cause matches conn.ErrDown. It returns the error.
func refused(t *testing.T, e *engine.Engine) error {
	t.Helper()
	l, err := e.TryLock(t.Context(), keyName(t), time.Second)
	if err == nil {
		l.Unlock(t.Context())
		t.Fatal("TryLock succeeded")
	}
	if !errors.Is(err, engine.ErrUnavailable) {
		t.Fatalf("TryLock: %v, want ErrUnavailable", err)
	}
	ms := masterErrors(err)
	if len(ms) != len(e.Masters()) {
		t.Fatalf("TryLock: %v: %d master errors, want %d", err, len(ms), len(e.Masters()))
	}
	for i, me := range ms {
		if !errors.Is(me, conn.ErrDown) {
			t.Errorf("master %d: %v, want conn.ErrDown", i, me)
		}
	}
	return err
}

func TestTLS(t *testing.T) {
	files, err := testcerts.Generate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	set := mastertest.StartWith(t, localmaster.Options{N: 3, TLS: mastertest.TLSFiles(files)})
	addrs := set.Addrs()
	clientTLS, err := files.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	withName := func(name string) *tls.Config {
		c := clientTLS.Clone()
		c.ServerName = name
		return c
	}

	t.Run("lock", func(t *testing.T) {
		e := securedEngine(t, addrs, conn.Config{TLS: clientTLS})
		lockCycle(t, e, directConns(t, addrs, conn.Config{TLS: clientTLS}))
	})
	t.Run("server name localhost", func(t *testing.T) {
		e := securedEngine(t, addrs, conn.Config{TLS: withName(testcerts.ServerName)})
		lockCycle(t, e, directConns(t, addrs, conn.Config{TLS: clientTLS}))
	})
	t.Run("wrong server name", func(t *testing.T) {
		err := refused(t, securedEngine(t, addrs, conn.Config{TLS: withName("redis.example.com")}))
		var he x509.HostnameError
		if !errors.As(err, &he) || !strings.Contains(err.Error(), "tls handshake") {
			t.Errorf("TryLock: %v, want an x509.HostnameError from the TLS handshake", err)
		}
	})
	t.Run("wrong CA", func(t *testing.T) {
		other, err := testcerts.Generate(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		otherTLS, err := other.ClientTLS()
		if err != nil {
			t.Fatal(err)
		}
		err = refused(t, securedEngine(t, addrs, conn.Config{TLS: otherTLS}))
		var ua x509.UnknownAuthorityError
		if !errors.As(err, &ua) || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("TryLock: %v, want an x509.UnknownAuthorityError", err)
		}
	})
	t.Run("no client certificate", func(t *testing.T) {
		bare := clientTLS.Clone()
		bare.Certificates = nil
		err := refused(t, securedEngine(t, addrs, conn.Config{TLS: bare}))
		// With TLS 1.3 the client's handshake completes before the server
		// checks the certificate: the refusal shows as the server's alert
		// ("certificate required") or a reset on the first read or write.
		if errors.Is(err, conn.ErrAuth) {
			t.Errorf("TryLock: %v: a TLS refusal matches conn.ErrAuth", err)
		}
		t.Logf("refused: %v", err)
	})
	t.Run("plain text", func(t *testing.T) {
		refused(t, securedEngine(t, addrs, conn.Config{}))
	})
}

func TestACL(t *testing.T) {
	const requirepass = "default-secret"
	set := mastertest.StartWith(t, localmaster.Options{
		N:         3,
		Password:  requirepass,
		ExtraArgs: []string{"--user", "locker", "on", ">lockpw", "~*", "&*", "+@all"},
	})
	addrs := set.Addrs()
	admin := directConns(t, addrs, conn.Config{Password: requirepass})

	for _, tc := range []struct {
		name   string
		cc     conn.Config
		prefix string // "": works; else the refusal's *resp.Error prefix
	}{
		{"ACL user", conn.Config{Username: "locker", Password: "lockpw"}, ""},
		{"default user", conn.Config{Password: requirepass}, ""},
		{"default user named", conn.Config{Username: "default", Password: requirepass}, ""},
		{"wrong password", conn.Config{Username: "locker", Password: "nope"}, "WRONGPASS"},
		{"wrong user", conn.Config{Username: "nobody", Password: "lockpw"}, "WRONGPASS"},
		{"wrong requirepass", conn.Config{Password: "nope"}, "WRONGPASS"},
		{"no password", conn.Config{}, "NOAUTH"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := securedEngine(t, addrs, tc.cc)
			if tc.prefix == "" {
				lockCycle(t, e, admin)
				if tc.cc.Username == "locker" {
					for i, list := range onAll(t, admin, "CLIENT", "LIST") {
						if !strings.Contains(list, " user=locker ") {
							t.Errorf("master %d: no connection of user locker:\n%s", i, list)
						}
					}
				}
				return
			}
			err := refused(t, e)
			if !errors.Is(err, conn.ErrAuth) || !strings.Contains(err.Error(), tc.prefix) {
				t.Errorf("TryLock: %v, want conn.ErrAuth and %s", err, tc.prefix)
			}
			for i, me := range masterErrors(err) {
				var re *resp.Error
				if !errors.Is(me, conn.ErrAuth) || !errors.As(me, &re) || re.Prefix() != tc.prefix {
					t.Errorf("master %d: %v, want conn.ErrAuth wrapping a %s reply", i, me, tc.prefix)
				}
			}
			for _, st := range e.Status() {
				if st.Up || !errors.Is(st.Err, conn.ErrAuth) {
					t.Errorf("Status of master %d: up %v, err %v; want down with conn.ErrAuth", st.Index, st.Up, st.Err)
				}
			}
		})
	}
}

// TestTLSWithACL: the two together, as a deployment would run them.
func TestTLSWithACL(t *testing.T) {
	files, err := testcerts.Generate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	set := mastertest.StartWith(t, localmaster.Options{
		N:         3,
		TLS:       mastertest.TLSFiles(files),
		Password:  "default-secret",
		ExtraArgs: []string{"--user", "locker", "on", ">lockpw", "~*", "&*", "+@all"},
	})
	clientTLS, err := files.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	cc := conn.Config{TLS: clientTLS, Username: "locker", Password: "lockpw"}
	lockCycle(t, securedEngine(t, set.Addrs(), cc), directConns(t, set.Addrs(), cc))
	cc.Password = "nope"
	if err := refused(t, securedEngine(t, set.Addrs(), cc)); !errors.Is(err, conn.ErrAuth) {
		t.Errorf("TryLock: %v, want conn.ErrAuth", err)
	}
}
