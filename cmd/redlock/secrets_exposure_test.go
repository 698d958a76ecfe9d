//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/internal/test/proctest"
)

// TestBenchRedactsProxyPassword: `redlock bench --proxy-password` is a
// secret like --master-password; the command line recorded in the report
// (result.json, index.html) and in the --json line (env.args) carried it
// (found by the security review of issue #46).
func TestBenchRedactsProxyPassword(t *testing.T) {
	t.Setenv(envProxyPassword, "")
	const secret = "pr0xy-Bench-Secret-42"
	for _, args := range [][]string{
		{"--target", "proxy", "--proxy", "127.0.0.1:7380", "--proxy-password", secret},
		{"--target", "proxy", "--proxy", "127.0.0.1:7380", "--proxy-password=" + secret},
	} {
		o, err := parseBenchFlags(args, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if o.ProxyConn.Password != secret {
			t.Fatalf("password not parsed: %q", o.ProxyConn.Password)
		}
		if slices.ContainsFunc(o.Config.Args, func(a string) bool { return strings.Contains(a, secret) }) {
			t.Errorf("recorded command line (report env.args) carries the proxy password: %q", o.Config.Args)
		}
	}
}

// TestPprofServesNoCmdline: `redlock proxy --pprof-addr` served
// /debug/pprof/cmdline, which handed the process's arguments —
// --requirepass and --master-password given as flags — to anyone who
// reached the pprof port (ps shows them only on the host; found by the
// security review of issue #46). The other pprof handlers still answer.
func TestPprofServesNoCmdline(t *testing.T) {
	set := mastertest.Start(t, 3)
	const secret = "pprof-Requirepass-Secret-77"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "proxy", "--listen", "127.0.0.1:0", "--fresh-masters",
		"--masters", strings.Join(set.Addrs(), ","), "--requirepass", secret, "--pprof-addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "REDLOCK_TEST_MAIN=1", envProxyPassword+"=")
	var stdout, stderr proctest.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); cmd.Wait() }()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(stdout.String(), "listening on") {
		if time.Now().After(deadline) {
			t.Fatalf("proxy did not start:\n%s\n%s", stdout.String(), stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	base := "http://" + field(t, stdout.String(), "pprof at http://")
	get := func(path string) (int, []byte) {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, body
	}
	if code, body := get("cmdline"); code == http.StatusOK || bytes.Contains(body, []byte(secret)) {
		t.Errorf("GET %scmdline (no authentication): %d %q; want not served", base, code, body)
	}
	if code, _ := get("goroutine?debug=1"); code != http.StatusOK {
		t.Errorf("GET %sgoroutine: %d; the profiles must still be served", base, code)
	}
}

// TestHolderQuotesToken: the token `redlock holder` prints is the value
// any client of the masters (or of a proxy: SET key value NX PX) wrote.
// Printed raw, a value with a newline forged output lines (here "KEY is
// free") and one with ESC sequences drove the operator's terminal (found
// by the security review of issue #46); it is quoted as inspect quotes
// values, and --json keeps it exact.
func TestHolderQuotesToken(t *testing.T) {
	set := mastertest.Start(t, 3)
	forged := "x\nreview:k is free\x1b[2K"
	for _, a := range set.Addrs() {
		c := redis.NewClient(&redis.Options{Addr: a, Protocol: 2, DisableIndentity: true})
		if err := c.Set(context.Background(), "review:k", forged, 30*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"holder", "--masters", strings.Join(set.Addrs(), ","), "--fresh-masters", "review:k"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	if strings.Count(out, "\n") != 1 || strings.Contains(out, "\x1b") {
		t.Errorf("holder printed the client-written token raw (forged line / escape sequence): %q", out)
	}
	// The JSON form is safe (encoding/json escapes control characters).
	stdout.Reset()
	run([]string{"holder", "--json", "--masters", strings.Join(set.Addrs(), ","), "--fresh-masters", "review:k"}, &stdout, &stderr)
	var obj map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &obj); err != nil || obj["token"] != forged {
		t.Errorf("--json: %v %q; want the token exact", err, stdout.String())
	}
}
