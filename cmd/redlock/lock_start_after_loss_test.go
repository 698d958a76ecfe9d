//go:build linux

package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sys/unix"

	"github.com/redlock-dev/redlock/internal/test/check"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
)

// TestLockNotStartedAfterLoss: property (c). redlock lock is held up
// between the grant and the command's start for longer than the lock's
// validity: its -v "lock acquired" line blocks on a stderr pipe that was
// filled but for the lines before it (a pause, SIGSTOP or swap does the
// same). It started the command anyway, under a lock no longer held, and
// the command's work was done before the guard's SIGKILL or the next
// watch tick (found by the review of issue #46). Now the lock is checked
// last, before the start: the command is not run, and the exit is 76.
func TestLockNotStartedAfterLoss(t *testing.T) {
	set := mastertest.Start(t, 3)
	mastertest.RequireReal(t, set)
	args := func(key, marker string) []string {
		return []string{"lock", "-v", "--fresh-masters", "--masters", strings.Join(set.Addrs(), ","),
			"--ttl", "1s", "--max-hold", "100ms", key, "--", "sh", "-c", "echo ran > " + marker}
	}
	run := func(a []string) *exec.Cmd {
		c := exec.Command(os.Args[0], a...)
		c.Env = append(os.Environ(), "REDLOCK_TEST_MAIN=1")
		return c
	}
	// How many bytes redlock logs before "lock acquired".
	probe, _ := run(args("start:probe", os.DevNull)).CombinedOutput()
	i, j := strings.Index(string(probe), "time="), strings.Index(string(probe), `msg="lock acquired"`)
	if i < 0 || j < 0 {
		t.Fatalf("probe: %s", probe)
	}
	before := strings.LastIndex(string(probe[:j]), "\n") + 1 - i

	marker := filepath.Join(t.TempDir(), "ran")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := unix.FcntlInt(w.Fd(), unix.F_SETPIPE_SZ, 4096); err != nil {
		t.Skipf("F_SETPIPE_SZ: %v", err)
	}
	if _, err := w.Write(make([]byte, 4096-(before+50))); err != nil { // the acquired line does not fit
		t.Fatal(err)
	}
	const key = "start:{after-loss}"
	cmd := run(args(key, marker))
	cmd.Stderr = w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	defer cmd.Process.Kill()
	// The lock's validity has ended once its key expired on every master
	// (TTL 1 s; --max-hold stops the extensions).
	var clients []*redis.Client
	for _, a := range set.Addrs() {
		c := redis.NewClient(&redis.Options{Addr: a, Protocol: 2, DisableIndentity: true})
		t.Cleanup(func() { c.Close() })
		clients = append(clients, c)
	}
	held := func() bool {
		for _, c := range clients {
			if v, err := c.Exists(t.Context(), key).Result(); err != nil || v != 0 {
				return true
			}
		}
		return false
	}
	check.Eventually(t, 10*time.Second, "the lock taken (its key on a master)", held)
	check.Eventually(t, 10*time.Second, "the lock's key expired on every master", func() bool { return !held() })
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the command ran before the stall ended: the test proves nothing")
	}
	var out strings.Builder
	copied := make(chan struct{})
	go func() { io.Copy(&out, r); close(copied) }()
	cmd.Wait()
	<-copied
	s := strings.TrimLeft(out.String(), "\x00")
	if !strings.Contains(s, `msg="lock acquired"`) {
		t.Fatalf("the stall did not fall between the grant and the command's start: %s", s)
	}
	if strings.Contains(s, "while the command ran") { // killed after its start, maybe before its work
		t.Fatalf("the command was started although the lock had ended before: %s", s)
	}
	if b, err := os.ReadFile(marker); err == nil {
		t.Fatalf("the command ran (%q) although the lock had ended before it started; exit %d", b, cmd.ProcessState.ExitCode())
	}
	if code := cmd.ProcessState.ExitCode(); code != exitLost {
		t.Fatalf("exit %d; want %d (lost)\n%s", code, exitLost, s)
	}
}
