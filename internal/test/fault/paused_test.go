package fault_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/test/fault"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
)

// Paused holders of Engine.Do and Election.Lead (DESIGN.md §5 (h)): a
// child process (this test binary, pausedChild) runs Do or Lead whose fn
// is working — spinning on the CPU until its lock's validity has ended —
// when the parent SIGSTOPs the whole process. While it is stopped the
// lock's TTL runs out on the masters and the parent takes the lock (an
// engine of its own). Then the parent SIGCONTs the child: fn returns at
// once, past its validity, and Do (Lead) must return an error matching
// engine.ErrLockLost — the work ran without mutual exclusion — never nil.
// The checker counts a nil as a violation (Checker.Reported). A real
// process pause: the watchdog's goroutine is stopped with fn, and whether
// it has run when fn returns is up to the scheduler, not the clock.

const (
	pausedTTL = 300 * time.Millisecond
	// pausedTrials per kind (Do, Lead): on code that decides the loss
	// from a goroutine having run, about half of the trials return nil.
	pausedTrials = 12
	// pausedChildEnv runs this binary as the paused holder's process:
	// "<master>,<master>,…" (TestMain).
	pausedChildEnv = "REDLOCK_FAULT_PAUSED_CHILD"
)

// pausedChild is the child process: for each line "do <key>" or "lead
// <name>" on stdin it runs Do (fenced) or Lead with an fn that prints "in
// <validity left, µs> <token or term>" and spins until a millisecond past
// its lock's validity; then it prints "done <matches ErrLockLost> <err>".
func pausedChild() int {
	e, err := engine.New(engine.Config{Addrs: strings.Split(os.Getenv(pausedChildEnv), ","), FreshMasters: true, MaxTTL: pausedTTL, MasterTimeout: masterTimeout})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := e.WaitReady(ctx); err != nil {
		fmt.Println("error", err)
		return 1
	}
	work := func(l *engine.Lock, token int64) {
		fmt.Printf("in %d %d\n", l.Remaining().Microseconds(), token)
		time.Sleep(time.Until(l.Until()) + time.Millisecond)
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		what, name, _ := strings.Cut(in.Text(), " ")
		var err error
		ran := false
		// Tried again (a few times) while fn did not run: the masters
		// were slow to answer on a busy machine.
		for try := 0; try < 5 && !ran; try++ {
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			if what == "lead" {
				var el *engine.Election
				if el, err = e.NewElection(name, pausedTTL); err == nil {
					err = el.Lead(wctx, "child", func(_ context.Context, ld *engine.Leadership) error {
						ran = true
						work(ld.Lock(), ld.Term())
						return nil
					})
				}
			} else {
				err = e.Do(wctx, name, pausedTTL, func(ctx context.Context) error {
					ran = true
					l := engine.LockFrom(ctx)
					work(l, l.FencingToken())
					return nil
				}, engine.WithFencing())
			}
			cancel()
		}
		fmt.Printf("done %v %v\n", errors.Is(err, engine.ErrLockLost), err)
	}
	return 0
}

// pausedResult is one kind's trials.
type pausedResult struct {
	kind           string
	trials, paused int // paused: another holder entered while the child was stopped past its validity
	lost, nilOK    int // of the paused: Do/Lead returned the loss, nil
	other          int // returned another error
	skipped        int // fn never ran (the call failed before)
	res            fault.Result
}

