//go:build unix

package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/localmaster"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/internal/test/proctest"
	"github.com/redlock-dev/redlock/proxy"
)

// TestMain lets the test binary act as the redlock command for tests that
// need it as a separate process (signals): REDLOCK_TEST_MAIN=1 runs main.
func TestMain(m *testing.M) {
	if os.Getenv("REDLOCK_TEST_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// runLock runs `redlock lock args...` in this process and returns its exit
// code and stderr. (The command's output and the log share the buffers,
// from different goroutines: they are locked.)
func runLock(args ...string) (int, string) {
	var stdout, stderr proctest.Buffer
	code := run(append([]string{"lock"}, args...), &stdout, &stderr)
	return code, stderr.String()
}

// masterClient reads and writes keys on every master directly.
type masterClient []*conn.Conn

func dialMasters(t *testing.T, set *localmaster.Set) masterClient {
	t.Helper()
	var mc masterClient
	for _, a := range set.Addrs() {
		c := conn.New(a, conn.Config{})
		t.Cleanup(func() { c.Close() })
		mc = append(mc, c)
	}
	return mc
}

// gone waits until no master has key, for at most within, and returns
// each master's last EXISTS. Through a proxy a release returns when a
// quorum confirmed it: the rest reach their masters just after.
func (mc masterClient) gone(t *testing.T, key string, within time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		v := mc.do(t, "EXISTS", key)
		if !slices.ContainsFunc(v, func(x string) bool { return x != "0" }) || time.Now().After(deadline) {
			return v
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// await runs args on every master until each answers want, for at most
// within, and returns each master's last answer. A lock is granted when a
// quorum confirmed it: the other masters' writes reach them just after.
func (mc masterClient) await(t *testing.T, within time.Duration, want string, args ...string) []string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		v := mc.do(t, args...)
		if !slices.ContainsFunc(v, func(x string) bool { return x != want }) || time.Now().After(deadline) {
			return v
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// do runs a command on every master and returns the replies' text ("" for
// nil or an unreachable master).
func (mc masterClient) do(t *testing.T, args ...string) []string {
	t.Helper()
	out := make([]string, len(mc))
	for i, c := range mc {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		r, err := c.Exec(ctx, args...)
		cancel()
		if err == nil {
			out[i] = r.Text()
		}
	}
	return out
}

// waitLines waits until path holds n whole lines and returns them.
func waitLines(t *testing.T, path string, n int, d time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil && bytes.Count(b, []byte("\n")) >= n {
			return string(b)
		}
		time.Sleep(10 * time.Millisecond)
	}
	b, _ := os.ReadFile(path)
	t.Fatalf("%s did not hold %d lines within %v: %q", path, n, d, b)
	return ""
}

// waitFile waits until path exists with content and returns it.
func waitFile(t *testing.T, path string, d time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 && bytes.HasSuffix(b, []byte("\n")) {
			return string(b)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s did not appear within %v", path, d)
	return ""
}

// TestLockRunsCommand: the command gets the key, token and fencing token,
// the lock is held on every master while it runs and released after, and
// its exit status is redlock lock's.
func TestLockRunsCommand(t *testing.T) {
	set := mastertest.Start(t, 3)
	mc := dialMasters(t, set)
	dir := t.TempDir()
	env, stop := filepath.Join(dir, "env"), filepath.Join(dir, "stop")
	script := fmt.Sprintf(`echo "$REDLOCK_KEY $REDLOCK_TOKEN $REDLOCK_FENCING_TOKEN" > %s; env | grep -c PASSWORD >> %[1]s; while [ ! -e %s ]; do sleep 0.01; done; exit 7`, env, stop)
	t.Setenv(envProxyPassword, "not-for-the-command") // secrets are not inherited
	type result struct {
		code   int
		stderr string
	}
	res := make(chan result, 1)
	go func() {
		// --master-timeout: a 2 s lock's default (20 ms) is missed by a
		// loaded host's masters, and the single try or an extension fails.
		code, stderr := runLock("--fresh-masters", "--masters", strings.Join(set.Addrs(), ","), "--master-timeout", "500ms", "--ttl", "2s", "job:1", "--", "sh", "-c", script)
		res <- result{code, stderr}
	}()
	// Whatever fails below, the command ends before the test does.
	t.Cleanup(func() { os.WriteFile(stop, nil, 0o600) })
	// Two lines: the variables, then the grep's count (waited for: a
	// fixed 50 ms once missed the second line on a busy machine).
	f := strings.Fields(waitLines(t, env, 2, 10*time.Second))
	if len(f) != 4 || f[3] != "0" {
		t.Fatalf("command environment %q: a PASSWORD variable was inherited", f)
	}
	if f[0] != "job:1" || !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(f[1]) {
		t.Fatalf("command environment: %q", f)
	}
	if n, err := strconv.ParseInt(f[2], 10, 64); err != nil || n <= 0 {
		t.Fatalf("REDLOCK_FENCING_TOKEN = %q", f[2])
	}
	for i, v := range mc.await(t, 5*time.Second, f[1], "GET", "job:1") {
		if v != f[1] {
			t.Fatalf("master %d holds %q, want the command's token %q", i, v, f[1])
		}
	}
	// Held for longer than its TTL: the watchdog extends it.
	time.Sleep(2500 * time.Millisecond)
	for i, v := range mc.do(t, "GET", "job:1") {
		if v != f[1] {
			t.Fatalf("after 1.25 TTLs master %d holds %q, want %q (not extended?)", i, v, f[1])
		}
	}
	// A second runner cannot take it: at once without --wait, after --wait with it.
	if code, stderr := runLock("--fresh-masters", "--masters", strings.Join(set.Addrs(), ","), "job:1", "--", "true"); code != exitNotAcquired || !strings.Contains(stderr, "job:1 is held") {
		t.Fatalf("second runner: exit %d, want %d; stderr:\n%s", code, exitNotAcquired, stderr)
	}
	start := time.Now()
	if code, stderr := runLock("--fresh-masters", "--masters", strings.Join(set.Addrs(), ","), "--wait", "300ms", "job:1", "--", "true"); code != exitNotAcquired || !strings.Contains(stderr, "not acquired within --wait 300ms") {
		t.Fatalf("second runner with --wait: exit %d, want %d; stderr:\n%s", code, exitNotAcquired, stderr)
	}
	if d := time.Since(start); d < 300*time.Millisecond || d > 3*time.Second {
		t.Fatalf("--wait 300ms returned after %v", d)
	}
	// A waiting runner gets it when the first one's command exits.
	waited := make(chan int, 1)
	go func() {
		code, _ := runLock("--fresh-masters", "--masters", strings.Join(set.Addrs(), ","), "--wait", "10s", "job:1", "--", "true")
		waited <- code
	}()
	time.Sleep(100 * time.Millisecond)
	os.WriteFile(stop, nil, 0o600)
	if r := <-res; r.code != 7 {
		t.Fatalf("exit code %d, want the command's 7; stderr:\n%s", r.code, r.stderr)
	}
	if code := <-waited; code != 0 {
		t.Fatalf("waiting runner: exit %d, want 0", code)
	}
	for i, v := range mc.do(t, "EXISTS", "job:1") {
		if v != "0" {
			t.Fatalf("master %d still has the key after both runners exited (EXISTS %s)", i, v)
		}
	}
	// Too few masters: 69 at once, and after a --wait (not "held").
	for _, m := range set.Masters()[1:] {
		if err := m.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	for _, wait := range []string{"0s", "400ms"} {
		if code, stderr := runLock("--fresh-masters", "--masters", strings.Join(set.Addrs(), ","), "--wait", wait, "job:2", "--", "true"); code != exitUnavailable {
			t.Fatalf("2 of 3 masters down, --wait %s: exit %d, want %d; stderr:\n%s", wait, code, exitUnavailable, stderr)
		}
	}
	for _, m := range set.Masters()[1:] {
		if err := m.Restart(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	// Status 0 and a command that cannot be found.
	if code, stderr := runLock("--fresh-masters", "--masters", strings.Join(set.Addrs(), ","), "job:1", "--", "true"); code != 0 {
		t.Fatalf("true: exit %d; stderr:\n%s", code, stderr)
	}
	if code, _ := runLock("--fresh-masters", "--masters", strings.Join(set.Addrs(), ","), "job:1", "--", "/nonexistent/cmd"); code != 127 {
		t.Fatalf("missing command: exit %d, want 127", code)
	}
	if v := mc.do(t, "EXISTS", "job:1"); v[0] != "0" {
		t.Fatalf("the lock outlived a command that could not start: %v", v)
	}
}

// TestLockUsage: bad invocations exit 2 and say why.
func TestLockUsage(t *testing.T) {
	set := mastertest.Start(t, 1)
	m := set.Addrs()[0]
	t.Setenv(envMasters, "")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--masters", m, "k"}, "want KEY -- COMMAND"},
		{[]string{"--masters", m, "k", "--"}, "want KEY -- COMMAND"},
		{[]string{"--masters", m, "--", "true"}, "redlock lock: KEY is missing\n"},
		{[]string{"--", "echo", "hi"}, "redlock lock: KEY is missing\n"},
		{[]string{"--ttl", "5s", "--", "echo", "hi"}, "redlock lock: KEY is missing\n"},
		{nil, "redlock lock: KEY is missing\n"},
		{[]string{"--masters", m, "a", "b", "--", "true"}, "unexpected arguments"},
		// The "--" is missing: say so, not "flags go before the arguments".
		{[]string{"--masters", m, "k", "true"}, `["true"] after KEY: the command goes after "--": redlock lock [flags] KEY -- COMMAND [ARG...]`},
		{[]string{"k", "--", "true"}, "--masters (or $REDLOCK_MASTERS) is required"},
		{[]string{"--masters", m, "--proxy", m, "k", "--", "true"}, "exclusive"},
		{[]string{"--masters", m, "--drift-factor", "1", "k", "--", "true"}, "--drift-factor must be in [0, 1)"},
		{[]string{"--masters", m, "--ttl", "0", "k", "--", "true"}, "--ttl must be a positive duration"},
		{[]string{"--masters", m, "--master-tls-cert", "x.pem", "k", "--", "true"}, "the client certificate and its key go together"},
		{[]string{"--masters", m, "--master-user", "u", "k", "--", "true"}, "--master-user needs a password"},
	} {
		code, stderr := runLock(tt.args...)
		if code != 2 || !strings.Contains(stderr, tt.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", tt.args, code, stderr, tt.want)
		}
	}
	// $REDLOCK_MASTERS stands in for --masters.
	t.Setenv(envMasters, m)
	if code, stderr := runLock("--fresh-masters", "k", "--", "true"); code != 0 {
		t.Fatalf("with $REDLOCK_MASTERS: exit %d; stderr:\n%s", code, stderr)
	}
}

// TestLockNoOverlap: runners contending for one key never run their
// commands at the same time (mkdir is the mutual-exclusion detector), and
// the fencing tokens they see, in the order they ran, strictly increase.
func TestLockNoOverlap(t *testing.T) {
	set := mastertest.Start(t, 3)
	dir := t.TempDir()
	log := filepath.Join(dir, "tokens")
	script := fmt.Sprintf(`mkdir %[1]s/held || exit 99; echo "$REDLOCK_FENCING_TOKEN" >> %[2]s; sleep 0.02; rmdir %[1]s/held`, dir, log)
	const runners, runs = 4, 5
	var wg sync.WaitGroup
	for range runners {
		wg.Go(func() {
			for range runs {
				code, stderr := runLock("--fresh-masters", "--masters", strings.Join(set.Addrs(), ","), "--wait", "30s", "--ttl", "2s", "shared", "--", "sh", "-c", script)
				if code != 0 {
					t.Errorf("exit %d (99: overlap); stderr:\n%s", code, stderr)
				}
			}
		})
	}
	wg.Wait()
	checkIncreasing(t, log, runners*runs)
}

// checkIncreasing checks that path holds want numbers, strictly increasing.
func checkIncreasing(t *testing.T, path string, want int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(b))
	if len(lines) != want {
		t.Fatalf("%d runs recorded a token, want %d: %q", len(lines), want, lines)
	}
	prev := int64(0)
	for i, l := range lines {
		n, err := strconv.ParseInt(l, 10, 64)
		if err != nil || n <= prev {
			t.Fatalf("fencing token %d is %q after %d: not strictly increasing (%q)", i, l, prev, lines)
		}
		prev = n
	}
}

// TestLockLost: when the lock is lost while the command runs (here its key
// is deleted on every master, so the next extension is refused), the
// command and what it started get SIGTERM — SIGKILL after --grace if they
// ignore it — and redlock lock exits with exitLost.
func TestLockLost(t *testing.T) {
	set := mastertest.Start(t, 3)
	mc := dialMasters(t, set)
	for _, tt := range []struct {
		name, trap string
		wantTerm   bool
	}{
		{"terminates", `trap "echo term > %[2]s; exit 0" TERM`, true},
		{"killed after grace", `trap "" TERM`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			ready, term, grand := filepath.Join(dir, "ready"), filepath.Join(dir, "term"), filepath.Join(dir, "grandchild")
			script := fmt.Sprintf(tt.trap+`; sleep 60 & echo $! > %[3]s; echo $$ > %[1]s; while :; do sleep 0.01; done`, ready, term, grand)
			res := make(chan [2]any, 1)
			go func() {
				// A per-master timeout for a loaded -race run (the default
				// for a 600ms TTL is 6ms; 80ms was missed by every master
				// under load, before the command was ready), still one
				// extension and its retry within the validity.
				code, stderr := runLock("--fresh-masters", "--masters", strings.Join(set.Addrs(), ","), "--ttl", "600ms", "--grace", "300ms",
					"--master-timeout", "150ms", "lost:"+tt.name, "--", "sh", "-c", script)
				res <- [2]any{code, stderr}
			}()
			pid := waitCommandReady(t, ready, res)
			mc.do(t, "DEL", "lost:"+tt.name)
			start := time.Now()
			var r [2]any
			select {
			case r = <-res:
			case <-time.After(5 * time.Second):
				t.Fatal("redlock lock did not end within 5s of the loss")
			}
			code, stderr := r[0].(int), r[1].(string)
			if code != exitLost || !strings.Contains(stderr, "lock lost") || !strings.Contains(stderr, "lost while the command ran") {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitLost, stderr)
			}
			// Extensions every 200ms: the loss is seen within one; then the grace.
			if d := time.Since(start); d > 1500*time.Millisecond {
				t.Fatalf("ended %v after the loss", d)
			}
			if tt.wantTerm {
				if b, _ := os.ReadFile(term); string(b) != "term\n" {
					t.Fatalf("the command's TERM trap did not run (%q)", b)
				}
			} else if !strings.Contains(stderr, "SIGKILL") {
				t.Fatalf("no SIGKILL after --grace; stderr:\n%s", stderr)
			}
			if err := syscall.Kill(pid, 0); err == nil {
				t.Fatalf("the command (pid %d) is still running", pid)
			}
			gpid, _ := strconv.Atoi(strings.TrimSpace(waitFile(t, grand, time.Second)))
			deadline := time.Now().Add(2 * time.Second)
			for syscall.Kill(gpid, 0) == nil && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond) // reaped by init
			}
			if syscall.Kill(gpid, 0) == nil {
				t.Fatalf("the command's own child (pid %d) outlived the loss", gpid)
			}
		})
	}
}

// TestLockForwardsSignals: signals sent to redlock lock reach the command;
// the command's status is redlock lock's, and the lock is released.
func TestLockForwardsSignals(t *testing.T) {
	set := mastertest.Start(t, 3)
	mc := dialMasters(t, set)
	dir := t.TempDir()
	ready, got := filepath.Join(dir, "ready"), filepath.Join(dir, "got")
	script := fmt.Sprintf(`trap "echo usr1 >> %[2]s" USR1; trap "echo hup >> %[2]s" HUP; trap "echo term >> %[2]s; exit 3" TERM; echo ready > %[1]s; while :; do sleep 0.01; done`, ready, got)
	cmd := exec.Command(os.Args[0], "lock", "--fresh-masters", "--masters", strings.Join(set.Addrs(), ","), "sig", "--", "sh", "-c", script)
	cmd.Env = append(os.Environ(), "REDLOCK_TEST_MAIN=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	waitFile(t, ready, 10*time.Second)
	for _, s := range []syscall.Signal{syscall.SIGUSR1, syscall.SIGHUP} {
		if err := cmd.Process.Signal(s); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond) // the trap runs between sleeps
	}
	if b, _ := os.ReadFile(got); string(b) != "usr1\nhup\n" {
		t.Fatalf("the command saw %q, want usr1 then hup", b)
	}
	if v := mc.await(t, 5*time.Second, "1", "EXISTS", "sig"); v[0] != "1" {
		t.Fatalf("lock not held after forwarded signals: %v", v)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	if cmd.ProcessState.ExitCode() != 3 {
		t.Fatalf("exit %v, want the command's 3; stderr:\n%s", err, stderr.String())
	}
	if b, _ := os.ReadFile(got); !strings.HasSuffix(string(b), "term\n") {
		t.Fatalf("the command did not get SIGTERM: %q", b)
	}
	for i, v := range mc.do(t, "EXISTS", "sig") {
		if v != "0" {
			t.Fatalf("master %d kept the lock after redlock lock exited", i)
		}
	}
}

// TestLockInterruptedWaiting: a redlock lock waiting for a held key exits
// with 128 + the signal that interrupted it (130 for SIGINT, 143 for
// SIGTERM), without running the command.
func TestLockInterruptedWaiting(t *testing.T) {
	set := mastertest.Start(t, 3)
	mc := dialMasters(t, set)
	mc.do(t, "SET", "waited", "someone", "PX", "30000")
	ran := filepath.Join(t.TempDir(), "ran")
	for _, tt := range []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGINT, 130}, {syscall.SIGTERM, 143}} {
		cmd := exec.Command(os.Args[0], "lock", "--fresh-masters", "--masters", strings.Join(set.Addrs(), ","), "--wait", "20s", "-v", "waited", "--", "touch", ran)
		cmd.Env = append(os.Environ(), "REDLOCK_TEST_MAIN=1")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond) // waiting by now
		cmd.Process.Signal(tt.sig)
		cmd.Wait()
		if got := cmd.ProcessState.ExitCode(); got != tt.code || !strings.Contains(stderr.String(), "interrupted while waiting") {
			t.Fatalf("%v while waiting: exit %d, want %d; stderr:\n%s", tt.sig, got, tt.code, stderr.String())
		}
	}
	if _, err := os.Stat(ran); err == nil {
		t.Fatal("the command ran")
	}
}

