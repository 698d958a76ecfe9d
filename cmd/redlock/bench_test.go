//go:build unix

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/redlock-dev/redlock/bench"
	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/internal/test/proctest"
	"github.com/redlock-dev/redlock/proxy"
)

func TestBenchFlagValidation(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // substring of stderr
	}{
		{"unknown flag", []string{"--bogus"}, "flag provided but not defined: -bogus"},
		{"bad duration", []string{"--duration", "ten"}, `invalid value "ten" for flag -duration`},
		{"negative duration", []string{"--duration", "-1s"}, `invalid value "-1s" for flag -duration: must not be negative`},
		{"negative concurrency", []string{"--concurrency", "-3"}, "--concurrency must be positive, got -3"},
		{"zero concurrency", []string{"--concurrency", "0"}, "--concurrency must be positive, got 0"},
		{"zero duration", []string{"--duration", "0"}, "--duration must be a positive duration"},
		{"zero ttl", []string{"--ttl", "0"}, "--ttl must be a positive duration"},
		{"ttl without unit", []string{"--ttl", "30"}, `invalid value "30" for flag -ttl: want a duration with a unit, like 30s`},
		{"zero keys", []string{"--keys", "0"}, "--keys must be positive, got 0"},
		{"zero masters", []string{"--n", "0"}, "--n must be positive, got 0"},
		{"masters port not a number", []string{"--masters", "127.0.0.1:abc"}, `--masters: "127.0.0.1:abc": port must be a number`},
		{"masters bare port", []string{"--masters", "7601"}, `--masters: "7601" is not host:port`},
		{"masters same server", []string{"--masters", "localhost:7601,127.0.0.1:7601,127.0.0.1:7602"}, "are the same server (127.0.0.1:7601)"},
		{"masters listed twice", []string{"--masters", "127.0.0.1:7601,127.0.0.1:7601,127.0.0.1:7602"}, "127.0.0.1:7601 is listed twice"},
		{"proxy address", []string{"--target", "proxy", "--proxy", "nope"}, `--proxy: "nope" is not host:port`},
		{"bad workload", []string{"--workload", "burst"}, `unknown workload "burst" (known: cycle, acquire, contended, reentrant, rw, semaphore)`},
		{"bad target", []string{"--target", "etcd"}, `unknown target "etcd"`},
		{"proxy without address", []string{"--target", "proxy"}, "needs a proxy address"},
		{"bad peer", []string{"--compare", "bsm"}, `unknown peer "bsm"`},
		{"bad rate", []string{"--rate", "-1"}, "rate must be"},
		{"rate not a number", []string{"--rate", "fast"}, `invalid value "fast" for flag -rate`},
		{"bad ttl", []string{"--ttl", "1us"}, "ttl must be at least 1ms"},
		{"hold too long", []string{"--hold", "2s", "--ttl", "1s"}, "shorter than the ttl"},
		{"bad sweep", []string{"--sweep", "keys=1,2"}, `unknown sweep variable "keys"`},
		{"bad sweep value", []string{"--sweep", "concurrency=1,x"}, `bad value "x"`},
		{"sweep without values", []string{"--sweep", "masters"}, "want var=v1,v2"},
		{"sweep masters with masters", []string{"--sweep", "masters=3,5", "--masters", "127.0.0.1:1"}, "do not give masters"},
		{"empty masters", []string{"--masters", " , "}, "no address given"},
		{"extra argument", []string{"now"}, `unexpected arguments: ["now"]`},
		{"too many masters", []string{"--n", "100"}, "masters must be 1..64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"bench"}, tt.args...), &stdout, &stderr)
			if code != 2 {
				t.Fatalf("exit code %d, want 2; stderr:\n%s", code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.want) {
				t.Fatalf("stderr lacks %q:\n%s", tt.want, stderr.String())
			}
			if stdout.Len() != 0 {
				t.Fatalf("stdout not empty: %q", stdout.String())
			}
			// One message, one prefix: no usage dump, no "bench: bench:".
			if n := strings.Count(stderr.String(), tt.want); n != 1 || strings.Contains(stderr.String(), "bench: bench") {
				t.Fatalf("the message appears %d times or stutters:\n%s", n, stderr.String())
			}
		})
	}
}

func TestBenchHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"bench", "-h"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	if stderr.Len() != 0 || !strings.HasPrefix(stdout.String(), "redlock bench: measure lock throughput") ||
		!strings.Contains(stdout.String(), "Examples:\n  redlock bench\n") {
		t.Fatalf("help: stdout %q, stderr %q; want a description and examples on stdout", stdout.String(), stderr.String())
	}
	// What the table's failed and errors columns count.
	if help := strings.Join(strings.Fields(stdout.String()), " "); !strings.Contains(help, "In the table, failed counts acquisitions refused because "+
		"the key was held: contention, expected with a small --keys; errors counts operations that failed otherwise: no quorum of masters, "+
		"timeouts, I/O errors, releases not confirmed.") {
		t.Errorf("help does not explain failed and errors:\n%s", stdout.String())
	}
	for _, flag := range []string{"-target", "-proxy", "-workload", "-rate", "-warmup", "-sweep", "-cpuprofile", "-memprofile",
		"-mutexprofile", "-blockprofile", "-pprof-addr", "-report", "-quiet", "-json", "-ceiling", "-compare", "-hold"} {
		if !strings.Contains(stdout.String(), flag) {
			t.Errorf("help lacks %s", flag)
		}
	}
}

func TestBenchJSONAndProfile(t *testing.T) {
	set := mastertest.Start(t, 3)
	dir := t.TempDir()
	prof := filepath.Join(dir, "out.pprof")
	var stdout, stderr bytes.Buffer
	code := run([]string{"bench", "--fresh-masters", "--masters", strings.Join(set.Addrs(), ","), "--duration", "1500ms", "--concurrency", "8",
		"--json", "--cpuprofile", prof}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var obj map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &obj); err != nil {
		t.Fatalf("last stdout line is not JSON: %v\n%s", err, stdout.String())
	}
	for _, k := range []string{"cycles_per_sec", "acquire_p50_us", "acquire_p99_us", "cycle_p50_us", "cycle_p99_us",
		"acquired", "failed_acquires", "errors", "masters", "masters_up", "concurrency", "duration_s", "interrupted", "missed", "per_second",
		"client_cpu_us_per_cycle", "client_syscalls_per_cycle", "masters_cpu_us_per_cycle"} {
		if _, ok := obj[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	if obj["cycles_per_sec"].(float64) <= 0 || obj["masters"].(float64) != 3 || obj["concurrency"].(float64) != 8 {
		t.Errorf("JSON values: %v", lines[len(lines)-1])
	}
	out := stdout.String()
	for _, want := range []string{"top 10 by flat CPU", "top 10 by cumulative CPU", prof} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	// Progress: one line per second on stderr.
	if !strings.Contains(stderr.String(), "ops/s") || !strings.Contains(stderr.String(), "p99") {
		t.Errorf("no progress line on stderr:\n%s", stderr.String())
	}

	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not on PATH: cannot check the profile with go tool pprof")
	}
	top, err := exec.Command(goBin, "tool", "pprof", "-top", prof).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof -top: %v\n%s", err, top)
	}
	if !strings.Contains(string(top), "flat%") {
		t.Fatalf("go tool pprof -top output:\n%s", top)
	}
}

func TestBenchQuietAndReport(t *testing.T) {
	set := mastertest.Start(t, 3)
	dir := filepath.Join(t.TempDir(), "rep")
	var stdout, stderr bytes.Buffer
	code := run([]string{"bench", "--fresh-masters", "--masters", strings.Join(set.Addrs(), ","), "--duration", "300ms", "--concurrency", "4",
		"--quiet", "--report", dir, "--workload", "contended", "--keys", "2"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, stderr.String())
	}
	if strings.Contains(stderr.String(), "ops/s") {
		t.Errorf("--quiet printed progress:\n%s", stderr.String())
	}
	for _, f := range []string{"index.html", "result.json", "cpu.pprof"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("report: %v", err)
		}
	}
	if !strings.Contains(stdout.String(), "  contended  ") {
		t.Errorf("table:\n%s", stdout.String())
	}
}

// TestBenchInterrupt sends SIGINT to a running `redlock bench`: it stops
// early and still prints the table and the JSON line.
func TestBenchInterrupt(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not on PATH: cannot build the binary")
	}
	set := mastertest.Start(t, 3)
	bin := filepath.Join(t.TempDir(), "redlock")
	if out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "bench", "--fresh-masters", "--masters", strings.Join(set.Addrs(), ","), "--duration", "1m",
		"--concurrency", "4", "--compare", "redsync", "--json")
	var stdout bytes.Buffer
	var stderr proctest.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait for the first progress line, then interrupt.
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(stderr.String(), "ops/s") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit: %v\nstderr:\n%s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("bench did not stop on SIGINT")
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var obj map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &obj); err != nil {
		t.Fatalf("no JSON after interrupt: %v\n%s", err, stdout.String())
	}
	if obj["interrupted"] != true || obj["cycles_per_sec"].(float64) <= 0 {
		t.Fatalf("JSON after interrupt: %s", lines[len(lines)-1])
	}
	if !strings.Contains(stdout.String(), "(interrupted)") {
		t.Errorf("table does not say interrupted:\n%s", stdout.String())
	}
}

