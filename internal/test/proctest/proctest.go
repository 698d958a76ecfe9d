// Package proctest runs the `redlock` binary, built from this tree, as a
// process of its own for tests that need the real program: its liveness,
// CPU time, RSS, or a process to kill and restart.
package proctest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

// Binary builds cmd/redlock (without the race detector) once per test
// binary and returns its path. Call [Cleanup] from TestMain to remove it.
func Binary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "redlock-bin"); binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "redlock")
		if out, err := exec.Command("go", "build", "-o", binPath, "github.com/redlock-dev/redlock/cmd/redlock").CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// Cleanup removes the binary Binary built, if any.
func Cleanup() {
	if binDir != "" {
		os.RemoveAll(binDir)
	}
}

// Proxy is a running `redlock proxy`.
type Proxy struct {
	Cmd    *exec.Cmd
	Addr   string        // the address it listens on
	Exited chan struct{} // closed when the process has exited
	log    Buffer
}

// StartProxy starts `redlock proxy --listen 127.0.0.1:0 --fresh-masters
// --masters …` (the masters are the test's own, started empty) with
// flags and env added to this process's environment, waits until it
// listens, and stops it (SIGTERM; SIGKILL after 15 s) when t ends.
func StartProxy(t testing.TB, env, masters []string, flags ...string) *Proxy {
	t.Helper()
	args := append([]string{"proxy", "--listen", "127.0.0.1:0", "--fresh-masters", "--masters", strings.Join(masters, ",")}, flags...)
	p := &Proxy{Cmd: exec.Command(Binary(t), args...), Exited: make(chan struct{})}
	p.Cmd.Env = append(os.Environ(), env...)
	stdout, err := p.Cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.Cmd.Stderr = &p.log
	if err := p.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.Cmd.Wait(); close(p.Exited) }()
	t.Cleanup(func() {
		p.Cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.Exited:
		case <-time.After(15 * time.Second):
			p.Cmd.Process.Kill()
			<-p.Exited
		}
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			// "redlock proxy listening on ADDR, masters ..."
			if f := strings.Fields(sc.Text()); len(f) >= 5 && f[2] == "listening" {
				select {
				case addr <- strings.TrimSuffix(f[4], ","):
				default:
				}
			}
		}
	}()
	select {
	case p.Addr = <-addr:
	case <-p.Exited:
		t.Fatalf("redlock proxy exited at start: %v\n%s", p.Cmd.ProcessState, p.Stderr())
	case <-time.After(20 * time.Second):
		t.Fatalf("redlock proxy did not start\n%s", p.Stderr())
	}
	return p
}

// Stderr returns what the process wrote to stderr so far.
func (p *Proxy) Stderr() string { return p.log.String() }

// Alive reports whether the process is still running.
func (p *Proxy) Alive() bool {
	select {
	case <-p.Exited:
		return false
	default:
		return true
	}
}

// Buffer is an io.Writer safe to read (String) while processes or
// goroutines write to it: a process's output, a server's log.
type Buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
