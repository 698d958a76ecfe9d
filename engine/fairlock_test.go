package engine_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
)

// fairChildEnv tells TestFairLockChild what to do: "kind;masters;retry
// delay;waiter timeout": it waits for the lock on key "fair" (kind "fair":
// a FairLock; "plain": Engine.Lock), prints "acquired", holds it 100ms,
// releases it and exits.
const fairChildEnv = "REDLOCK_FAIR_CHILD"

func TestFairLockChild(t *testing.T) {
	spec := os.Getenv(fairChildEnv)
	if spec == "" {
		t.Skip("a waiter process of TestFairLockOrder")
	}
	f := strings.Split(spec, ";")
	retry, _ := time.ParseDuration(f[2])
	wt, _ := time.ParseDuration(f[3])
	e, err := engine.New(engine.Config{Addrs: strings.Split(f[1], ","), FreshMasters: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var l *engine.Lock
	if f[0] == "plain" {
		l, err = e.Lock(ctx, "fair", 10*time.Second, engine.WithRetryDelay(retry))
	} else {
		fl, ferr := e.NewFairLock("fair", wt)
		if ferr != nil {
			t.Fatal(ferr)
		}
		l, err = fl.Lock(ctx, 10*time.Second, engine.WithRetryDelay(retry))
	}
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("acquired")
	time.Sleep(100 * time.Millisecond)
	l.Unlock(ctx)
}

type fairChild struct {
	cmd   *exec.Cmd
	lines chan string
}

func startFairChild(t *testing.T, kind string, masters []string, retry, waiterTimeout time.Duration) *fairChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFairLockChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s;%s;%v;%v", fairChildEnv, kind, strings.Join(masters, ","), retry, waiterTimeout))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	c := &fairChild{cmd: cmd, lines: make(chan string, 8)}
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			if s.Text() == "acquired" {
				c.lines <- s.Text()
			}
		}
		close(c.lines)
	}()
	return c
}

// queued waits until a quorum of masters queue n waiters of the fair lock
// on key "fair".
func queued(t *testing.T, v *env, n int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		count := 0
		for i := range v.direct {
			if r, err := v.exec(i, "ZCARD", "redlock:fair:{fair}:fair:queue"); err == nil && r.Int >= n {
				count++
			}
		}
		if count >= v.e.Quorum() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters not queued on a quorum of masters", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Waiters in three processes get the lock in the order they arrived, even
// though the later ones try more often (a plain Engine.Lock in each
// process, whose FIFO holds only among one engine's waiters, lets the
// most frequent trier win: run with kind "plain" to see it fail).
func TestFairLockOrder(t *testing.T) {
	v := newEnv(t, 5, functional)
	mastertest.RequireReal(t, v.set)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fl, err := v.e.NewFairLock("fair", 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	holder, err := fl.TryLock(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	kind := "fair"
	if os.Getenv("REDLOCK_FAIR_KIND") == "plain" {
		kind = "plain"
	}
	// The first arrival tries least often.
	delays := []time.Duration{300 * time.Millisecond, 100 * time.Millisecond, 10 * time.Millisecond}
	var children []*fairChild
	for i, d := range delays {
		children = append(children, startFairChild(t, kind, v.set.Addrs(), d, 3*time.Second))
		if kind == "fair" {
			queued(t, v, int64(i+1))
		} else {
			time.Sleep(500 * time.Millisecond)
		}
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	var order []int
	got := make(chan int, 3)
	for i, c := range children {
		go func() {
			if _, ok := <-c.lines; ok {
				got <- i
			}
		}()
	}
	for range children {
		select {
		case i := <-got:
			order = append(order, i)
		case <-time.After(20 * time.Second):
			t.Fatalf("acquired so far: %v", order)
		}
	}
	if fmt.Sprint(order) != "[0 1 2]" {
		t.Fatalf("waiters acquired in the order %v; want their arrival order [0 1 2]", order)
	}
}

// A waiter killed while queued holds the others up only until its entry
// expires, the waiter timeout after its last try.
func TestFairLockWaiterKilled(t *testing.T) {
	v := newEnv(t, 5, functional)
	mastertest.RequireReal(t, v.set)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const waiterTimeout = time.Second
	fl, err := v.e.NewFairLock("fair", waiterTimeout)
	if err != nil {
		t.Fatal(err)
	}
	holder, err := fl.TryLock(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	dead := startFairChild(t, "fair", v.set.Addrs(), 50*time.Millisecond, waiterTimeout)
	queued(t, v, 1)
	next := startFairChild(t, "fair", v.set.Addrs(), 50*time.Millisecond, waiterTimeout)
	queued(t, v, 2)
	if err := dead.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case _, ok := <-next.lines:
		if !ok {
			t.Fatal("the second waiter exited without the lock")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second waiter did not get the lock after the first was killed")
	}
	d := time.Since(killed)
	t.Logf("the second waiter got the lock %v after the first was killed (waiter timeout %v)", d.Round(time.Millisecond), waiterTimeout)
	if d > waiterTimeout+time.Second {
		t.Fatalf("the second waiter got the lock %v after the first was killed; want within the waiter timeout %v (+1s)", d, waiterTimeout)
	}
}

// TryLock does not jump the queue: with a waiter queued, a try after the
// holder released is refused (the waiter gets it), and without waiters it
// is granted.
func TestFairLockTryLockRespectsQueue(t *testing.T) {
	v := newEnv(t, 5, functional)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fl, err := v.e.NewFairLock(keyName(t), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	holder, err := fl.TryLock(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		l   *engine.Lock
		err error
	}
	waiter := make(chan result, 1)
	go func() {
		l, err := fl.Lock(ctx, 10*time.Second, engine.WithRetryDelay(200*time.Millisecond))
		waiter <- result{l, err}
	}()
	time.Sleep(300 * time.Millisecond) // queued
	holder.Unlock(ctx)
	if _, err := fl.TryLock(ctx, 10*time.Second); !errors.Is(err, engine.ErrNotAcquired) {
		t.Fatalf("TryLock with a waiter queued, after the holder released: %v; want ErrNotAcquired", err)
	}
	r := <-waiter
	if r.err != nil {
		t.Fatal(r.err)
	}
	r.l.Unlock(ctx)
	l, err := fl.TryLock(ctx, 10*time.Second)
	if err != nil {
		t.Fatalf("TryLock with no waiter left: %v", err)
	}
	l.Unlock(ctx)
	for _, opt := range []engine.Option{engine.WithToken("t"), engine.WithFencing()} {
		if _, err := fl.TryLock(ctx, time.Second, opt); !errors.Is(err, engine.ErrBadArgument) {
			t.Errorf("TryLock with %v: %v; want ErrBadArgument", opt, err)
		}
	}
	for _, wt := range []time.Duration{time.Millisecond, 2 * engine.DefaultMaxTTL} {
		if _, err := v.e.NewFairLock("k", wt); !errors.Is(err, engine.ErrBadArgument) {
			t.Errorf("NewFairLock waiter timeout %v: %v; want ErrBadArgument", wt, err)
		}
	}
}