// TestLockFencingAcrossRestarts: the fencing tokens successive commands see
// strictly increase while masters are killed (-9) or stopped and restarted
// empty between the runs — two at a time (restart quarantine keeps them
// from voting at once), and once all five.
func TestLockFencingAcrossRestarts(t *testing.T) {
	set := mastertest.Start(t, 5)
	mastertest.RequireReal(t, set)
	log := filepath.Join(t.TempDir(), "tokens")
	args := []string{"--fresh-masters", "--masters", strings.Join(set.Addrs(), ","), "--quarantine-for", "1s", "--wait", "10s", "fenced", "--",
		"sh", "-c", `echo "$REDLOCK_FENCING_TOKEN" >> ` + log}
	ms := set.Masters()
	runs := 0
	lock := func() {
		t.Helper()
		if code, stderr := runLock(args...); code != 0 {
			t.Fatalf("run %d: exit %d; stderr:\n%s", runs, code, stderr)
		}
		runs++
	}
	lock()
	for i := range 5 {
		for _, m := range []*localmaster.Master{ms[i], ms[(i+1)%5]} {
			if i%2 == 0 {
				if err := m.Kill(); err != nil {
					t.Fatal(err)
				}
			}
			if err := m.Restart(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		lock()
	}
	for _, m := range ms {
		if err := m.Restart(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(2100 * time.Millisecond) // quarantine (uptime has 1s steps)
	lock()
	lock()
	checkIncreasing(t, log, runs)
}

// serveProxy serves an in-process proxy with cfg on a loopback port until
// t ends, and returns its address.
func serveProxy(t *testing.T, cfg proxy.Config) string {
	t.Helper()
	srv, err := proxy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	// Every master connected before the first client command: the first
	// dial and handshake (its scripts loaded) must not race a short lock's
	// per-master timeout (9 ms for 900 ms) on a loaded host.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := srv.Engine().WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return ln.Addr().String()
}

// TestLockThroughProxy: --proxy takes the lock with REDLOCK.LOCK (a fencing
// token), extends and releases it through the proxy, and signals a loss.
func TestLockThroughProxy(t *testing.T) {
	set := mastertest.Start(t, 3)
	mc := dialMasters(t, set)
	// A per-master timeout far above the default's 9 ms for a 900 ms TTL:
	// on a busy machine under -race the extensions through the proxy
	// timed out and the command was ended as lost (issue #43).
	addr := serveProxy(t, proxy.Config{EngineConfig: engine.Config{FreshMasters: true, Addrs: set.Addrs(), MasterTimeout: 150 * time.Millisecond}, RequirePass: "s3cret"})
	t.Setenv(envProxyPassword, "s3cret")
	dir := t.TempDir()
	env := filepath.Join(dir, "env")
	code, stderr := runLock("--proxy", addr, "--ttl", "900ms", "p:1", "--", "sh", "-c",
		`sleep 1.5; echo "$REDLOCK_TOKEN $REDLOCK_FENCING_TOKEN" > `+env+`; exit 5`)
	if code != 5 {
		t.Fatalf("exit %d, want 5; stderr:\n%s", code, stderr)
	}
	f := strings.Fields(waitFile(t, env, time.Second))
	if n, err := strconv.ParseInt(f[1], 10, 64); err != nil || n <= 0 || len(f[0]) != 40 {
		t.Fatalf("command environment %q", f)
	}
	if v := mc.gone(t, "p:1", 5*time.Second); strings.Join(v, "") != "000" {
		t.Fatalf("not released: %v", v)
	}
	// A large drift factor leaves about 1.2 s of validity per 6 s grant:
	// the lock is extended within it, not every third of the TTL (2 s).
	// (A 2 s TTL's 398 ms was lost 2 times in 20 on a busy machine.)
	if code, stderr := runLock("--proxy", addr, "--ttl", "6s", "--drift-factor", "0.8", "p:1", "--", "sleep", "1.5"); code != 0 {
		t.Fatalf("--drift-factor 0.8: exit %d, want 0; stderr:\n%s", code, stderr)
	}
	// Held by another: refused at once, and after --wait.
	other, err := conn.Dial(t.Context(), addr, conn.Config{Password: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if r, err := other.Exec(t.Context(), "SET", "p:2", "other", "NX", "PX", "1000"); err != nil || !r.IsOK() {
		t.Fatalf("SET through the proxy: %v %v", r, err)
	}
	if code, stderr := runLock("--proxy", addr, "p:2", "--", "true"); code != exitNotAcquired {
		t.Fatalf("held key: exit %d; stderr:\n%s", code, stderr)
	}
	start := time.Now()
	if code, stderr := runLock("--proxy", addr, "--wait", "5s", "p:2", "--", "true"); code != 0 || time.Since(start) < 500*time.Millisecond {
		t.Fatalf("waiting for an expiring key: exit %d after %v; stderr:\n%s", code, time.Since(start), stderr)
	}
	// Loss: the key disappears from the masters.
	ready := filepath.Join(dir, "ready")
	res := make(chan int, 1)
	go func() {
		code, _ := runLock("--proxy", addr, "--ttl", "600ms", "--grace", "200ms", "p:3", "--", "sh", "-c", `echo x > `+ready+`; while :; do sleep 0.01; done`)
		res <- code
	}()
	waitFile(t, ready, 10*time.Second)
	mc.do(t, "DEL", "p:3")
	select {
	case code := <-res:
		if code != exitLost {
			t.Fatalf("loss through the proxy: exit %d, want %d", code, exitLost)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("loss through the proxy not signalled within 5s")
	}
	// A wrong password is a configuration error naming the proxy's answer
	// and where the password comes from.
	t.Setenv(envProxyPassword, "wrong")
	if code, stderr := runLock("--proxy", addr, "p:4", "--", "true"); code != exitConfig || !strings.Contains(stderr, "WRONGPASS") || !strings.Contains(stderr, "--proxy-password") {
		t.Fatalf("wrong proxy password: exit %d; stderr:\n%s", code, stderr)
	}
}

// TestProxyLockValidity: a lock taken through a proxy is valid for its TTL
// minus the drift allowance, and the allowance is read from the proxy's
// INFO.
func TestProxyLockValidity(t *testing.T) {
	sent := time.Unix(1000, 0)
	for _, tt := range []struct {
		factor float64
		min    time.Duration
		want   time.Duration
	}{
		{engine.DefaultDriftFactor, engine.DefaultDriftMin, 10*time.Second - 100*time.Millisecond - engine.DefaultDriftMin},
		{0.2, 5 * time.Millisecond, 8*time.Second - 5*time.Millisecond},
	} {
		l := &proxyLock{driftFactor: tt.factor, driftMin: tt.min}
		if got := l.validUntil(sent, 10*time.Second).Sub(sent); got != tt.want {
			t.Errorf("drift factor %v: valid for %v, want %v", tt.factor, got, tt.want)
		}
	}
	for _, tt := range []struct {
		info         string
		factor       float64
		min          time.Duration
		haveF, haveM bool
	}{
		{"# Proxy\r\nquorum:3\r\ndrift_factor:0.25\r\ndrift_min_us:2000\r\n", 0.25, 2 * time.Millisecond, true, true},
		{"# Proxy\r\nquorum:3\r\n", 0, 0, false, false},                                     // an older proxy
		{"drift_factor:1.5\r\ndrift_min_us:2000\r\n", 0, 2 * time.Millisecond, false, true}, // not a factor
		{"drift_factor:x\r\ndrift_min_us:-1\r\n", 0, 0, false, false},
		{"drift_factor:0.3\r\n", 0.3, 0, true, false},
	} {
		f, m, haveF, haveM := proxyDrift(tt.info)
		if haveF != tt.haveF || haveM != tt.haveM || (haveF && f != tt.factor) || (haveM && m != tt.min) {
			t.Errorf("proxyDrift(%q) = %v, %v, %v, %v", tt.info, f, m, haveF, haveM)
		}
	}
}

// TestLockProxyDrift: through a proxy whose drift factor is 0.8, redlock
// lock counts the proxy's allowance (read from its INFO), not its own
// default: with every master stopped, the lock is declared lost when the
// proxy's validity (178 ms of a 900 ms TTL) runs out, not the default's
// (889 ms).
func TestLockProxyDrift(t *testing.T) {
	set := mastertest.Start(t, 3)
	mastertest.RequireReal(t, set)
	addr := serveProxy(t, proxy.Config{EngineConfig: engine.Config{FreshMasters: true, Addrs: set.Addrs(), DriftFactor: 0.8, MasterTimeout: 50 * time.Millisecond}})
	t.Setenv(envProxyPassword, "")
	ready := filepath.Join(t.TempDir(), "ready")
	done := make(chan int, 1)
	go func() {
		code, _ := runLock("--proxy", addr, "--ttl", "900ms", "--grace", "100ms", "dr:1", "--", "sh", "-c",
			"echo x > "+ready+"; exec sleep 30")
		done <- code
	}()
	waitFile(t, ready, 10*time.Second)
	time.Sleep(300 * time.Millisecond) // past the first extensions
	paused := time.Now()
	for _, m := range set.Masters() {
		if err := m.Pause(); err != nil {
			t.Fatal(err)
		}
		defer m.Resume()
	}
	select {
	case code := <-done:
		d := time.Since(paused)
		if code != exitLost || d > 550*time.Millisecond {
			t.Fatalf("exit %d %v after the masters stopped; want %d within the proxy's 178 ms validity (+ margin)", code, d, exitLost)
		}
		t.Logf("lost %v after the masters stopped", d)
	case <-time.After(5 * time.Second):
		t.Fatal("no loss within 5s of every master stopping")
	}
}

// TestLockFirstContactQuarantine: every `redlock lock` run is a fresh
// process that never met the masters. Masters younger than --max-ttl may
// have restarted empty and lost a lock another run still holds, so they do
// not vote: exit 69 (unavailable) until they are old enough, then the lock
// is taken. Before, a fresh process trusted them at once.
func TestLockFirstContactQuarantine(t *testing.T) {
	set := mastertest.Start(t, 5)
	mastertest.RequireReal(t, set)
	start := time.Now()
	args := []string{"--masters", strings.Join(set.Addrs(), ","), "--max-ttl", "2s", "--ttl", "2s", "fc:job", "--", "true"}
	code, stderr := runLock(args...)
	if code != exitUnavailable {
		t.Fatalf("masters younger than --max-ttl: exit %d; stderr:\n%s\nwant %d", code, stderr, exitUnavailable)
	}
	// It says at start when the masters vote, and in the error too, with
	// the flag that declares fresh masters (never a Config field).
	for _, want := range []string{
		"masters in restart quarantine (they may have lost locks): locks are refused until a quorum of them votes", "votes_at=",
		"5/5 masters answered: 0 granted, 0 held, 5 in restart quarantine (quorum 3)", "a quorum votes from ",
		"if they were started empty and have never served locks, declare them fresh (--fresh-masters)",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("masters younger than --max-ttl: stderr does not say %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "Config.") || strings.Contains(stderr, "quorum lost") {
		t.Errorf("stderr names a library field, or a quorum lost that it never had:\n%s", stderr)
	}
	// Waiting (--wait) shorter than the quarantine: said at once (issue
	// #42), not after the wait, and not a bare "context deadline exceeded".
	wargs := []string{"--wait", "1s", "--masters", strings.Join(set.Addrs(), ","), "--max-ttl", "30s", "--ttl", "2s", "fc:job", "--", "true"}
	wstart := time.Now()
	if code, stderr := runLock(wargs...); code != exitUnavailable || !strings.Contains(stderr, "in restart quarantine") ||
		!strings.Contains(stderr, "after --wait 1s ends: the wait cannot succeed") || strings.Contains(stderr, "deadline exceeded") || time.Since(wstart) > 900*time.Millisecond {
		t.Errorf("--wait 1s in the quarantine: exit %d after %v; stderr:\n%s", code, time.Since(wstart), stderr)
	}
	time.Sleep(time.Until(start.Add(3200 * time.Millisecond))) // older than 2s, as Redis rounds uptime
	if code, stderr := runLock(args...); code != 0 {
		t.Fatalf("masters older than --max-ttl: exit %d; stderr:\n%s", code, stderr)
	}
}

// TestLockKeptWhileValid: 3 of 5 masters stop 0.5s into a 2s lock. One
// unanswered extension does not end it (issue #22 item 9): the command
// gets SIGTERM only when less than --grace of validity is left — and,
// when it ignores SIGTERM, SIGKILL when the validity ends, not --grace
// later: another runner can take the lock then (review of issue #22: a
// 10s grace let the command run 10s past the validity).
func TestLockKeptWhileValid(t *testing.T) {
	set := mastertest.Start(t, 5)
	mastertest.RequireReal(t, set)
	for _, tt := range []struct {
		name, trap, grace string
		minTerm, maxEnd   time.Duration
	}{
		// Validity 2s − drift (22ms) after the last granted extension,
		// which may be the acquisition itself (before started).
		{"terminates", `trap "echo term > %[2]s; exit 0" TERM`, "300ms", 1400 * time.Millisecond, 2500 * time.Millisecond},
		{"killed at validity end", `trap "echo term > %[2]s" TERM`, "10s", 0, 3 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Cleanup(func() {
				for _, m := range set.Masters() {
					m.Resume()
				}
			})
			dir := t.TempDir()
			ready, term := filepath.Join(dir, "ready"), filepath.Join(dir, "term")
			script := fmt.Sprintf(tt.trap+`; echo $$ > %[1]s; while :; do sleep 0.01; done`, ready, term)
			res := make(chan [2]any, 1)
			go func() {
				// The running masters answer within 200 ms on a loaded host
				// (50 ms was missed by all five, the acquisition failed);
				// the stopped ones never answer, whatever the timeout.
				code, stderr := runLock("--fresh-masters", "--masters", strings.Join(set.Addrs(), ","), "--ttl", "2s", "--grace", tt.grace,
					"--master-timeout", "200ms", "kept:"+tt.name, "--", "sh", "-c", script)
				res <- [2]any{code, stderr}
			}()
			pid := waitCommandReady(t, ready, res)
			started := time.Now() // the lock was taken before the command started
			time.Sleep(500 * time.Millisecond)
			for _, m := range set.Masters()[:3] {
				if err := m.Pause(); err != nil {
					t.Fatal(err)
				}
			}
			var r [2]any
			select {
			case r = <-res:
			case <-time.After(15 * time.Second):
				t.Fatal("redlock lock did not end with 3 of 5 masters stopped")
			}
			ended := time.Since(started)
			code, stderr := r[0].(int), r[1].(string)
			if code != exitLost || !strings.Contains(stderr, "too few masters answered its extensions") {
				t.Fatalf("exit %d, want %d naming the unanswered extensions; stderr:\n%s", code, exitLost, stderr)
			}
			if b, _ := os.ReadFile(term); string(b) != "term\n" {
				t.Fatalf("the command got no SIGTERM (%q); stderr:\n%s", b, stderr)
			}
			if ended < tt.minTerm {
				t.Fatalf("the command was terminated %v after the lock was taken, with more than --grace of validity left (2s TTL)", ended)
			}
			// The validity ends at most 2s after started (the last granted
			// extension); the rest is a loaded machine's latency.
			if ended > tt.maxEnd {
				t.Fatalf("redlock lock ended %v after the lock was taken: the command ran past the 2s validity; stderr:\n%s", ended, stderr)
			}
			if err := syscall.Kill(pid, 0); err == nil {
				t.Fatalf("the command (pid %d) is still running", pid)
			}
		})
	}
}

// TestLockTTLOverCap: a --ttl over --max-ttl is a usage error (exit 2)
// that names the flag to raise and what raising it costs, before any
// master is asked; it was exit 1 with the engine's error naming a
// library field (issue #31 item 2).
func TestLockTTLOverCap(t *testing.T) {
	code, stderr := runLock("--masters", "127.0.0.1:1,127.0.0.1:2,127.0.0.1:3", "--ttl", "5m", "job", "--", "true")
	if code != 2 || !strings.Contains(stderr, "--max-ttl") || !strings.Contains(stderr, "restart quarantine") || strings.Contains(stderr, "Config.") {
		t.Fatalf("--ttl 5m with the default --max-ttl: exit %d, stderr:\n%s\nwant exit 2 naming --max-ttl and its cost", code, stderr)
	}
}

// TestLockStartMessages: an even number of masters is warned about (with
// the right plural), and masters that refuse the password end with the
// credentials named — not "start anyway", not "0/3 masters reachable",
// and no "quorum lost" for a quorum never had.
func TestLockStartMessages(t *testing.T) {
	set := mastertest.Start(t, 4)
	code, stderr := runLock("--masters", strings.Join(set.Addrs(), ","), "--fresh-masters", "even", "--", "true")
	if code != 0 || !strings.Contains(stderr, "4 masters tolerate 1 failed master, no more than 3 would") {
		t.Errorf("4 masters: exit %d; stderr:\n%s\nwant 0 and the even-count warning", code, stderr)
	}
	sec := mastertest.StartWith(t, localmaster.Options{N: 3, Password: "right"})
	for _, pw := range []string{"", "wrong"} {
		args := []string{"--masters", strings.Join(sec.Addrs(), ","), "--fresh-masters", "pw", "--", "true"}
		if pw != "" {
			args = append([]string{"--master-password", pw}, args...)
		}
		code, stderr := runLock(args...)
		if code != exitConfig || !strings.Contains(stderr, "refused the credentials") || !strings.Contains(stderr, "--master-password") ||
			strings.Contains(stderr, "quorum lost") || strings.Contains(stderr, "masters reachable") || strings.Contains(stderr, "--wait-masters") {
			t.Errorf("password %q: exit %d; stderr:\n%s\nwant %d (EX_CONFIG) naming the credentials and --master-password", pw, code, stderr, exitConfig)
		}
	}
}

// TestLockProxyTTLOverCap: a --ttl over the proxy's --max-ttl is a usage
// error (exit 2) naming the proxy's flag, at once — not "unavailable"
// (69) after retries.
func TestLockProxyTTLOverCap(t *testing.T) {
	set := mastertest.Start(t, 3)
	addr := serveProxy(t, proxy.Config{EngineConfig: engine.Config{FreshMasters: true, Addrs: set.Addrs(), MaxTTL: time.Second}})
	start := time.Now()
	code, stderr := runLock("--proxy", addr, "--ttl", "2s", "--wait", "5s", "cap", "--", "true")
	if code != 2 || time.Since(start) > 2*time.Second || !strings.Contains(stderr, "raise --max-ttl to at least 2s") || strings.Contains(stderr, "Config.") {
		t.Fatalf("--ttl 2s through a proxy with --max-ttl 1s: exit %d after %v; stderr:\n%s", code, time.Since(start), stderr)
	}
}

// TestLockShell: --shell runs the command's words, joined, through sh -c:
// a pipe, a redirection and the lock's environment in one argument.
func TestLockShell(t *testing.T) {
	set := mastertest.Start(t, 3)
	out := filepath.Join(t.TempDir(), "out")
	code, stderr := runLock("--masters", strings.Join(set.Addrs(), ","), "--fresh-masters", "--shell", "sh:k", "--",
		`echo "$REDLOCK_KEY $REDLOCK_FENCING_TOKEN" | tr a-z A-Z >`, out)
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	f := strings.Fields(waitFile(t, out, time.Second))
	if len(f) != 2 || f[0] != "SH:K" {
		t.Fatalf("--shell command wrote %q; want the key upper-cased by the pipe, and the fencing token", f)
	}
	if n, err := strconv.ParseInt(f[1], 10, 64); err != nil || n <= 0 {
		t.Fatalf("fencing token %q", f[1])
	}
}

// TestLockHolders: with -n 2 two commands hold KEY at once, each on a
// permit of its own (REDLOCK_PERMIT_KEY) with its own fencing token; a
// third is refused (exit 75) while they run and takes a permit once one
// ended. -n out of range, or with --proxy, is a usage error.
func TestLockHolders(t *testing.T) {
	set := mastertest.Start(t, 3)
	dir := t.TempDir()
	masters := strings.Join(set.Addrs(), ",")
	type result struct {
		code   int
		stderr string
	}
	done := make(chan result, 2)
	release := filepath.Join(dir, "release")
	for i := range 2 {
		out := filepath.Join(dir, fmt.Sprint("holder", i))
		go func() {
			code, stderr := runLock("--masters", masters, "--fresh-masters", "-n", "2", "sem", "--", "sh", "-c",
				`echo "$REDLOCK_PERMIT_KEY $REDLOCK_FENCING_TOKEN" > `+out+`; while [ ! -e `+release+` ]; do sleep 0.05; done`)
			done <- result{code, stderr}
		}()
	}
	var permits, tokens []string
	for i := range 2 {
		f := strings.Fields(waitFile(t, filepath.Join(dir, fmt.Sprint("holder", i)), 10*time.Second))
		if len(f) != 2 {
			t.Fatalf("holder %d wrote %q; want its permit key and fencing token", i, f)
		}
		permits, tokens = append(permits, f[0]), append(tokens, f[1])
	}
	slices.Sort(permits)
	if permits[0] != "sem:permit:0" || permits[1] != "sem:permit:1" || tokens[0] == tokens[1] {
		t.Fatalf("two holders: permits %q, fencing tokens %q; want permits 0 and 1, distinct tokens", permits, tokens)
	}
	if code, stderr := runLock("--masters", masters, "--fresh-masters", "-n", "2", "sem", "--", "true"); code != 75 {
		t.Fatalf("a third holder while two hold: exit %d; want 75\n%s", code, stderr)
	}
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if r := <-done; r.code != 0 {
			t.Fatalf("holder exit %d\n%s", r.code, r.stderr)
		}
	}
	if code, stderr := runLock("--masters", masters, "--fresh-masters", "-n", "2", "sem", "--", "true"); code != 0 {
		t.Fatalf("after the holders ended: exit %d; want 0\n%s", code, stderr)
	}
	for _, args := range [][]string{
		{"--masters", masters, "-n", "0", "k", "--", "true"},
		{"--masters", masters, "-n", "65", "k", "--", "true"},
		{"--proxy", "127.0.0.1:1", "-n", "2", "k", "--", "true"},
	} {
		if code, stderr := runLock(args...); code != 2 {
			t.Errorf("%q: exit %d; want 2 (usage)\n%s", args, code, stderr)
		}
	}
}

// TestLockHoldersWaitUnavailable: with two of three masters stalled
// (CLIENT PAUSE WRITE: connected, no answers), --wait running out reads
// as unavailable (69) with -n as without it — not "held" (75): ctx ending
// in the middle of a semaphore's try keeps what the permits said (found by
// review).
func TestLockHoldersWaitUnavailable(t *testing.T) {
	set := mastertest.Start(t, 3)
	mastertest.RequireReal(t, set)
	masters := strings.Join(set.Addrs(), ",")
	// Masters 0 and 1 accept connections (the handshake passes) but hold
	// every script: each acquisition round waits a per-master timeout.
	mc := dialMasters(t, set)[:2]
	t.Log(mc.do(t, "CLIENT", "PAUSE", "60000", "WRITE"))
	defer mc.do(t, "CLIENT", "UNPAUSE")
	for _, n := range []string{"1", "4"} {
		for i := range 2 {
			start := time.Now()
			code, stderr := runLock("--masters", masters, "--fresh-masters", "--wait", "700ms", "-n", n, "wu", "--", "true")
			t.Logf("-n %s try %d: exit %d after %v: %s", n, i, code, time.Since(start).Round(time.Millisecond), strings.TrimSpace(stderr))
			if code != exitUnavailable {
				t.Errorf("-n %s: exit %d with 2 of 3 masters stalled (CLIENT PAUSE WRITE); want %d (unavailable), as the plain lock", n, code, exitUnavailable)
			}
		}
	}
}

// TestLockLeader: redlock lock --leader campaigns (waiting while another
// leads), runs the command with REDLOCK_TERM, proclaims --value (read by
// Election.Leader), and the next leader's term is higher; a second
// campaigner with --wait running out exits 75; the flags it excludes are
// usage errors.
func TestLockLeader(t *testing.T) {
	set := mastertest.Start(t, 3)
	dir := t.TempDir()
	masters := strings.Join(set.Addrs(), ",")
	release := filepath.Join(dir, "release")
	type result struct {
		code   int
		stderr string
	}
	done := make(chan result, 2)
	leader := func(i int) {
		out := filepath.Join(dir, fmt.Sprint("leader", i))
		go func() {
			code, stderr := runLock("--masters", masters, "--fresh-masters", "--master-timeout", "500ms", "--leader", "--value", fmt.Sprint("node-", i), "--ttl", "2s", "sched", "--", "sh", "-c",
				`echo "$REDLOCK_TERM $REDLOCK_FENCING_TOKEN" > `+out+`; while [ ! -e `+release+fmt.Sprint(i)+` ]; do sleep 0.05; done`)
			done <- result{code, stderr}
		}()
	}
	leader(0)
	f := strings.Fields(waitFile(t, filepath.Join(dir, "leader0"), 10*time.Second))
	if len(f) != 2 || f[0] != f[1] || f[0] == "" {
		t.Fatalf("the leader's command got %q; want REDLOCK_TERM equal to REDLOCK_FENCING_TOKEN", f)
	}
	term0, _ := strconv.ParseInt(f[0], 10, 64)
	e, err := engine.New(engine.Config{Addrs: set.Addrs(), FreshMasters: true, MasterTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	el, err := e.NewElection("sched", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l, err := el.Leader(ctx); err != nil || l.Value != "node-0" || l.Term != term0 {
		t.Fatalf("Leader = %+v, %v; want node-0 with term %d", l, err, term0)
	}
	if code, stderr := runLock("--masters", masters, "--fresh-masters", "--leader", "--wait", "300ms", "sched", "--", "true"); code != 75 {
		t.Fatalf("a campaign with --wait 300ms while another leads: exit %d; want 75\n%s", code, stderr)
	}
	leader(1) // waits: no --wait bound
	time.Sleep(300 * time.Millisecond)
	if _, err := os.Stat(filepath.Join(dir, "leader1")); err == nil {
		t.Fatal("a second leader ran while the first leads")
	}
	os.WriteFile(release+"0", nil, 0o600)
	if r := <-done; r.code != 0 {
		t.Fatalf("first leader: exit %d\n%s", r.code, r.stderr)
	}
	f = strings.Fields(waitFile(t, filepath.Join(dir, "leader1"), 10*time.Second))
	if term1, _ := strconv.ParseInt(f[0], 10, 64); term1 <= term0 {
		t.Fatalf("the second leader's term %d is not above the first's %d", term1, term0)
	}
	os.WriteFile(release+"1", nil, 0o600)
	if r := <-done; r.code != 0 {
		t.Fatalf("second leader: exit %d\n%s", r.code, r.stderr)
	}
	for _, args := range [][]string{
		{"--masters", masters, "--leader", "-n", "2", "k", "--", "true"},
		{"--proxy", "127.0.0.1:1", "--leader", "k", "--", "true"},
		{"--masters", masters, "--leader", "--max-hold", "1m", "k", "--", "true"},
		{"--masters", masters, "--value", "v", "k", "--", "true"},
	} {
		if code, stderr := runLock(args...); code != 2 {
			t.Errorf("%q: exit %d; want 2 (usage)\n%s", args, code, stderr)
		}
	}
}

// waitCommandReady waits for the pid a `redlock lock` command writes to
// ready once it runs, and fails t at once if redlock lock ended first
// (res: its exit code and stderr), instead of when the wait runs out.
func waitCommandReady(t *testing.T, ready string, res <-chan [2]any) int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil || time.Now().After(deadline) {
			break
		}
		select {
		case r := <-res:
			t.Fatalf("redlock lock ended before the command was ready: exit %v; stderr:\n%s", r[0], r[1])
		default:
		}
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(waitFile(t, ready, 10*time.Second)))
	return pid
}
