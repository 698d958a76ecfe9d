//go:build unix

package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/internal/localmaster"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/internal/test/proctest"
	"github.com/redlock-dev/redlock/internal/test/testcerts"
)

// Secrets of the secured tests: distinctive, so that finding one in a log
// cannot be a coincidence.
const (
	secAdminPW  = "adm1n-Secret-c0ffee" // the masters' requirepass (default user)
	secMasterPW = "m4ster-Secret-7f3a9" // the masters' ACL user "locker"
	secProxyPW  = "pr0xy-Secret-91bc4e" // the proxy's --requirepass-file
	secWrongPW  = "wr0ng-Secret-55d2aa" // what a misconfigured client sends
)

// refusedWithin bounds how long a refused connection may take to fail a
// command: a refusal must not turn into a hang.
const refusedWithin = 10 * time.Second

// secureMasters are TLS-only masters requiring client certificates, with
// a requirepass and an ACL user "locker".
type secureMasters struct {
	files   testcerts.Files
	set     *localmaster.Set
	pwFile  string       // holds secMasterPW and a newline
	tlsArgs []string     // --master-tls-ca, --master-tls-cert, --master-tls-key
	direct  masterClient // the ACL user over TLS, to every master
}

func startSecureMasters(t *testing.T) *secureMasters {
	t.Helper()
	dir := t.TempDir()
	files, err := testcerts.Generate(dir)
	if err != nil {
		t.Fatal(err)
	}
	set := mastertest.StartWith(t, localmaster.Options{
		N:         3,
		TLS:       mastertest.TLSFiles(files),
		Password:  secAdminPW,
		ExtraArgs: []string{"--user", "locker", "on", ">" + secMasterPW, "~*", "&*", "+@all"},
	})
	clientTLS, err := files.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	m := &secureMasters{
		files:   files,
		set:     set,
		pwFile:  writeSecret(t, dir, "master-pw", secMasterPW),
		tlsArgs: []string{"--master-tls-ca", files.CA, "--master-tls-cert", files.ClientCert, "--master-tls-key", files.ClientKey},
	}
	for _, a := range set.Addrs() {
		c := conn.New(a, conn.Config{TLS: clientTLS, Username: "locker", Password: secMasterPW})
		t.Cleanup(func() { c.Close() })
		m.direct = append(m.direct, c)
	}
	return m
}

// masters returns --masters and its value.
func (m *secureMasters) masters() []string {
	return []string{"--fresh-masters", "--masters", strings.Join(m.set.Addrs(), ",")}
}

