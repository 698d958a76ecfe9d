//go:build unix

package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// The lock guard. redlock lock kills the command when the lock's validity
// ends — but only while it runs itself: stopped (SIGSTOP, a debugger, a
// frozen cgroup) it cannot act, and the command would run on past the
// validity, unsupervised, while another runner holds the lock. So each
// command gets a guard: redlock itself, re-executed as the hidden
// subcommand `redlock lock-guard`, a process that holds the validity's
// end and SIGKILLs the command — its process group without a terminal,
// the command alone on one — when that moment comes and no later one
// came. redlock lock sends it each new validity end (after extensions)
// over a pipe, and kills it when the command has exited.
//
// The deadline crosses processes as a CLOCK_MONOTONIC reading, the clock
// of Go's timers and of the engine's validity: system-wide, and never
// stepped by NTP.
//
// Without a terminal the guard joins the command's process group: a
// signal forwarded to the group reaches it too (it ignores them), and the
// group cannot end — and its id be reused by another — while the guard is
// in it. On a terminal the command stays in the terminal's group, and the
// guard kills it through a pidfd opened before the command could be
// reaped: never a process that reused its pid.

// lockGuardCommand is the hidden subcommand that runs a lock guard:
// `redlock lock-guard group PGID DEADLINE` or `redlock lock-guard pidfd
// DEADLINE` (the pidfd is fd 3), DEADLINE in CLOCK_MONOTONIC nanoseconds.
const lockGuardCommand = "lock-guard"

// guardExtraEnv is added to the guard's environment (a test binary acts as
// redlock only when told so).
var guardExtraEnv []string

// errGuardUnsupported: no guard on this system (it needs Linux).
var errGuardUnsupported = errors.New("the lock guard needs Linux (pidfds, /proc/self/exe)")

// lockGuard is redlock lock's end of a running guard. A nil *lockGuard is
// no guard: its methods do nothing.
type lockGuard struct {
	cmd   *exec.Cmd
	w     io.WriteCloser // the deadlines
	until time.Time      // the validity end last sent
}

// startGuard starts the guard of the command pid: its process group when
// group, else the process alone. until is when the lock's validity ends.
// Call it before the command can be reaped (before its Wait).
func startGuard(pid int, group bool, until time.Time, stderr io.Writer) (*lockGuard, error) {
	exe, err := guardExe()
	if err != nil {
		return nil, err
	}
	args := []string{lockGuardCommand}
	attr := &syscall.SysProcAttr{}
	var extra []*os.File
	if group {
		args = append(args, "group", strconv.Itoa(pid))
		attr.Setpgid, attr.Pgid = true, pid
	} else {
		f, err := pidfdOpen(pid)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		extra = []*os.File{f}
		args = append(args, "pidfd")
	}
	deadline, err := monoDeadline(until)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, append(args, strconv.FormatInt(deadline, 10))...)
	cmd.Env = append(childEnv(), guardExtraEnv...)
	cmd.SysProcAttr = attr
	cmd.ExtraFiles = extra
	// Its one message goes to redlock lock's stderr when that is a file
	// (a pipe to a goroutine of a stopped redlock lock would not be read).
	if f, ok := stderr.(*os.File); ok {
		cmd.Stderr = f
	}
	w, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the lock guard: %w", err)
	}
	return &lockGuard{cmd: cmd, w: w, until: until}, nil
}

// update sends the guard the validity end until, when it moved.
func (g *lockGuard) update(until time.Time) {
	if g == nil || until.Equal(g.until) {
		return
	}
	d, err := monoDeadline(until)
	if err != nil {
		return
	}
	g.until = until
	// A line is written whole (a pipe write under PIPE_BUF), and a few a
	// TTL never fill the pipe: this does not block.
	fmt.Fprintf(g.w, "%d\n", d)
}

// stop ends the guard: the command has exited, or is ending under
// redlock lock's own watch.
func (g *lockGuard) stop() {
	if g == nil || g.cmd.Process == nil {
		return
	}
	g.cmd.Process.Kill() // our child, not reaped yet: the pid is still its own
	g.cmd.Wait()
	g.cmd.Process = nil
}

