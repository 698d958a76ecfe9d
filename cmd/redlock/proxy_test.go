//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/localmaster"
	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/internal/test/proctest"
	"github.com/redlock-dev/redlock/internal/test/relay"
	"github.com/redlock-dev/redlock/internal/test/testcerts"
	"github.com/redlock-dev/redlock/proxy"
	"github.com/redlock-dev/redlock/resp"
)

func TestProxyFlagValidation(t *testing.T) {
	set := mastertest.Start(t, 3)
	r, err := relay.Start(set.Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	masters := strings.Join(set.Addrs(), ",")
	for _, tt := range []struct {
		name string
		args []string
		want string // substring of stderr
	}{
		{"no masters", nil, "--masters is required"},
		{"zero max-clients", []string{"--masters", masters, "--max-clients", "0"}, "--max-clients must be positive, got 0"},
		{"zero max-request-bytes", []string{"--masters", masters, "--max-request-bytes", "0"}, "--max-request-bytes must be positive"},
		{"negative max-args", []string{"--masters", masters, "--max-args", "-1"}, "--max-args must be positive"},
		{"zero max-client-memory", []string{"--masters", masters, "--max-client-memory", "0"}, "--max-client-memory must be positive"},
		{"negative shutdown-timeout", []string{"--masters", masters, "--shutdown-timeout", "-1s"}, `invalid value "-1s" for flag -shutdown-timeout: must not be negative`},
		{"negative master-timeout", []string{"--masters", masters, "--master-timeout", "-5ms"}, `flag -master-timeout: must not be negative`},
		{"zero dial-timeout", []string{"--masters", masters, "--dial-timeout", "0"}, "--dial-timeout must be a positive duration"},
		{"idle-timeout without unit", []string{"--masters", masters, "--idle-timeout", "30"}, "want a duration with a unit"},
		{"drift factor out of range", []string{"--masters", masters, "--drift-factor", "1.5"}, "invalid"},
		{"same address twice", []string{"--masters", set.Addrs()[0] + "," + set.Addrs()[0] + "," + set.Addrs()[1]}, "listed twice"},
		{"bad address", []string{"--masters", "127.0.0.1:abc"}, `--masters: "127.0.0.1:abc": port must be a number`},
		{"one server under two addresses", []string{"--masters", set.Addrs()[0] + "," + set.Addrs()[1] + "," + r.Addr()}, "are the same server"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"proxy", "--listen", "127.0.0.1:0"}, tt.args...), &stdout, &stderr)
			if code != 2 {
				t.Fatalf("exit code %d, want 2; stderr:\n%s", code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.want) {
				t.Fatalf("stderr lacks %q:\n%s", tt.want, stderr.String())
			}
		})
	}
}

// TestProxyNoQuorum: with fewer than a quorum reachable the proxy refuses
// to start at once, naming the dial errors (unless --wait-masters).
func TestProxyNoQuorum(t *testing.T) {
	set := mastertest.Start(t, 1)
	var refused []string
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		refused = append(refused, ln.Addr().String())
		ln.Close()
	}
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := run([]string{"proxy", "--listen", "127.0.0.1:0", "--fresh-masters", "--masters", strings.Join(append(set.Addrs(), refused...), ",")}, &stdout, &stderr)
	if d := time.Since(start); code != 2 || d > 5*time.Second || !strings.Contains(stderr.String(), "--masters: ") || !strings.Contains(stderr.String(), "1/3 masters reachable") ||
		!strings.Contains(stderr.String(), "connection refused") || !strings.Contains(stderr.String(), "--wait-masters") {
		t.Fatalf("exit %d after %v:\n%s", code, d, stderr.String())
	}
}

