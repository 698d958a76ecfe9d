package fault_test

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
	binPath string
	binErr  error
)

// redlockProxy builds cmd/redlock once per run and starts `redlock proxy`
// over masters with flags; it returns the address it listens on and stops
// it (SIGTERM) when t ends.
func redlockProxy(t *testing.T, masters []string, flags ...string) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "redlock-fault")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "redlock")
		if out, err := exec.Command("go", "build", "-o", binPath, "github.com/redlock-dev/redlock/cmd/redlock").CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	args := append([]string{"proxy", "--listen", "127.0.0.1:0", "--masters", strings.Join(masters, ",")}, flags...)
	cmd := exec.Command(binPath, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	first := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case first <- sc.Text():
			default:
			}
		}
	}()
	select {
	case l := <-first: // "redlock proxy listening on ADDR, masters ..."
		f := strings.Fields(l)
		if len(f) < 5 || f[2] != "listening" {
			t.Fatalf("unexpected first line %q", l)
		}
		return strings.TrimSuffix(f[4], ",")
	case <-exited:
		t.Fatalf("redlock proxy exited at start: %v", cmd.ProcessState)
	case <-time.After(20 * time.Second):
		t.Fatal("redlock proxy did not start")
	}
	return ""
}

// TestMain removes the built binary after the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}