// monoDeadline is until as a CLOCK_MONOTONIC reading. The clock is read
// first: a pause between the two readings makes the deadline earlier,
// never later.
func monoDeadline(until time.Time) (int64, error) {
	now, err := monoNow()
	if err != nil {
		return 0, err
	}
	return now + int64(time.Until(until)), nil
}

// lockGuardCmd runs `redlock lock-guard`: it SIGKILLs the command when the
// latest deadline read from stdin (the first from its arguments) passes.
// After EOF (redlock lock died) it keeps the last deadline: nothing
// extends the lock any more.
func lockGuardCmd(args []string, stderr io.Writer) error {
	// Signals forwarded to the command's group, a terminal's job control
	// and hangup are for the command, not for its guard.
	signal.Ignore(append(forwardedSignals, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGPIPE)...)
	var kill func() error
	var what string
	switch {
	case len(args) == 3 && args[0] == "group":
		pgid, err := strconv.Atoi(args[1])
		if err != nil || pgid <= 1 {
			return usageError{fmt.Errorf("bad process group %q", args[1])}
		}
		kill = func() error { return syscall.Kill(-pgid, syscall.SIGKILL) } // this guard too
		what = "process group " + args[1]
	case len(args) == 2 && args[0] == "pidfd":
		f := os.NewFile(3, "pidfd")
		kill = func() error { return pidfdKill(f) }
		what = "process"
	default:
		return usageError{errors.New("internal: want group PGID DEADLINE or pidfd DEADLINE")}
	}
	deadline, err := strconv.ParseInt(args[len(args)-1], 10, 64)
	if err != nil {
		return usageError{fmt.Errorf("bad deadline %q", args[len(args)-1])}
	}
	// stdin is read here, between the deadline checks, not by another
	// goroutine: a deadline sent before the one in force passed is always
	// read before the guard kills (the guard may start after its first
	// deadline when exec is slow, with a later one already in the pipe).
	in := &deadlineLines{fd: 0}
	for {
		now, err := monoNow()
		if err != nil {
			return err
		}
		wait := time.Duration(max(deadline-now, 0))
		if in.fd >= 0 {
			ready, err := waitReadable(in.fd, wait)
			if err != nil {
				return err
			}
			if ready {
				if d, ok := in.read(); ok {
					deadline = d
				}
				continue // EOF: redlock lock is gone, the last deadline stands
			}
		} else if wait > 0 {
			time.Sleep(wait)
			continue
		}
		if now, err = monoNow(); err != nil {
			return err
		}
		if now < deadline {
			continue
		}
		fmt.Fprintf(stderr, "redlock lock: the lock's validity ended and redlock lock (pid %d) gave no later end (stopped?): SIGKILL to the command's %s\n", os.Getppid(), what)
		if err := kill(); err != nil && !errors.Is(err, syscall.ESRCH) {
			return err
		}
		return nil
	}
}

// deadlineLines reads the deadlines redlock lock writes to the guard's
// stdin, one decimal line each.
type deadlineLines struct {
	fd      int // -1 after EOF or an error
	partial []byte
	buf     [256]byte
}

// read reads what is there (the fd is readable) and returns the last
// whole line's deadline, if it read one.
func (r *deadlineLines) read() (last int64, ok bool) {
	n, err := syscall.Read(r.fd, r.buf[:])
	if err == syscall.EINTR || err == syscall.EAGAIN {
		return 0, false
	}
	if n <= 0 || err != nil {
		r.fd = -1
		return 0, false
	}
	r.partial = append(r.partial, r.buf[:n]...)
	for {
		i := bytes.IndexByte(r.partial, '\n')
		if i < 0 {
			break
		}
		if d, err := strconv.ParseInt(string(r.partial[:i]), 10, 64); err == nil {
			last, ok = d, true
		}
		r.partial = r.partial[i+1:]
	}
	if len(r.partial) > 64 { // not a deadline: drop it
		r.partial = r.partial[:0]
	}
	return last, ok
}