// writeSecret writes secret and a newline (as an editor would) to a file
// only its owner can read, and returns its path.
func writeSecret(t *testing.T, dir, name, secret string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// checkNoSecrets fails t if text (the stderr of what) shows any of the
// secrets.
func checkNoSecrets(t *testing.T, what, text string) {
	t.Helper()
	for _, s := range []string{secAdminPW, secMasterPW, secProxyPW, secWrongPW} {
		if strings.Contains(text, s) {
			t.Errorf("%s shows the secret %q:\n%s", what, s, text)
		}
	}
}

// timedLock is runLock, failing t if it takes longer than refusedWithin.
func timedLock(t *testing.T, args ...string) (int, string) {
	t.Helper()
	start := time.Now()
	code, stderr := runLock(args...)
	if d := time.Since(start); d > refusedWithin {
		t.Errorf("redlock lock took %v (exit %d), want under %v; stderr:\n%s", d, code, refusedWithin, stderr)
	}
	return code, stderr
}

// TestLockTLSAndACL: `redlock lock` takes its lock over TLS masters that
// require client certificates, as an ACL user whose password comes from a
// file or the environment; wrong passwords and missing certificates fail
// it quickly, and no password ever shows on its stderr.
func TestLockTLSAndACL(t *testing.T) {
	for _, v := range []string{envMasters, envMasterUser, envPassword, envMasterPassword, envProxyPassword} {
		t.Setenv(v, "")
	}
	m := startSecureMasters(t)
	secure := slices.Concat(m.masters(), m.tlsArgs)

	t.Run("password file", func(t *testing.T) {
		dir := t.TempDir()
		env, stop := filepath.Join(dir, "env"), filepath.Join(dir, "stop")
		script := `echo "$REDLOCK_TOKEN $REDLOCK_FENCING_TOKEN" > ` + env + `; while [ ! -e ` + stop + ` ]; do sleep 0.01; done; exit 3`
		type result struct {
			code   int
			stderr string
		}
		res := make(chan result, 1)
		go func() {
			code, stderr := runLock(slices.Concat(secure, []string{"--master-user", "locker", "--master-password-file", m.pwFile, "-v",
				"sec:file", "--", "sh", "-c", script})...)
			res <- result{code, stderr}
		}()
		f := strings.Fields(waitFile(t, env, refusedWithin))
		if len(f) != 2 {
			t.Fatalf("command environment %q", f)
		}
		if n, err := strconv.ParseInt(f[1], 10, 64); err != nil || n <= 0 {
			t.Errorf("REDLOCK_FENCING_TOKEN = %q, want > 0", f[1])
		}
		for i, v := range m.direct.await(t, 5*time.Second, f[0], "GET", "sec:file") {
			if v != f[0] {
				t.Errorf("master %d holds %q, want the command's token %q", i, v, f[0])
			}
		}
		os.WriteFile(stop, nil, 0o600)
		var r result
		select {
		case r = <-res:
		case <-time.After(refusedWithin):
			t.Fatal("redlock lock did not end after its command")
		}
		if r.code != 3 || !strings.Contains(r.stderr, "lock acquired") || !strings.Contains(r.stderr, "lock released") {
			t.Errorf("exit %d, want the command's 3 and -v's acquired/released lines; stderr:\n%s", r.code, r.stderr)
		}
		checkNoSecrets(t, "redlock lock -v", r.stderr)
		for i, v := range m.direct.do(t, "EXISTS", "sec:file") {
			if v != "0" {
				t.Errorf("master %d kept the lock after redlock lock exited (EXISTS %s)", i, v)
			}
		}
	})

	// The command's status passes through; the fencing token is positive.
	fenced := []string{"sh", "-c", `[ "$REDLOCK_FENCING_TOKEN" -gt 0 ] && exit 4`}
	t.Run("works", func(t *testing.T) {
		for _, tt := range []struct {
			name string
			env  map[string]string
			args []string
		}{
			{"REDLOCK_PASSWORD", map[string]string{envPassword: secMasterPW}, []string{"--master-user", "locker"}},
			{"REDLOCK_USER and REDLOCK_MASTER_PASSWORD", map[string]string{envMasterUser: "locker", envMasterPassword: secMasterPW}, nil},
			{"server name", map[string]string{envPassword: secMasterPW}, []string{"--master-user", "locker", "--master-tls-server-name", testcerts.ServerName}},
		} {
			t.Run(tt.name, func(t *testing.T) {
				for k, v := range tt.env {
					t.Setenv(k, v)
				}
				code, stderr := timedLock(t, slices.Concat(secure, tt.args, []string{"-v", "sec:env", "--"}, fenced)...)
				if code != 4 {
					t.Errorf("exit %d, want the command's 4; stderr:\n%s", code, stderr)
				}
				checkNoSecrets(t, "redlock lock -v", stderr)
			})
		}
	})

	otherCA, err := testcerts.Generate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	wrongFile := writeSecret(t, t.TempDir(), "wrong-pw", secWrongPW)
	for _, tt := range []struct {
		name string
		env  map[string]string
		args []string
		want string // in stderr
	}{
		{"wrong password file", nil, slices.Concat(secure, []string{"--master-user", "locker", "--master-password-file", wrongFile}), "WRONGPASS"},
		{"wrong password flag", nil, slices.Concat(secure, []string{"--master-user", "locker", "--master-password", secWrongPW}), "WRONGPASS"},
		{"wrong REDLOCK_PASSWORD", map[string]string{envPassword: secWrongPW}, slices.Concat(secure, []string{"--master-user", "locker"}), "WRONGPASS"},
		{"wrong user", nil, slices.Concat(secure, []string{"--master-user", "nobody", "--master-password-file", m.pwFile}), "WRONGPASS"},
		{"no password", nil, secure, "NOAUTH"},
		{"no client certificate", nil, slices.Concat(m.masters(), []string{"--master-tls-ca", m.files.CA, "--master-user", "locker", "--master-password-file", m.pwFile}), ""},
		{"unknown CA", nil, slices.Concat(m.masters(), []string{"--master-tls-ca", otherCA.CA, "--master-tls-cert", m.files.ClientCert,
			"--master-tls-key", m.files.ClientKey, "--master-user", "locker", "--master-password-file", m.pwFile}), "certificate"},
		{"no TLS", nil, slices.Concat(m.masters(), []string{"--master-user", "locker", "--master-password-file", m.pwFile}), ""},
		{"wrong server name", nil, slices.Concat(secure, []string{"--master-tls-server-name", "other.example", "--master-user", "locker",
			"--master-password-file", m.pwFile}), "other.example"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			ran := filepath.Join(t.TempDir(), "ran")
			for _, verbose := range []bool{false, true} {
				args := slices.Clone(tt.args)
				if verbose {
					args = append(args, "-v")
				}
				code, stderr := timedLock(t, append(args, "sec:refused", "--", "touch", ran)...)
				t.Logf("-v=%v: exit %d; stderr:\n%s", verbose, code, stderr)
				// Refused credentials are a configuration error (78), as
				// with --proxy; a failed TLS handshake leaves the masters
				// unreachable (69).
				want := exitUnavailable
				if tt.want == "WRONGPASS" || tt.want == "NOAUTH" {
					want = exitConfig
				}
				if code != want || !strings.Contains(stderr, tt.want) {
					t.Errorf("-v=%v: exit %d, want %d and %q in stderr:\n%s", verbose, code, want, tt.want, stderr)
				}
				checkNoSecrets(t, "redlock lock", stderr)
			}
			if _, err := os.Stat(ran); err == nil {
				t.Error("the command ran without the lock")
			}
		})
	}
}

