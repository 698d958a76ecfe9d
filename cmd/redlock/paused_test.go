//go:build unix

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/internal/test/proctest"
	"github.com/redlock-dev/redlock/proxy"
)

// procStat returns the state, parent and process group of pid from
// /proc (ok false when it is gone).
func procStat(pid int) (state byte, ppid, pgrp int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, 0, false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	ppid, _ = strconv.Atoi(f[1])
	pgrp, _ = strconv.Atoi(f[2])
	return f[0][0], ppid, pgrp, true
}

// lastStamp is the last timestamp (date +%s%N) in path.
func lastStamp(t *testing.T, path string) time.Time {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		t.Fatalf("%s is empty", path)
	}
	n, err := strconv.ParseInt(f[len(f)-1], 10, 64)
	if err != nil {
		n, _ = strconv.ParseInt(f[len(f)-2], 10, 64) // a line being written
	}
	return time.Unix(0, n)
}

// TestLockPausedRunner (issue #32 item 4): `redlock lock` itself stopped
// (SIGSTOP to its pid only) past the lock's validity. The command must not
// run past the validity: its guard kills it — the last timestamp it wrote
// is before the validity's latest possible end (the stop, plus the TTL) —
// another runner takes the lock, and redlock lock, continued, exits with
// exitLost. With the guard stopped too, redlock lock kills the command at
// once when continued.
func TestLockPausedRunner(t *testing.T) {
	set := mastertest.Start(t, 3)
	const ttl = 2 * time.Second
	for _, tt := range []struct {
		name       string
		proxy      bool // through a proxy (in this process: not stopped)
		stopGuard  bool
		contWithin time.Duration // stopGuard: the command ends within this of SIGCONT
	}{
		{name: "runner stopped"},
		{name: "through a proxy", proxy: true},
		{name: "runner and guard stopped", stopGuard: true, contWithin: 500 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			ready, stamps := filepath.Join(dir, "ready"), filepath.Join(dir, "stamps")
			key := "paused:" + strings.ReplaceAll(tt.name, " ", "-")
			script := "echo $$ > " + ready + "; while :; do date +%s%N >> " + stamps + "; sleep 0.02; done"
			via := []string{"--fresh-masters", "--masters", strings.Join(set.Addrs(), ","), "--master-timeout", "50ms"}
			if tt.proxy {
				via = []string{"--proxy", serveProxy(t, proxy.Config{EngineConfig: engine.Config{FreshMasters: true, Addrs: set.Addrs()}})}
			}
			cmd := exec.Command(os.Args[0], append(append([]string{"lock"}, via...), "--ttl", ttl.String(), "--grace", "300ms", key, "--", "sh", "-c", script)...)
			cmd.Env = append(os.Environ(), "REDLOCK_TEST_MAIN=1", envProxyPassword+"=")
			var stderr proctest.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan struct{})
			go func() { cmd.Wait(); close(exited) }()
			t.Cleanup(func() {
				cmd.Process.Signal(syscall.SIGCONT)
				cmd.Process.Kill()
				<-exited
			})
			pid, _ := strconv.Atoi(strings.TrimSpace(waitFile(t, ready, 10*time.Second)))
			t.Cleanup(func() { syscall.Kill(-pid, syscall.SIGKILL) })
			time.Sleep(800 * time.Millisecond) // past the first extension

			var guard int
			if tt.stopGuard {
				ents, _ := os.ReadDir("/proc")
				for _, e := range ents {
					p, err := strconv.Atoi(e.Name())
					if _, ppid, pgrp, ok := procStat(p); err == nil && ok && ppid == cmd.Process.Pid && pgrp == pid && p != pid {
						guard = p
					}
				}
				if guard == 0 {
					t.Fatal("no guard process in the command's process group")
				}
				syscall.Kill(guard, syscall.SIGSTOP)
				t.Cleanup(func() { syscall.Kill(guard, syscall.SIGCONT) })
			}
			if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			stopped := time.Now()
			// No extension is sent after the stop: the validity ends by
			// stopped + TTL, and the key expires on the masters by then.
			validEnd := stopped.Add(ttl)
			if code, stderr := runLock("--fresh-masters", "--masters", strings.Join(set.Addrs(), ","), "--wait", "5s", key, "--", "true"); code != 0 {
				t.Fatalf("another runner while the first is stopped: exit %d; stderr:\n%s", code, stderr)
			}
			if took := time.Since(stopped); took > ttl+time.Second {
				t.Fatalf("another runner took the lock %v after the first stopped (TTL %v)", took, ttl)
			}
			time.Sleep(time.Until(stopped.Add(ttl + 600*time.Millisecond)))
			last := lastStamp(t, stamps)
			if !tt.stopGuard {
				// The guard's timer latency, and date's run between the stamp and the write.
				if late := last.Sub(validEnd); late > 100*time.Millisecond {
					t.Fatalf("the command wrote %v after the validity's latest end, while redlock lock was stopped; stderr:\n%s", late, stderr.String())
				}
				t.Logf("last stamp %v before the validity's latest end", validEnd.Sub(last).Round(time.Millisecond))
				if st, _, _, ok := procStat(pid); ok && st != 'Z' {
					t.Fatalf("the command (pid %d) still runs (state %c) past the validity", pid, st)
				}
			} else if last.Before(validEnd) {
				t.Fatalf("with its guard stopped too the command stopped writing before the validity ended: the test proves nothing")
			}
			if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			continued := time.Now()
			select {
			case <-exited:
			case <-time.After(5 * time.Second):
				t.Fatalf("redlock lock did not exit within 5s of SIGCONT; stderr:\n%s", stderr.String())
			}
			if code := cmd.ProcessState.ExitCode(); code != exitLost || !strings.Contains(stderr.String(), "lost while the command ran") {
				t.Fatalf("redlock lock continued after the validity: exit %d, want %d; stderr:\n%s", code, exitLost, stderr.String())
			}
			if tt.stopGuard {
				if late := lastStamp(t, stamps).Sub(continued); late > tt.contWithin {
					t.Fatalf("the command wrote %v after redlock lock continued past the validity; stderr:\n%s", late, stderr.String())
				}
			}
			if _, _, _, ok := procStat(pid); ok {
				t.Fatalf("the command (pid %d) outlived redlock lock", pid)
			}
			t.Logf("stderr:\n%s", stderr.String())
		})
	}
}