// TestProxyStartMessages: a proxy on masters started a moment ago logs
// at start when they will vote, with the flag that declares fresh masters,
// and its clients' SET gets the same story; on masters that refuse its
// password it ends naming the credentials, not "--wait-masters" or
// "masters reachable", and logs no "quorum lost" it never had.
func TestProxyStartMessages(t *testing.T) {
	set := mastertest.Start(t, 3)
	mastertest.RequireReal(t, set)
	stdout, stderr := startProxyCmdOut(t, "--masters", strings.Join(set.Addrs(), ","), "--max-ttl", "20s")
	for _, want := range []string{
		"masters in restart quarantine (they may have lost locks): locks are refused until a quorum of them votes", "votes_at=",
		"declare them fresh (--fresh-masters)",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("proxy start on masters started a moment ago: stderr does not say %q:\n%s", want, stderr.String())
		}
	}
	addr := strings.TrimSuffix(strings.Fields(strings.SplitN(stdout.String(), "listening on ", 2)[1])[0], ",")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprint(c, "*6\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n$2\r\nNX\r\n$2\r\nPX\r\n$4\r\n1000\r\n")
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"-ERR redlock proxy: unavailable: 3/3 masters answered, 3 of them in restart quarantine", "a quorum votes from",
		"declare them fresh (--fresh-masters)", "master 0: in restart quarantine until "} {
		if !strings.Contains(line, want) {
			t.Errorf("SET NX PX through the proxy: %q does not say %q", line, want)
		}
	}
	// A TTL over --max-ttl (redis-py's lock(timeout=300)) names the flag,
	// the TTL to set it to and its cost.
	fmt.Fprint(c, "*6\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n$2\r\nNX\r\n$2\r\nPX\r\n$6\r\n300000\r\n")
	ttlLine, err := r.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ttlLine, "ttl 5m0s is longer than the maximum TTL 20s: raise --max-ttl to at least 5m0s") || !strings.Contains(ttlLine, "restart quarantine") {
		t.Errorf("SET PX 300000 over --max-ttl 20s: %q", ttlLine)
	}
	line += ttlLine
	if strings.Contains(line+stderr.String(), "Config.") {
		t.Errorf("a library field is named:\n%s\n%s", line, stderr.String())
	}

	sec := mastertest.StartWith(t, localmaster.Options{N: 3, Password: "right"})
	var out, errb bytes.Buffer
	code := run([]string{"proxy", "--listen", "127.0.0.1:0", "--fresh-masters", "--master-password", "wrong", "--masters", strings.Join(sec.Addrs(), ",")}, &out, &errb)
	if msg := errb.String(); code != 2 || !strings.Contains(msg, "refused the credentials") || !strings.Contains(msg, "--master-password") ||
		strings.Contains(msg, "--wait-masters") || strings.Contains(msg, "masters reachable") || strings.Contains(msg, "quorum lost") {
		t.Errorf("wrong master password: exit %d:\n%s", code, msg)
	}
}

// startProxyCmd runs `redlock proxy args...` in this process until the
// test ends and returns its stdout once the listening line is out.
func startProxyCmd(t *testing.T, args ...string) *proctest.Buffer {
	t.Helper()
	stdout, _ := startProxyCmdOut(t, args...)
	return stdout
}

