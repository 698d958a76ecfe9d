package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/localmaster/mastertest"
)

func TestBenchFlagValidation(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // substring of stderr
	}{
		{"unknown flag", []string{"--bogus"}, "flag provided but not defined: -bogus"},
		{"bad duration", []string{"--duration", "ten"}, `invalid value "ten" for flag -duration`},
		{"negative duration", []string{"--duration", "-1s"}, "negative duration"},
		{"zero concurrency", []string{"--concurrency", "-3"}, "concurrency must be 1..100000, got -3"},
		{"bad workload", []string{"--workload", "burst"}, `unknown workload "burst" (known: cycle, acquire, contended)`},
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
		})
	}
}

func TestBenchHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"bench", "-h"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	for _, flag := range []string{"-target", "-proxy", "-workload", "-rate", "-warmup", "-sweep", "-cpuprofile", "-memprofile",
		"-mutexprofile", "-blockprofile", "-pprof-addr", "-report", "-quiet", "-json", "-ceiling", "-compare", "-hold"} {
		if !strings.Contains(stderr.String(), flag) {
			t.Errorf("help lacks %s", flag)
		}
	}
}

func TestBenchJSONAndProfile(t *testing.T) {
	set := mastertest.Start(t, 3)
	dir := t.TempDir()
	prof := filepath.Join(dir, "out.pprof")
	var stdout, stderr bytes.Buffer
	code := run([]string{"bench", "--masters", strings.Join(set.Addrs(), ","), "--duration", "1200ms", "--concurrency", "8",
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
		"acquired", "failed_acquires", "errors", "masters", "concurrency", "duration_s"} {
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
	code := run([]string{"bench", "--masters", strings.Join(set.Addrs(), ","), "--duration", "300ms", "--concurrency", "4",
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
	if !strings.Contains(stdout.String(), "workload=contended") {
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
	cmd := exec.Command(bin, "bench", "--masters", strings.Join(set.Addrs(), ","), "--duration", "1m",
		"--concurrency", "4", "--compare", "redsync", "--json")
	var stdout bytes.Buffer
	var stderr lockedBuffer
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

// lockedBuffer is a bytes.Buffer safe to read while a child process
// writes to it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
