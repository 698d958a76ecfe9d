package engine_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
)

// Property (h) of the grant rule (docs/safety.md): a call that reports work
// done under a lock — Engine.Do's and Election.Lead's return — reports the
// loss when the validity ended before it returns, read from the clock, not
// from the watchdog goroutine having run.

// doOutcomeEnv tells TestDoOutcomeChild where the masters are and which
// call to make ("do" or "lead"): "kind;master,master,…".
const doOutcomeEnv = "REDLOCK_DO_OUTCOME"

// doOutcomeTTL is the TTL of the child's lock (or leadership).
const doOutcomeTTL = time.Second

// TestDoOutcomeChild is the holder process of TestDoOutcomeAfterPause. It
// runs Do (or Lead) whose fn prints "in fn", then spins on the CPU for
// doOutcomeTTL*7/10 of its own clock and returns nil; then it prints
// "returned <matches ErrLockLost> <err>". Its GOMAXPROCS is 1: stopped
// while fn spins and continued after the deadline, fn returns before any
// other goroutine (the watchdog's) runs — the schedule that lost the loss
// when Do read Done without waiting (issue #41 finding 2).
func TestDoOutcomeChild(t *testing.T) {
	spec := os.Getenv(doOutcomeEnv)
	if spec == "" {
		t.Skip("TestDoOutcomeAfterPause's child process")
	}
	kind, masters, _ := strings.Cut(spec, ";")
	e, err := engine.New(engine.Config{Addrs: strings.Split(masters, ","), FreshMasters: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := e.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	spin := func() {
		fmt.Println("in fn")
		deadline := time.Now().Add(doOutcomeTTL * 7 / 10)
		for time.Now().Before(deadline) {
		}
	}
	if kind == "lead" {
		el, err := e.NewElection("do-outcome", doOutcomeTTL)
		if err != nil {
			t.Fatal(err)
		}
		err = el.Lead(ctx, "child", func(context.Context, *engine.Leadership) error { spin(); return nil })
		fmt.Println("returned", errors.Is(err, engine.ErrLockLost), err)
		return
	}
	err = e.Do(ctx, "do-outcome", doOutcomeTTL, func(context.Context) error { spin(); return nil })
	fmt.Println("returned", errors.Is(err, engine.ErrLockLost), err)
}

// TestDoOutcomeAfterPause (issue #41 finding 2): a process running Do (or
// Lead) is stopped (SIGSTOP) while fn runs, past the validity; another
// process takes the lock (wins the election); the first is continued and
// fn returns at once. Do and Lead must return an error matching
// ErrLockLost: the work may have run beside the other holder. Three rounds
// each: before the fix (Do and Lead read Done without waiting) one to three
// of each kind's rounds returned nil.
func TestDoOutcomeAfterPause(t *testing.T) {
	if testing.Short() {
		t.Skip("stops and continues a child process")
	}
	set := mastertest.Start(t, 3)
	e, err := engine.New(engine.Config{Addrs: set.Addrs(), FreshMasters: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for _, kind := range []string{"do", "lead"} {
		t.Run(kind, func(t *testing.T) {
			for round := range 3 {
				doOutcomeRound(t, e, set.Addrs(), kind, round)
			}
		})
	}
}

func doOutcomeRound(t *testing.T, e *engine.Engine, addrs []string, kind string, round int) {
	child := exec.Command(os.Args[0], "-test.run=^TestDoOutcomeChild$", "-test.count=1")
	child.Env = append(os.Environ(), doOutcomeEnv+"="+kind+";"+strings.Join(addrs, ","), "GOMAXPROCS=1")
	child.Stderr = os.Stderr
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		child.Process.Kill()
		child.Wait()
	}()
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			lines <- s.Text()
		}
	}()
	next := func(prefix string, within time.Duration) string {
		t.Helper()
		timeout := time.After(within)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("round %d: the child exited before %q", round, prefix)
				}
				if strings.HasPrefix(l, prefix) {
					return l
				}
			case <-timeout:
				t.Fatalf("round %d: no %q from the child within %v", round, prefix, within)
			}
		}
	}
	next("in fn", 20*time.Second)
	if err := child.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// Stopped: its lock runs out on the masters (nothing extends it), and
	// this process takes it.
	ctx, cancel := context.WithTimeout(context.Background(), 10*doOutcomeTTL)
	defer cancel()
	if kind == "lead" {
		el, err := e.NewElection("do-outcome", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		ld, err := el.Campaign(ctx, "parent")
		if err != nil {
			t.Fatalf("round %d: the stopped leader's election was not won: %v", round, err)
		}
		defer ld.Resign(context.Background())
	} else {
		l, err := e.Lock(ctx, "do-outcome", 10*time.Second)
		if err != nil {
			t.Fatalf("round %d: the stopped holder's key was not freed: %v", round, err)
		}
		defer l.Unlock(context.Background())
	}
	// The other process holds: continued, the child's fn is past its
	// deadline and returns at once.
	if err := child.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if l := next("returned", 10*time.Second); !strings.HasPrefix(l, "returned true ") {
		t.Errorf("round %d: %s returned %q after its lock was taken by another process; want an error matching ErrLockLost", round, kind, l)
	}
}

// TestDoReleasesOnPanic (issue #41 finding 3): fn panics and the caller
// recovers (as net/http does for a handler): Do releases the lock and Lead
// resigns before the panic goes on, so another holder gets the key at once
// — not after the watchdog kept the ownerless lock alive.
func TestDoReleasesOnPanic(t *testing.T) {
	v := newEnv(t, 3, functional)
	ctx := context.Background()
	recovered := func(f func()) (r any) {
		defer func() { r = recover() }()
		f()
		return nil
	}
	const ttl = 5 * time.Second
	if r := recovered(func() {
		v.e.Do(ctx, "panic:do", ttl, func(context.Context) error { panic("boom") })
	}); r != "boom" {
		t.Fatalf("Do's fn panicked: recovered %v; want the panic to go on", r)
	}
	l, err := v.e.TryLock(ctx, "panic:do", ttl)
	if err != nil {
		t.Fatalf("the key after Do's fn panicked: %v; want it released", err)
	}
	l.Unlock(ctx)

	el, err := v.e.NewElection("panic:lead", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if r := recovered(func() {
		el.Lead(ctx, "a", func(context.Context, *engine.Leadership) error { panic("boom") })
	}); r != "boom" {
		t.Fatalf("Lead's fn panicked: recovered %v; want the panic to go on", r)
	}
	ld, err := el.TryCampaign(ctx, "b")
	if err != nil {
		t.Fatalf("the election after Lead's fn panicked: %v; want it resigned", err)
	}
	ld.Resign(ctx)
}

// TestDoJoinsLossAndError: fn failed and the lock was lost before it
// returned: Do's error matches both.
func TestDoJoinsLossAndError(t *testing.T) {
	v := newEnv(t, 3, functional)
	boom := errors.New("boom")
	err := v.e.Do(context.Background(), "join:do", 300*time.Millisecond, func(fctx context.Context) error {
		killMasters(v, []int{0, 1})
		<-fctx.Done()
		return boom
	})
	if !errors.Is(err, boom) || !errors.Is(err, engine.ErrLockLost) {
		t.Fatalf("Do = %v; want fn's error and ErrLockLost", err)
	}
}