// startProxyCmdOut is startProxyCmd returning stderr too.
func startProxyCmdOut(t *testing.T, args ...string) (stdout, stderr *proctest.Buffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr = new(proctest.Buffer), new(proctest.Buffer)
	done := make(chan error, 1)
	go func() { done <- proxyCmd(ctx, append([]string{"--listen", "127.0.0.1:0"}, args...), stdout, stderr) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("proxy: %v\n%s", err, stderr.String())
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(stdout.String(), "listening on") {
		if time.Now().After(deadline) {
			t.Fatalf("proxy did not start:\n%s\n%s", stdout.String(), stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return stdout, stderr
}

// TestProxyWarnsOpenListener: a proxy listening beyond loopback (0.0.0.0,
// or every interface with no host) with neither --requirepass nor client
// certificates logs a warning on stderr before it says it listens; on
// loopback, or with a password or client certificates, it does not. No
// test traffic goes beyond 127.0.0.0/8: nothing connects to the proxy.
func TestProxyWarnsOpenListener(t *testing.T) {
	set := mastertest.Start(t, 3)
	certs, err := testcerts.Generate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(envProxyPassword, "")
	masters := strings.Join(set.Addrs(), ",")
	for _, tt := range []struct {
		name string
		args []string
		warn bool
	}{
		{"loopback", []string{"--listen", "127.0.0.1:0"}, false},
		{"localhost", []string{"--listen", "localhost:0"}, false},
		{"0.0.0.0", []string{"--listen", "0.0.0.0:0"}, true},
		{"no host", []string{"--listen", ":0"}, true},
		{"no host with a password", []string{"--listen", ":0", "--requirepass", "pw"}, false},
		{"no host with client certificates", []string{"--listen", ":0", "--tls-cert", certs.ServerCert, "--tls-key", certs.ServerKey,
			"--tls-client-ca", certs.CA}, false},
		{"no host with TLS but no client certificates", []string{"--listen", ":0", "--tls-cert", certs.ServerCert, "--tls-key", certs.ServerKey}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr := startProxyCmdOut(t, append([]string{"--fresh-masters", "--masters", masters}, tt.args...)...)
			warned := strings.Contains(stderr.String(), "level=WARN msg=\"listening beyond loopback without a password")
			if warned != tt.warn {
				t.Fatalf("warned %v, want %v; stderr:\n%s", warned, tt.warn, stderr.String())
			}
		})
	}
}

// field returns the word after marker in s.
func field(t *testing.T, s, marker string) string {
	t.Helper()
	_, rest, ok := strings.Cut(s, marker)
	if !ok {
		t.Fatalf("%q not in %q", marker, s)
	}
	return strings.TrimSuffix(strings.Fields(rest)[0], ",")
}

// TestProxyMetricsAndAuth: `redlock proxy --metrics-addr` serves /metrics
// whose acquisition series move with the clients' locks, with the proxy's
// own counters (connections, wrong passwords), and
// --requirepass refuses unauthenticated commands as Redis does.
func TestProxyMetricsAndAuth(t *testing.T) {
	set := mastertest.Start(t, 3)
	t.Setenv(envProxyPassword, "")
	// A generous per-master timeout: the default (50 ms for a 5 s lock)
	// times out on a loaded 2-core host under -race.
	out := startProxyCmd(t, "--fresh-masters", "--masters", strings.Join(set.Addrs(), ","), "--metrics-addr", "127.0.0.1:0", "--requirepass", "pw",
		"--pprof-addr", "127.0.0.1:0", "--master-timeout", "1s")
	addr := field(t, out.String(), "listening on ")
	url := field(t, out.String(), "metrics at ")
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	rd := bufio.NewReader(raw)
	for _, x := range []struct{ cmd, want string }{
		{"SET m:1 tok NX PX 5000\r\n", "-NOAUTH Authentication required.\r\n"},
		{"AUTH wrong\r\n", "-WRONGPASS invalid username-password pair or user is disabled.\r\n"},
		{"AUTH pw\r\n", "+OK\r\n"},
	} {
		raw.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(raw, x.cmd)
		if line, err := rd.ReadString('\n'); line != x.want {
			t.Fatalf("%q: got %q (%v), want %q", x.cmd, line, err, x.want)
		}
	}
	c := conn.New(addr, conn.Config{Password: "pw"})
	defer c.Close()
	ctx := t.Context()
	for i := range 20 {
		if r, err := c.Exec(ctx, "SET", fmt.Sprintf("m:%d", i), "tok", "NX", "PX", "5000"); err != nil || !r.IsOK() {
			t.Fatalf("SET: %v %v", r, err)
		}
	}
	if r, _ := c.Exec(ctx, "SET", "m:0", "other", "NX", "PX", "5000"); !r.IsNull() {
		t.Fatalf("SET on a held key: %v", r)
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`redlock_acquisitions_total{result="acquired"} 20`,
		`redlock_acquisitions_total{result="taken"} 1`,
		`redlock_masters_voting 3`,
		`redlock_master_rtt_seconds_count{master="0"}`,
		// The proxy's own counters: the raw connection and c's, open; the
		// one wrong password.
		"redlock_proxy_clients 2\n",
		"redlock_proxy_connections_accepted_total 2\n",
		"redlock_proxy_auth_failures_total 1\n",
		"redlock_proxy_protocol_errors_total 0\n",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	// --pprof-addr: the proxy's own goroutines, on a port of its own.
	resp, err = http.Get("http://" + field(t, out.String(), "pprof at http://") + "goroutine?debug=1")
	if err == nil {
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if err != nil || !strings.Contains(string(body), "redlock/proxy.(*Server).Serve") {
		t.Fatalf("pprof: %v %.300q", err, body)
	}
}

// TestReleaseChannel: with --release-channel, a release through `redlock
// proxy` publishes the key on every master, and `redlock lock` subscribes
// to the channel on every master while it holds or waits.
func TestReleaseChannel(t *testing.T) {
	set := mastertest.Start(t, 3)
	t.Setenv(envProxyPassword, "")
	t.Setenv(envMasters, "")
	// A subscriber on each master.
	var subs []*resp.Reader
	for _, a := range set.Addrs() {
		nc, err := net.Dial("tcp", a)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(nc, "SUBSCRIBE rl:released\r\n")
		rr := resp.NewReader(nc)
		if r, err := rr.ReadReply(); err != nil || len(r.Elems) != 3 || string(r.Elems[0].Str) != "subscribe" {
			t.Fatalf("SUBSCRIBE on %s: %v %v", a, r, err)
		}
		subs = append(subs, rr)
	}
	out := startProxyCmd(t, "--fresh-masters", "--masters", strings.Join(set.Addrs(), ","), "--release-channel", "rl:released")
	c := conn.New(field(t, out.String(), "listening on "), conn.Config{})
	defer c.Close()
	ctx := t.Context()
	if r, err := c.Exec(ctx, "SET", "rc:1", "tok", "NX", "PX", "5000"); err != nil || !r.IsOK() {
		t.Fatalf("SET: %v %v", r, err)
	}
	if r, err := c.Exec(ctx, "EVAL", scripts.Release.Source(), "1", "rc:1", "tok"); err != nil || r.Int != 1 {
		t.Fatalf("release: %v %v", r, err)
	}
	for i, rd := range subs {
		r, err := rd.ReadReply()
		if err != nil || len(r.Elems) != 3 || string(r.Elems[0].Str) != "message" || string(r.Elems[2].Str) != "rc:1" {
			t.Fatalf("master %d published %v (%v); want the released key", i, r, err)
		}
	}

	// redlock lock subscribes while it runs its command.
	mc := dialMasters(t, set)
	done := make(chan int, 1)
	go func() {
		code, _ := runLock("--fresh-masters", "--masters", strings.Join(set.Addrs(), ","), "--release-channel", "rl:released", "rc:2", "--", "sleep", "1")
		done <- code
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := 0
		for _, m := range mc {
			if r, err := m.Exec(ctx, "PUBSUB", "NUMSUB", "rl:released"); err == nil && len(r.Elems) == 2 {
				n += int(r.Elems[1].Int)
			}
		}
		if n == 2*len(mc) { // the test's subscriber and redlock lock's, on each master
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d subscribers on the channel over %d masters; want 2 each", n, len(mc))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code := <-done; code != 0 {
		t.Fatalf("redlock lock exit %d", code)
	}
	for i, rd := range subs {
		if r, err := rd.ReadReply(); err != nil || len(r.Elems) != 3 || string(r.Elems[2].Str) != "rc:2" {
			t.Fatalf("master %d: redlock lock's release published %v (%v)", i, r, err)
		}
	}
}

// TestParseProxyFlags: `redlock proxy`'s flags and environment become
// proxyOptions without starting anything: the defaults, flags that set
// fields, and bad values refused as usage errors naming the flag.
func TestParseProxyFlags(t *testing.T) {
	const masters = "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003"
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(envMasters, "")
	t.Setenv(envProxyPassword, "")
	t.Setenv(envPassword, "")
	t.Setenv(envMasterPassword, "")
	t.Setenv(envMasterUser, "")
	for _, tt := range []struct {
		name  string
		env   map[string]string
		args  []string
		check func(t *testing.T, o proxyOptions)
		err   string // substring of the usage error; "" for none
	}{
		{name: "defaults", args: []string{"--masters", masters}, check: func(t *testing.T, o proxyOptions) {
			ec := o.EngineConfig
			if o.Listen != proxy.DefaultListen || o.MaxClients != proxy.DefaultMaxClients || o.MaxArgs != proxy.DefaultMaxArgs ||
				o.AuthTimeout != proxy.DefaultAuthTimeout || o.RequirePass != "" || o.tls != nil || o.metricsAddr != "" || o.pprofAddr != "" ||
				o.checkTimeout != 3*time.Second || o.shutdownTimeout != 10*time.Second || o.waitMasters || o.AllowScripts {
				t.Errorf("proxy defaults: %+v", o)
			}
			if !slices.Equal(ec.Addrs, strings.Split(masters, ",")) || ec.DriftFactor != engine.DefaultDriftFactor || ec.ConnsPerMaster != 1 ||
				ec.MaxTTL != engine.DefaultMaxTTL || ec.Conn.DialTimeout != conn.DefaultDialTimeout || ec.Conn.TLS != nil || ec.Conn.Password != "" {
				t.Errorf("engine defaults: %+v", ec)
			}
		}},
		{name: "masters from the environment", env: map[string]string{envMasters: " 127.0.0.1:7001, 127.0.0.1:7002 "}, check: func(t *testing.T, o proxyOptions) {
			if want := []string{"127.0.0.1:7001", "127.0.0.1:7002"}; !slices.Equal(o.EngineConfig.Addrs, want) {
				t.Errorf("addrs %q, want %q", o.EngineConfig.Addrs, want)
			}
		}},
		{name: "flags", args: []string{"--masters", masters, "--listen", "127.0.0.1:0", "--max-clients", "7", "--idle-timeout", "90s",
			"--release-channel", "rl:rel", "--key-prefix", "t1:", "--wait-masters", "--shutdown-timeout", "2s", "--check-timeout", "250ms",
			"--metrics-addr", "127.0.0.1:9121", "--master-password", "mpw", "--drift-factor", "0.02"}, check: func(t *testing.T, o proxyOptions) {
			if o.Listen != "127.0.0.1:0" || o.MaxClients != 7 || o.IdleTimeout != 90*time.Second || o.EngineConfig.ReleaseChannel != "rl:rel" ||
				o.KeyPrefix != "t1:" || !o.waitMasters || o.shutdownTimeout != 2*time.Second || o.checkTimeout != 250*time.Millisecond ||
				o.metricsAddr != "127.0.0.1:9121" || o.EngineConfig.Conn.Password != "mpw" || o.EngineConfig.DriftFactor != 0.02 {
				t.Errorf("options: %+v", o)
			}
		}},
		{name: "cluster members", args: []string{"--masters", "127.0.0.1:7001,cluster:127.0.0.1:7101+127.0.0.1:7102,127.0.0.1:7002"}, check: func(t *testing.T, o proxyOptions) {
			ec := o.EngineConfig
			if !slices.Equal(ec.Addrs, []string{"127.0.0.1:7001", "127.0.0.1:7002"}) || len(ec.Clusters) != 1 ||
				!slices.Equal(ec.Clusters[0].Seeds, []string{"127.0.0.1:7101", "127.0.0.1:7102"}) {
				t.Errorf("members: addrs %q, clusters %v", ec.Addrs, ec.Clusters)
			}
		}},
		{name: "requirepass from a file", args: []string{"--masters", masters, "--requirepass-file", pwFile}, check: func(t *testing.T, o proxyOptions) {
			if o.RequirePass != "from-file" {
				t.Errorf("RequirePass %q", o.RequirePass)
			}
		}},
		{name: "requirepass from the environment", env: map[string]string{envProxyPassword: "from-env"}, args: []string{"--masters", masters},
			check: func(t *testing.T, o proxyOptions) {
				if o.RequirePass != "from-env" {
					t.Errorf("RequirePass %q", o.RequirePass)
				}
			}},
		{name: "requirepass flag wins over the environment", env: map[string]string{envProxyPassword: "from-env"},
			args: []string{"--masters", masters, "--requirepass", "flag"}, check: func(t *testing.T, o proxyOptions) {
				if o.RequirePass != "flag" {
					t.Errorf("RequirePass %q", o.RequirePass)
				}
			}},
		{name: "no masters", err: "--masters is required"},
		{name: "zero max-clients", args: []string{"--masters", masters, "--max-clients", "0"}, err: "--max-clients must be positive, got 0"},
		{name: "duration without unit", args: []string{"--masters", masters, "--idle-timeout", "30"}, err: "want a duration with a unit"},
		{name: "negative duration", args: []string{"--masters", masters, "--shutdown-timeout", "-1s"}, err: "must not be negative"},
		{name: "not a number", args: []string{"--masters", masters, "--max-args", "many"}, err: `invalid value "many" for flag -max-args`},
		{name: "bad master address", args: []string{"--masters", "127.0.0.1:0"}, err: "port must be a number from 1 to 65535"},
		{name: "cluster member without seeds", args: []string{"--masters", masters + ",cluster:127.0.0.1:7101+"}, err: "want cluster:host:port+host:port"},
		{name: "password twice", args: []string{"--masters", masters, "--requirepass", "a", "--requirepass-file", pwFile}, err: "are exclusive"},
		{name: "missing password file", args: []string{"--masters", masters, "--requirepass-file", pwFile + ".none"}, err: "--requirepass-file: open"},
		{name: "tls key without cert", args: []string{"--masters", masters, "--tls-key", pwFile}, err: "--tls-cert and --tls-key go together"},
		{name: "client CA without cert", args: []string{"--masters", masters, "--tls-client-ca", pwFile}, err: "--tls-client-ca needs --tls-cert"},
		{name: "master user without password", args: []string{"--masters", masters, "--master-user", "u"}, err: "--master-user needs a password"},
		{name: "positional argument", args: []string{"--masters", masters, "now"}, err: `unexpected arguments: ["now"]`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			checkParse(t, parseProxyFlags, tt.args, tt.err, tt.check)
		})
	}
}
