package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/localmaster/mastertest"
	"github.com/redlock-dev/redlock/internal/proctest"
	"github.com/redlock-dev/redlock/internal/relay"
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

// startProxyCmd runs `redlock proxy args...` in this process until the
// test ends and returns its stdout once the listening line is out.
func startProxyCmd(t *testing.T, args ...string) *proctest.Buffer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr proctest.Buffer
	done := make(chan error, 1)
	go func() { done <- proxyCmd(ctx, append([]string{"--listen", "127.0.0.1:0"}, args...), &stdout, &stderr) }()
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
	return &stdout
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
	out := startProxyCmd(t, "--fresh-masters", "--masters", strings.Join(set.Addrs(), ","), "--metrics-addr", "127.0.0.1:0", "--requirepass", "pw",
		"--pprof-addr", "127.0.0.1:0")
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
	if r, err := c.Exec(ctx, "EVAL", engine.ReleaseScript.Source(), "1", "rc:1", "tok"); err != nil || r.Int != 1 {
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