// TestBenchFitsTerminal: the default table fits 80 columns.
func TestBenchFitsTerminal(t *testing.T) {
	set := mastertest.Start(t, 3)
	var stdout, stderr bytes.Buffer
	code := run([]string{"bench", "--fresh-masters", "--masters", strings.Join(set.Addrs(), ","), "--duration", "300ms", "--concurrency", "8",
		"--compare", "redsync", "--ceiling", "--quiet"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, l := range strings.Split(stdout.String(), "\n") {
		if n := utf8.RuneCountInString(l); n > 80 {
			t.Errorf("%d columns: %q", n, l)
		}
	}
	if !strings.Contains(stdout.String(), "masters 3/3 up") {
		t.Errorf("the table does not report the masters connected:\n%s", stdout.String())
	}
}

// TestBenchUnreachable: a refused port shows the dial error at once (exit
// 2, naming --masters), not after a wait; one unreachable master of three is reported and the
// run goes on with the others.
func TestBenchUnreachable(t *testing.T) {
	set := mastertest.Start(t, 2)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := ln.Addr().String()
	ln.Close()
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := run([]string{"bench", "--masters", refused, "--duration", "200ms"}, &stdout, &stderr)
	if d := time.Since(start); code != 2 || d > 5*time.Second || !strings.Contains(stderr.String(), "--masters: ") ||
		!strings.Contains(stderr.String(), "connection refused") {
		t.Fatalf("exit %d after %v: %s; want exit 2 naming --masters with the dial error, well within the 1s dial timeout + margin", code, d, stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	code = run([]string{"bench", "--fresh-masters", "--masters", strings.Join(append(set.Addrs(), refused), ","), "--duration", "200ms", "--concurrency", "4", "--quiet"}, &stdout, &stderr)
	if code != 0 || !strings.Contains(stderr.String(), "master 2 unreachable") || !strings.Contains(stdout.String(), "masters 2/3 up") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
}

// TestVersion: the version names the build's revision and commit time —
// under `go test` and `go run`, which stamp none into the binary, read
// from the source tree's git (when git and the tree are there, as in CI).
func TestVersion(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"--version"}, &stdout, &stderr); code != 0 || !strings.HasPrefix(stdout.String(), "redlock ") || !strings.Contains(stdout.String(), "go1.") {
		t.Fatalf("exit %d: %q %q", code, stdout.String(), stderr.String())
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("no git tree to compare with: %v", err)
	}
	if rev := strings.TrimSpace(string(head))[:12]; !strings.Contains(stdout.String(), " "+rev) || !regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`).MatchString(stdout.String()) {
		t.Errorf("version %q does not name revision %s and its commit time", stdout.String(), rev)
	}
}

// TestBenchNotes: the first error is printed whole (wrapped: its end names
// the masters), and a cycle p99 above the per-master timeout suggests
// --master-timeout.
func TestBenchNotes(t *testing.T) {
	long := "unavailable: too few masters could vote: acquire: 2/5 masters answered: 2 granted, 0 held (quorum 3): " +
		"master 0 (127.0.0.1:1), master 2 (127.0.0.1:3), master 4 (127.0.0.1:5): conn: request timed out THE-END"
	r := bench.Result{Phase: bench.Phase{Target: bench.TargetEngine, CycleP99: 9000, FirstError: long}, MasterTimeoutMillis: 5}
	var b bytes.Buffer
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	out := strings.Join(strings.Fields(b.String()), " ")
	if !strings.Contains(out, "THE-END") || !strings.Contains(out, "cycle p99 (9000 µs) is above the per-master timeout (5ms)") ||
		!strings.Contains(out, "--master-timeout") {
		t.Errorf("bench notes:\n%s", b.String())
	}
	r.CycleP99 = 4000
	b.Reset()
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "--master-timeout") {
		t.Errorf("a p99 below the timeout still suggests --master-timeout:\n%s", b.String())
	}
}

// TestRedactArgs: the values of secret flags are replaced in every flag
// form; other arguments, and anything after "--", are kept.
func TestRedactArgs(t *testing.T) {
	in := []string{"--masters", "a:1", "--master-password", "s1", "-master-password=s2", "--master-password-file", "f", "--", "--master-password", "x"}
	want := []string{"--masters", "a:1", "--master-password", "REDACTED", "-master-password=REDACTED", "--master-password-file", "f", "--", "--master-password", "x"}
	if got := redactArgs(in, "master-password"); !slices.Equal(got, want) {
		t.Fatalf("redactArgs = %q, want %q", got, want)
	}
	if in[3] != "s1" {
		t.Fatal("redactArgs changed its input")
	}
}

// TestParseBenchFlags: `redlock bench`'s flags become benchOptions without
// starting anything: the defaults, flags that set fields (the password
// redacted in the recorded command line), the environment never read, and
// bad values refused as usage errors naming the flag.
func TestParseBenchFlags(t *testing.T) {
	t.Setenv(envMasters, "127.0.0.1:7009")
	t.Setenv(envPassword, "from-env")
	for _, tt := range []struct {
		name  string
		args  []string
		check func(t *testing.T, o benchOptions)
		err   string // substring of the usage error; "" for none
	}{
		{name: "defaults", check: func(t *testing.T, o benchOptions) {
			c := o.Config
			if c.N != bench.DefaultMasters || c.Target != bench.TargetEngine || c.Workload != bench.WorkloadCycle ||
				c.Duration != bench.DefaultDuration || c.Rounds != 1 || c.Concurrency != bench.DefaultConcurrency || c.Keys != 0 ||
				c.TTL != bench.DefaultTTL || c.ConnsPerMaster != 1 || c.Rate != 0 || c.Warmup != 0 || c.Ceiling || c.CPUProfile != "" ||
				c.Masters != nil || c.MasterConn.Password != "" || c.Compare != nil || c.SweepVar != "" || c.Progress != nil || c.Notice != nil {
				t.Errorf("config: %+v", c)
			}
			if o.json || o.quiet || o.wide || !slices.Equal(c.Args, []string{"redlock", "bench"}) {
				t.Errorf("options: %+v", o)
			}
		}},
		{name: "flags", args: []string{"--masters", "127.0.0.1:7001, 127.0.0.1:7002,127.0.0.1:7003", "--master-password", "s3cret",
			"--duration", "2s", "--concurrency", "8", "--keys", "4", "--compare", "redsync, rueidis, fencing", "--sweep", "concurrency=1,16",
			"--ceiling", "--rate", "500", "--json", "--quiet", "--wide", "--cpuprofile", "cpu.out", "--fresh-masters"},
			check: func(t *testing.T, o benchOptions) {
				c := o.Config
				if !slices.Equal(c.Masters, []string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"}) || c.MasterConn.Password != "s3cret" ||
					c.Duration != 2*time.Second || c.Concurrency != 8 || c.Keys != 4 || !slices.Equal(c.Compare, []string{"redsync", "rueidis", "fencing"}) ||
					c.SweepVar != bench.SweepConcurrency || !slices.Equal(c.SweepValues, []int{1, 16}) || !c.Ceiling || c.Rate != 500 ||
					c.CPUProfile != "cpu.out" || !c.FreshMasters || !o.json || !o.quiet || !o.wide {
					t.Errorf("options: %+v", o)
				}
				if slices.Contains(c.Args, "s3cret") || !slices.Contains(c.Args, "REDACTED") {
					t.Errorf("recorded command line %q: want the password redacted", c.Args)
				}
			}},
		{name: "proxy target", args: []string{"--target", "proxy", "--proxy", "127.0.0.1:7380"}, check: func(t *testing.T, o benchOptions) {
			if o.Target != bench.TargetProxy || o.ProxyAddr != "127.0.0.1:7380" {
				t.Errorf("config: %+v", o.Config)
			}
		}},
		{name: "zero concurrency", args: []string{"--concurrency", "0"}, err: "--concurrency must be positive, got 0"},
		{name: "duration without unit", args: []string{"--ttl", "30"}, err: "want a duration with a unit"},
		{name: "rate not a number", args: []string{"--rate", "fast"}, err: `invalid value "fast" for flag -rate`},
		{name: "master flag without masters", args: []string{"--master-user", "u"}, err: "--master-user applies to --masters"},
		{name: "empty masters", args: []string{"--masters", " , "}, err: "no address given"},
		{name: "bad proxy address", args: []string{"--target", "proxy", "--proxy", "nope"}, err: `--proxy: "nope" is not host:port`},
		{name: "bad sweep", args: []string{"--sweep", "keys=1,2"}, err: `unknown sweep variable "keys"`},
		{name: "positional argument", args: []string{"now"}, err: `unexpected arguments: ["now"]`},
	} {
		t.Run(tt.name, func(t *testing.T) { checkParse(t, parseBenchFlags, tt.args, tt.err, tt.check) })
	}
}

// checkParse runs a subcommand's flag parser on args as the table tests of
// parseBenchFlags and parseProxyFlags do: nothing may be printed; with
// wantErr, the error must be a usage error containing it; otherwise there
// is no error and check inspects the result.
func checkParse[O any](t *testing.T, parse func([]string, io.Writer) (O, error), args []string, wantErr string, check func(*testing.T, O)) {
	t.Helper()
	var stdout bytes.Buffer
	o, err := parse(args, &stdout)
	if stdout.Len() != 0 {
		t.Errorf("stdout: %q", stdout.String())
	}
	if wantErr != "" {
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("error %v; want a usage error with %q", err, wantErr)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	check(t, o)
}

// TestBenchPlan: --plan prints the cores a rate needs from the run's CPU
// per cycle (client, masters together and each), and the plan joins the
// JSON; a negative rate is a usage error.
func TestBenchPlan(t *testing.T) {
	set := mastertest.Start(t, 3)
	mastertest.RequireReal(t, set) // INFO cpu: real masters
	var stdout, stderr bytes.Buffer
	code := run([]string{"bench", "--fresh-masters", "--masters", strings.Join(set.Addrs(), ","), "--duration", "1s", "--concurrency", "8",
		"--quiet", "--json", "--plan", "50000"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"plan for 50000 cycles/s over 3 masters", "client ", "cores in all", "per member"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var obj struct {
		Plan *struct {
			Rate        float64 `json:"rate"`
			ClientCores float64 `json:"client_cores"`
			MasterCores float64 `json:"masters_cores"`
			Shards      int     `json:"shards"`
		} `json:"plan"`
		Client float64 `json:"client_cpu_us_per_cycle"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &obj); err != nil || obj.Plan == nil {
		t.Fatalf("JSON: %v %s", err, lines[len(lines)-1])
	}
	if p := obj.Plan; p.Rate != 50000 || p.MasterCores <= 0 || p.Shards < 1 || p.ClientCores != 50000*obj.Client/1e6 {
		t.Errorf("plan %+v (client %.2f µs/cycle)", *p, obj.Client)
	}
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"bench", "--plan", "-5"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "--plan") {
		t.Errorf("--plan -5: exit %d, %s", code, stderr.String())
	}
}