// runningProxy is a `redlock proxy` run in this process by startProxy.
type runningProxy struct {
	addr   string
	stderr *proctest.Buffer
	stop   func() // cancels its ctx and checks that it returned nil
}

var listeningRE = regexp.MustCompile(`redlock proxy listening on (\S+) \(TLS\)`)

// startProxy runs `redlock proxy --listen 127.0.0.1:0 args...` (a TLS
// listener) until the returned proxy's stop, or the end of t.
func startProxy(t *testing.T, args ...string) *runningProxy {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stdout proctest.Buffer
	p := &runningProxy{stderr: new(proctest.Buffer)}
	done := make(chan error, 1)
	go func() {
		done <- proxyCmd(ctx, append([]string{"--listen", "127.0.0.1:0"}, args...), &stdout, p.stderr)
	}()
	var once sync.Once
	p.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("redlock proxy returned %v; stderr:\n%s", err, p.stderr)
				}
			case <-time.After(refusedWithin):
				t.Errorf("redlock proxy did not return within %v of its ctx's end", refusedWithin)
			}
		})
	}
	t.Cleanup(p.stop)
	deadline := time.After(refusedWithin)
	for {
		if m := listeningRE.FindStringSubmatch(stdout.String()); m != nil {
			p.addr = m[1]
			return p
		}
		select {
		case err := <-done:
			once.Do(cancel)
			t.Fatalf("redlock proxy exited at start: %v; stdout:\n%s\nstderr:\n%s", err, stdout.String(), p.stderr)
		case <-deadline:
			t.Fatalf("redlock proxy did not say it listens on TLS within %v; stdout:\n%s\nstderr:\n%s", refusedWithin, stdout.String(), p.stderr)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// redisClient is a go-redis client of the proxy at addr (TLS with tc,
// plain text when nil) that fails at once instead of retrying.
func redisClient(t *testing.T, addr string, tc *tls.Config) *redis.Client {
	c := redis.NewClient(&redis.Options{
		Addr: addr, TLSConfig: tc, Protocol: 2, DisableIndentity: true,
		MaxRetries: -1, PoolSize: 1, DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// connDo sends one command on a connection of its own (a [redis.Conn]
// has no Do).
func connDo(ctx context.Context, cn *redis.Conn, args ...any) *redis.Cmd {
	cmd := redis.NewCmd(ctx, args...)
	_ = cn.Process(ctx, cmd)
	return cmd
}

// checkNotServed fails t unless err is a transport failure: the client
// never got a Redis reply.
func checkNotServed(t *testing.T, what string, err error) {
	t.Helper()
	var re redis.Error
	switch {
	case err == nil:
		t.Errorf("%s: served", what)
	case errors.As(err, &re):
		t.Errorf("%s: got the reply %q, want the connection refused", what, err)
	default:
		t.Logf("%s: refused: %v", what, err)
	}
}

// authLock authenticates cn and takes key with SET NX PX, then checks
// that every master holds it (under the proxy's key prefix).
func authLock(t *testing.T, cn *redis.Conn, m *secureMasters, key string) {
	t.Helper()
	ctx := t.Context()
	if err := connDo(ctx, cn, "AUTH", secProxyPW).Err(); err != nil {
		t.Fatalf("AUTH with the right password: %v", err)
	}
	// The proxy listens before its master connections (TLS, ACL user)
	// are up: the lock is taken once INFO says every master is.
	for deadline := time.Now().Add(10 * time.Second); ; {
		info, err := connDo(ctx, cn, "INFO", "masters").Text()
		if err == nil && strings.Contains(info, "masters_up:"+strconv.Itoa(len(m.direct))+"\r\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the proxy's masters are not all up after 10 s: %v\n%s", err, info)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r, err := connDo(ctx, cn, "SET", key, "v", "NX", "PX", 1000).Result(); err != nil || r != "OK" {
		t.Fatalf("SET %s v NX PX 1000 after AUTH: %v %v, want OK", key, r, err)
	}
	if err := connDo(ctx, cn, "SET", key, "w", "NX", "PX", 1000).Err(); !errors.Is(err, redis.Nil) {
		t.Errorf("second SET NX of a held key: %v, want nil", err)
	}
	// SET NX PX answers at a quorum: the last master's SET may follow.
	for i, v := range m.direct.await(t, 5*time.Second, "v", "GET", "tenant:"+key) {
		if v != "v" {
			t.Errorf("master %d holds %q under tenant:%s, want v", i, v, key)
		}
	}
	for i, v := range m.direct.do(t, "EXISTS", key) {
		if v != "0" {
			t.Errorf("master %d has the unprefixed key %s (EXISTS %s)", i, key, v)
		}
	}
}

// TestProxyTLSEndToEnd: `redlock proxy` serves TLS clients, asks them for
// its password (from a file), and reaches TLS masters as an ACL user; with
// --tls-client-ca only clients with a certificate get in; `redlock lock
// --proxy` works through it; and no password shows on the proxy's stderr.
func TestProxyTLSEndToEnd(t *testing.T) {
	for _, v := range []string{envMasters, envMasterUser, envPassword, envMasterPassword, envProxyPassword} {
		t.Setenv(v, "")
	}
	m := startSecureMasters(t)
	proxyPWFile := writeSecret(t, t.TempDir(), "proxy-pw", secProxyPW)
	args := slices.Concat(m.masters(), m.tlsArgs, []string{"--master-user", "locker", "--master-password-file", m.pwFile,
		"--tls-cert", m.files.ServerCert, "--tls-key", m.files.ServerKey, "--requirepass-file", proxyPWFile, "--key-prefix", "tenant:"})
	p := startProxy(t, args...)
	pool, err := m.files.CAPool()
	if err != nil {
		t.Fatal(err)
	}
	serverOnly := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}

	t.Run("auth", func(t *testing.T) {
		ctx := t.Context()
		cn := redisClient(t, p.addr, serverOnly).Conn()
		defer cn.Close()
		if err := connDo(ctx, cn, "SET", "k", "v", "NX", "PX", 1000).Err(); err == nil || err.Error() != "NOAUTH Authentication required." {
			t.Errorf("SET before AUTH: %v, want NOAUTH Authentication required.", err)
		}
		const wrongPass = "WRONGPASS invalid username-password pair or user is disabled."
		if err := connDo(ctx, cn, "AUTH", secWrongPW).Err(); err == nil || !strings.HasPrefix(err.Error(), wrongPass) {
			t.Errorf("AUTH with a wrong password: %v, want %s", err, wrongPass)
		}
		if err := connDo(ctx, cn, "AUTH", "locker", secMasterPW).Err(); err == nil || !strings.HasPrefix(err.Error(), wrongPass) {
			t.Errorf("AUTH with the masters' ACL user: %v, want %s", err, wrongPass)
		}
		authLock(t, cn, m, "k")
	})
	t.Run("plain text", func(t *testing.T) {
		checkNotServed(t, "PING in plain text to the TLS listener", redisClient(t, p.addr, nil).Ping(t.Context()).Err())
	})
	t.Run("unknown CA", func(t *testing.T) {
		other, err := testcerts.Generate(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		otherPool, err := other.CAPool()
		if err != nil {
			t.Fatal(err)
		}
		err = redisClient(t, p.addr, &tls.Config{RootCAs: otherPool}).Ping(t.Context()).Err()
		checkNotServed(t, "PING trusting another CA", err)
	})

	t.Run("redlock lock --proxy", func(t *testing.T) {
		proxyArgs := []string{"--proxy", p.addr, "--proxy-tls-ca", m.files.CA}
		code, stderr := timedLock(t, slices.Concat(proxyArgs, []string{"--proxy-password", secProxyPW, "-v", "pk", "--", "true"})...)
		if code != 0 || !strings.Contains(stderr, "lock acquired") {
			t.Errorf("exit %d, want 0 and -v's lock acquired; stderr:\n%s", code, stderr)
		}
		checkNoSecrets(t, "redlock lock --proxy -v", stderr)
		code, stderr = timedLock(t, slices.Concat(proxyArgs, []string{"--proxy-password", secProxyPW, "pk", "--",
			"sh", "-c", `[ "$REDLOCK_FENCING_TOKEN" -gt 0 ] && exit 6`})...)
		if code != 6 {
			t.Errorf("exit %d, want the command's 6; stderr:\n%s", code, stderr)
		}
		for i, v := range m.direct.gone(t, "tenant:pk", 5*time.Second) {
			if v != "0" {
				t.Errorf("master %d kept tenant:pk after redlock lock exited (EXISTS %s)", i, v)
			}
		}
		for _, tt := range []struct {
			name string
			args []string
			code int
			want string
		}{
			{"wrong password", slices.Concat(proxyArgs, []string{"--proxy-password", secWrongPW}), exitConfig, "WRONGPASS"},
			{"no password", proxyArgs, exitConfig, "NOAUTH"},
			{"no TLS", []string{"--proxy", p.addr, "--proxy-password", secProxyPW}, exitConfig, "pass --proxy-tls-ca"},
		} {
			code, stderr := timedLock(t, append(tt.args, "-v", "pk", "--", "true")...)
			t.Logf("%s: exit %d; stderr:\n%s", tt.name, code, stderr)
			if code != tt.code || !strings.Contains(stderr, tt.want) {
				t.Errorf("%s: exit %d, want %d and %q in stderr:\n%s", tt.name, code, tt.code, tt.want, stderr)
			}
			checkNoSecrets(t, "redlock lock --proxy", stderr)
			if strings.Contains(stderr, "master") {
				t.Errorf("%s: an error about the proxy names a master:\n%s", tt.name, stderr)
			}
		}
	})

	t.Run("client certificates", func(t *testing.T) {
		pc := startProxy(t, append(args, "--tls-client-ca", m.files.CA)...)
		checkNotServed(t, "PING without a client certificate", redisClient(t, pc.addr, serverOnly).Ping(t.Context()).Err())
		withCert, err := m.files.ClientTLS()
		if err != nil {
			t.Fatal(err)
		}
		cn := redisClient(t, pc.addr, withCert).Conn()
		defer cn.Close()
		authLock(t, cn, m, "kc")
		// redlock lock --proxy without a client certificate is refused,
		// quickly; with --proxy-tls-cert/--proxy-tls-key it works.
		code, stderr := timedLock(t, "--proxy", pc.addr, "--proxy-tls-ca", m.files.CA, "--proxy-password", secProxyPW, "pk", "--", "true")
		t.Logf("redlock lock --proxy without a client certificate: exit %d; stderr:\n%s", code, stderr)
		if code != exitUnavailable {
			t.Errorf("redlock lock --proxy without a client certificate: exit %d, want %d; stderr:\n%s", code, exitUnavailable, stderr)
		}
		checkNoSecrets(t, "redlock lock --proxy", stderr)
		code, stderr = timedLock(t, "--proxy", pc.addr, "--proxy-tls-ca", m.files.CA, "--proxy-tls-cert", m.files.ClientCert, "--proxy-tls-key", m.files.ClientKey,
			"--proxy-password", secProxyPW, "pk", "--", "true")
		if code != 0 {
			t.Errorf("redlock lock --proxy with a client certificate: exit %d; stderr:\n%s", code, stderr)
		}
		pc.stop()
		checkNoSecrets(t, "redlock proxy --tls-client-ca", pc.stderr.String())
	})

	// A proxy whose masters refuse its password says so, and logs no
	// password: at start, and while it runs under --wait-masters.
	t.Run("wrong master password", func(t *testing.T) {
		wrong := slices.Concat(m.masters(), m.tlsArgs, []string{"--master-user", "locker", "--master-password", secWrongPW,
			"--tls-cert", m.files.ServerCert, "--tls-key", m.files.ServerKey, "--requirepass-file", proxyPWFile})
		var stdout, stderr proctest.Buffer
		start := time.Now()
		code := run(slices.Concat([]string{"proxy", "--listen", "127.0.0.1:0"}, wrong), &stdout, &stderr)
		t.Logf("exit %d after %v; stderr:\n%s", code, time.Since(start), stderr.String())
		if code != 2 || !strings.Contains(stderr.String(), "WRONGPASS") || time.Since(start) > refusedWithin {
			t.Errorf("exit %d after %v, want 2 and WRONGPASS; stderr:\n%s", code, time.Since(start), stderr.String())
		}
		checkNoSecrets(t, "redlock proxy", stderr.String())
		pw := startProxy(t, append(wrong, "--wait-masters")...)
		cn := redisClient(t, pw.addr, serverOnly).Conn()
		defer cn.Close()
		if err := connDo(t.Context(), cn, "AUTH", secProxyPW).Err(); err != nil {
			t.Fatalf("AUTH: %v", err)
		}
		err := connDo(t.Context(), cn, "SET", "kw", "v", "NX", "PX", 1000).Err()
		t.Logf("SET NX PX with the masters refusing the proxy: %v", err)
		var re redis.Error
		if !errors.As(err, &re) {
			t.Errorf("SET NX PX with the masters refusing the proxy: %v, want an error reply", err)
		}
		checkNoSecrets(t, "the proxy's error reply", err.Error())
		pw.stop()
		t.Logf("--wait-masters stderr:\n%s", pw.stderr)
		if !strings.Contains(pw.stderr.String(), "WRONGPASS") {
			t.Errorf("the proxy's log does not say why the masters are down:\n%s", pw.stderr)
		}
		checkNoSecrets(t, "redlock proxy --wait-masters", pw.stderr.String())
	})

	p.stop()
	if s := p.stderr.String(); !strings.Contains(s, "shutting down") {
		t.Errorf("the proxy's stderr lacks its shutdown line:\n%s", s)
	}
	checkNoSecrets(t, "redlock proxy", p.stderr.String())
}

// TestBenchTLSAndACL: `redlock bench --masters` reaches masters that
// require TLS with client certificates and an ACL user — the engine, the
// redsync peer, the ceiling pumps and the version probe all connect — and
// the --master-* flags without --masters are refused.
func TestBenchTLSAndACL(t *testing.T) {
	for _, v := range []string{envMasters, envMasterUser, envPassword, envMasterPassword} {
		t.Setenv(v, "")
	}
	m := startSecureMasters(t)
	var stdout, stderr bytes.Buffer
	report := t.TempDir()
	// The password on the command line: the report records the command
	// line, without it.
	args := slices.Concat([]string{"bench"}, m.masters(), m.tlsArgs, []string{"--master-user", "locker", "--master-password", secMasterPW,
		"--compare", "redsync", "--ceiling", "--duration", "600ms", "--concurrency", "4", "--master-timeout", "1s", "--json", "--quiet",
		"--report", report})
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
	}
	checkNoSecrets(t, "redlock bench", stdout.String()+stderr.String())
	for _, f := range []string{"index.html", "result.json"} {
		b, err := os.ReadFile(filepath.Join(report, f))
		if err != nil || !strings.Contains(string(b), "REDACTED") {
			t.Fatalf("report %s: %v (want the command line with the password redacted)", f, err)
		}
		checkNoSecrets(t, "the bench report "+f, string(b))
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var res struct {
		CyclesPerSec float64 `json:"cycles_per_sec"`
		Errors       uint64  `json:"errors"`
		Peers        []struct {
			Target       string  `json:"target"`
			CyclesPerSec float64 `json:"cycles_per_sec"`
			Errors       uint64  `json:"errors"`
		} `json:"peers"`
		Ceiling *struct {
			CyclesPerSec float64 `json:"cycles_per_sec"`
		} `json:"ceiling"`
		Env struct {
			RedisVersion string `json:"redis_version"`
		} `json:"env"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("last line is not JSON: %v\n%s", err, stdout.String())
	}
	if res.CyclesPerSec <= 0 || res.Errors != 0 || len(res.Peers) != 1 || res.Peers[0].CyclesPerSec <= 0 || res.Peers[0].Errors != 0 ||
		res.Ceiling == nil || res.Ceiling.CyclesPerSec <= 0 || res.Env.RedisVersion == "" {
		t.Fatalf("over TLS + ACL: %+v\n%s", res, lines[len(lines)-1])
	}
	// Wrong password: refused at the start, as a usage error.
	stdout.Reset()
	stderr.Reset()
	args = slices.Concat([]string{"bench"}, m.masters(), m.tlsArgs, []string{"--master-user", "locker", "--master-password", secWrongPW, "--duration", "300ms"})
	if code := run(args, &stdout, &stderr); code == 0 {
		t.Fatalf("a wrong password ran the bench:\n%s", stdout.String())
	}
	checkNoSecrets(t, "redlock bench", stdout.String()+stderr.String())
	// The bench never takes credentials from the environment: a password
	// exported for redlock lock is not sent to what --masters names.
	t.Setenv(envPassword, secMasterPW)
	t.Setenv(envMasterUser, "locker")
	stderr.Reset()
	args = slices.Concat([]string{"bench"}, m.masters(), m.tlsArgs, []string{"--duration", "300ms"})
	if code := run(args, &stdout, &stderr); code == 0 || !strings.Contains(stderr.String(), "NOAUTH") {
		t.Fatalf("bench with the password only in the environment: exit %d (want refused by the masters: NOAUTH)\n%s", code, stderr.String())
	}
	// The flags are for --masters: local masters need none.
	stderr.Reset()
	if code := run([]string{"bench", "--master-tls", "--duration", "300ms"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "--master-tls applies to --masters") {
		t.Fatalf("--master-tls without --masters: exit %d\n%s", code, stderr.String())
	}
}
