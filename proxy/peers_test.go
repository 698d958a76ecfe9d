package proxy

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// stepper runs a peer script that prints one line per step and waits for
// a line on stdin before the next.
type stepper struct {
	t   *testing.T
	in  io.WriteCloser
	out *bufio.Scanner
}

func startPeer(t *testing.T, cmd *exec.Cmd) *stepper {
	t.Helper()
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s: %v\n%s", cmd.Path, err, stderr.String())
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Errorf("%s did not exit\n%s", cmd.Path, stderr.String())
		}
	})
	return &stepper{t: t, in: in, out: bufio.NewScanner(out)}
}

// step reads the next line and checks its first word.
func (s *stepper) step(want string) []string {
	s.t.Helper()
	if !s.out.Scan() {
		s.t.Fatalf("peer ended before %s", want)
	}
	f := strings.Fields(s.out.Text())
	if len(f) == 0 || f[0] != want {
		s.t.Fatalf("peer said %q, want %s", s.out.Text(), want)
	}
	return f
}

func (s *stepper) next() { s.in.Write([]byte("\n")) }

func port(addr string) string { _, p, _ := net.SplitHostPort(addr); return p }

func TestNodeRedlock(t *testing.T) {
	dir, _ := filepath.Abs("testdata/node")
	_, err := os.Stat(filepath.Join(dir, "node_modules", "redlock"))
	requirePeer(t, "node and testdata/node/node_modules (npm ci --prefix proxy/testdata/node)", haveCmd("node") && err == nil)
	e := startEnv(t, 5, nil)
	p := startPeer(t, exec.Command("node", filepath.Join(dir, "peer.js"), port(e.addr)))
	f := p.step("ACQUIRED")
	value, res := f[1], strings.Split(f[2], ",")
	for _, k := range res {
		if n := e.holding(t, k, value); n < e.quorum() {
			t.Fatalf("after acquire %s on %d masters", k, n)
		}
	}
	p.next()
	p.step("REFUSED")
	for _, m := range e.masters { // the refused multi-key lock left nothing
		if ex, _ := m.Exists(context.Background(), "node:z").Result(); ex != 0 {
			t.Fatalf("%s: partial grant of the refused lock left", m.Options().Addr)
		}
	}
	p.next()
	p.step("EXTENDED")
	for _, k := range res {
		if d, _ := e.masters[0].PTTL(context.Background(), k).Result(); d <= 10*time.Second {
			t.Fatalf("%s TTL after extend %v", k, d)
		}
	}
	p.next()
	p.step("RELEASED")
	for _, k := range res {
		e.waitHolding(t, k, value, 0) // released at a quorum; the others follow
	}
	p.next()
	f = p.step("ACQUIRED4")
	if n := e.holding(t, f[2], f[1]); n < e.quorum() {
		t.Fatalf("v4: after acquire on %d masters", n)
	}
	p.next()
	p.step("EXTENDED4")
	p.next()
	p.step("RELEASED4")
	e.waitHolding(t, f[2], f[1], 0) // released at a quorum; the others follow
}

func TestRedisPyLock(t *testing.T) {
	py := "/usr/bin/python3" // the system python with Debian's python3-redis
	ok := exec.Command(py, "-c", "import redis.lock").Run() == nil
	requirePeer(t, "system python3 with python3-redis (apt-get install python3-redis)", ok)
	e := startEnv(t, 5, nil)
	p := startPeer(t, exec.Command(py, "testdata/python/peer.py", port(e.addr)))
	f := p.step("ACQUIRED")
	token, key := f[1], f[2]
	if n := e.holding(t, key, token); n < e.quorum() {
		t.Fatalf("after acquire on %d masters", n)
	}
	p.next()
	p.step("REFUSED")
	p.next()
	f = p.step("EXTENDED") // extend(20) adds to the ~10s left
	if ms, _ := strconv.Atoi(f[1]); ms <= 20000 || ms > 30000 {
		t.Fatalf("PTTL after extend-add %s", f[1])
	}
	p.next()
	f = p.step("REPLACED")
	if ms, _ := strconv.Atoi(f[1]); ms <= 0 || ms > 5000 {
		t.Fatalf("PTTL after extend-replace %s", f[1])
	}
	p.next()
	f = p.step("REACQUIRED") // back to the lock's timeout (10s)
	if ms, _ := strconv.Atoi(f[1]); ms <= 5000 || ms > 10000 {
		t.Fatalf("PTTL after reacquire %s", f[1])
	}
	if n := e.holding(t, key, token); n < e.quorum() {
		t.Fatalf("after reacquire on %d masters", n)
	}
	p.next()
	p.step("RELEASED")
	e.waitHolding(t, key, token, 0) // released at a quorum; the others follow
	p.next()
	p.step("NOTOWNED")
}