// TestBenchProxyPassword (issue #42): `redlock bench --target proxy`
// measures a proxy started with --requirepass: the password from
// $REDLOCK_PROXY_PASSWORD, --proxy-password or --proxy-password-file;
// without it the run fails naming the proxy's refusal.
func TestBenchProxyPassword(t *testing.T) {
	set := mastertest.Start(t, 3)
	addr := serveProxy(t, proxy.Config{EngineConfig: engine.Config{FreshMasters: true, Addrs: set.Addrs(), MasterTimeout: 150 * time.Millisecond}, RequirePass: "s3cret-bench"})
	args := []string{"bench", "--target", "proxy", "--proxy", addr, "--fresh-masters", "--masters", strings.Join(set.Addrs(), ","),
		"--duration", "300ms", "--concurrency", "4", "--json", "--quiet"}
	var stdout, stderr bytes.Buffer
	if code := run(args, &stdout, &stderr); code == 0 {
		t.Fatalf("no password: exit 0; want a failure")
	} else if !strings.Contains(stderr.String(), "NOAUTH") && !strings.Contains(stderr.String(), "WRONGPASS") && !strings.Contains(stderr.String(), "uthentication") {
		t.Errorf("no password: stderr does not name the refusal:\n%s", stderr.String())
	}
	pwFile := filepath.Join(t.TempDir(), "pw")
	os.WriteFile(pwFile, []byte("s3cret-bench\n"), 0o600)
	for name, extra := range map[string][]string{
		"flag": {"--proxy-password", "s3cret-bench"},
		"file": {"--proxy-password-file", pwFile},
		"env":  nil,
	} {
		t.Run(name, func(t *testing.T) {
			if name == "env" {
				t.Setenv(envProxyPassword, "s3cret-bench")
			}
			stdout.Reset()
			stderr.Reset()
			if code := run(append(append([]string{}, args...), extra...), &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
			}
			lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
			var obj map[string]any
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &obj); err != nil || obj["cycles_per_sec"].(float64) <= 0 {
				t.Fatalf("no cycles through the password-protected proxy: %v %s", err, lines[len(lines)-1])
			}
		})
	}
}
