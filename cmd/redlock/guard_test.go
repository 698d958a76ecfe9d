//go:build unix

package main

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// The guard of a redlock lock run in this test binary is the test binary
// again: TestMain runs redlock with REDLOCK_TEST_MAIN=1.
func init() { guardExtraEnv = []string{"REDLOCK_TEST_MAIN=1"} }

// TestLockGuard: the guard kills the command (its process group, or the
// process alone through a pidfd) when the latest deadline it was sent
// passes — not before, not after it was stopped — and keeps the last one
// when redlock lock's end of the pipe closes (redlock lock died).
func TestLockGuard(t *testing.T) {
	for _, tt := range []struct {
		name  string
		group bool
		act   func(g *lockGuard) // right after the start (deadline in 300ms)
		dies  bool               // the command is killed at the (last) deadline
		after time.Duration      // not before this
		first time.Duration      // the deadline the guard starts with (0: 300ms)
	}{
		{"group", true, func(*lockGuard) {}, true, 300 * time.Millisecond, 0},
		{"pidfd", false, func(*lockGuard) {}, true, 300 * time.Millisecond, 0},
		{"later deadline", true, func(g *lockGuard) { g.update(time.Now().Add(900 * time.Millisecond)) }, true, 900 * time.Millisecond, 0},
		// A later deadline sent before the guard process ran, with the
		// one it starts with already past (exec slow on a busy machine:
		// the later one was in the pipe when the guard first looked).
		{"later deadline before the guard ran", true, func(g *lockGuard) { g.update(time.Now().Add(900 * time.Millisecond)) }, true, 900 * time.Millisecond, -time.Second},
		{"earlier deadline", false, func(g *lockGuard) { g.update(time.Now().Add(100 * time.Millisecond)) }, true, 100 * time.Millisecond, 0},
		{"redlock lock gone", true, func(g *lockGuard) { g.w.Close() }, true, 300 * time.Millisecond, 0},
		{"stopped", true, func(g *lockGuard) { g.stop() }, false, 0, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command("sleep", "30")
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: tt.group}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill() })
			start := time.Now()
			first := tt.first
			if first == 0 {
				first = 300 * time.Millisecond
			}
			g, err := startGuard(cmd.Process.Pid, tt.group, start.Add(first), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(g.stop)
			tt.act(g)
			limit := 800 * time.Millisecond // past the first deadline
			if tt.dies {
				limit = tt.after + 3*time.Second
			}
			exited := make(chan struct{})
			go func() { cmd.Wait(); close(exited) }()
			select {
			case <-exited:
				d := time.Since(start)
				if !tt.dies || d < tt.after {
					t.Fatalf("the command was killed %v after the guard started (deadline %v)", d, tt.after)
				}
				if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); ws.Signal() != syscall.SIGKILL {
					t.Fatalf("the command ended with %v, want SIGKILL", cmd.ProcessState)
				}
				t.Logf("killed %v after the guard started (deadline %v)", d.Round(time.Millisecond), tt.after)
			case <-time.After(limit):
				if tt.dies {
					t.Fatalf("the command was not killed within 3s of the deadline")
				}
			}
		})
	}
}