// runPaused runs pausedTrials of Do and of Lead in one child process.
func runPaused(t *testing.T, seed uint64) []pausedResult {
	set := mastertest.Start(t, 5)
	mastertest.RequireReal(t, set)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e := newEngine(t, ctx, engine.Config{Addrs: set.Addrs(), FreshMasters: true, MaxTTL: pausedTTL, MasterTimeout: masterTimeout})

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), pausedChildEnv+"="+strings.Join(set.Addrs(), ","), "GOMAXPROCS=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		syscall.Kill(pid, syscall.SIGCONT)
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		io.Copy(io.Discard, stdout)
	}()
	// next returns the next line's fields: "in …" or "done …".
	next := func() []string {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the paused holder's process ended")
			}
			f := strings.Fields(l)
			if len(f) < 3 || f[0] != "in" && f[0] != "done" {
				t.Fatalf("the paused holder's process said %q", l)
			}
			return f
		case <-ctx.Done():
			t.Fatal("no answer from the paused holder's process")
		}
		return nil
	}

	var out []pausedResult
	var id int64
	for _, kind := range []string{"do", "lead"} {
		r := pausedResult{kind: kind}
		chk := &fault.Checker{}
		for i := range pausedTrials {
			name := fmt.Sprintf("paused:%s:%d:%d", kind, seed, i)
			r.trials++
			fmt.Fprintf(stdin, "%s %s\n", kind, name)
			f := next()
			if f[0] == "done" { // fn never ran
				r.skipped++
				t.Logf("%s trial %d: %s", kind, i, strings.Join(f, " "))
				continue
			}
			tIn := time.Now()
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			left, _ := strconv.ParseInt(f[1], 10, 64)
			token, _ := strconv.ParseInt(f[2], 10, 64)
			id++
			a := id
			// The child's validity as the parent sees it (at most the
			// pipe's delay later than it is).
			chk.Enter(name, a, tIn.Add(time.Duration(left)*time.Microsecond), token)

			// Another holder, while the child is stopped: granted once the
			// child's lock has ended on the masters.
			wctx, wcancel := context.WithTimeout(ctx, 5*pausedTTL)
			id++
			b := id
			var release func()
			if kind == "lead" {
				el, err := e.NewElection(name, pausedTTL)
				if err != nil {
					t.Fatal(err)
				}
				ld, err := el.Campaign(wctx, "parent")
				if err == nil {
					chk.Enter(name, b, ld.Lock().Until(), ld.Term())
					release = func() { ld.Resign(ctx) }
				}
			} else {
				l, err := e.Lock(wctx, name, pausedTTL, engine.WithFencing(), engine.WithRetryDelay(5*time.Millisecond))
				if err == nil {
					chk.Enter(name, b, l.Until(), l.FencingToken())
					release = func() { l.Unlock(ctx) }
				}
			}
			wcancel()
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			if f = next(); f[0] != "done" {
				t.Fatalf("the paused holder's process said %q, not done", f)
			}
			ok := strings.Join(f[2:], " ") == "<nil>"
			if chk.Reported(name, a, ok) {
				r.paused++
				switch {
				case ok:
					r.nilOK++
				case f[1] == "true":
					r.lost++
				default:
					r.other++
					t.Errorf("%s trial %d: returned %s, not an error matching engine.ErrLockLost", kind, i, strings.Join(f[2:], " "))
				}
			}
			chk.Leave(name, a)
			if release != nil {
				release()
				chk.Leave(name, b)
			}
		}
		r.res = chk.Result()
		out = append(out, r)
	}
	return out
}

// checkPaused runs the paused holders, logs their table and fails t on a
// violation: Do or Lead returning nil after another holder took the lock,
// an overlap, a fencing token out of order.
func checkPaused(t *testing.T, seed uint64) (trials, violations int) {
	start := time.Now()
	res := runPaused(t, seed)
	var b strings.Builder
	fmt.Fprintf(&b, "\n| call (fn paused by SIGSTOP past its validity) | trials | another holder took the lock | returned the loss | returned nil | overlaps | token order violations |\n")
	fmt.Fprintf(&b, "|---|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range res {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d |\n", r.kind, r.trials, r.paused, r.lost, r.nilOK, r.res.Overlaps, r.res.OrderViolations)
		trials += r.trials
		violations += r.res.Violations()
		if r.res.Violations() != 0 {
			t.Errorf("%s: %d returned nil after another holder took the lock, %d overlaps, %d token order violations; first: %s",
				r.kind, r.res.LostReportedOK, r.res.Overlaps, r.res.OrderViolations, r.res.FirstViolation)
		}
		if r.paused < r.trials/2 || r.skipped > r.trials/4 {
			t.Errorf("%s: only %d of %d trials had another holder take the lock while the child was stopped (%d: fn never ran)", r.kind, r.paused, r.trials, r.skipped)
		}
	}
	t.Logf("paused holders, seed %d, %.1fs:%s", seed, time.Since(start).Seconds(), b.String())
	return trials, violations
}
