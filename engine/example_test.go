package engine_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/redlock-dev/redlock/engine"
)

func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// Five independent masters: in-process miniredis servers here, your
	// redis-server hosts in production.
	var addrs []string
	for range 5 {
		m, err := miniredis.Run()
		if err != nil {
			fmt.Println(err)
			return
		}
		defer m.Close()
		addrs = append(addrs, m.Addr())
	}

	e, err := engine.New(engine.Config{FreshMasters: true,
		Addrs: addrs,
		// Generous for a busy test machine; the default is ttl/100
		// clamped to [5ms, 50ms].
		MasterTimeout: 500 * time.Millisecond,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer e.Close()

	l, err := e.TryLock(ctx, "orders:42", 10*time.Second)
	fmt.Println("acquired:", err == nil)
	if err != nil {
		return
	}
	fmt.Println("valid:", l.Valid())

	_, err = e.TryLock(ctx, "orders:42", 10*time.Second)
	fmt.Println("second attempt refused:", errors.Is(err, engine.ErrNotAcquired))

	fmt.Println("released:", l.Unlock(ctx) == nil)
	// Output:
	// acquired: true
	// valid: true
	// second attempt refused: true
	// released: true
}

// A fencing token goes with every write to the protected storage, which
// refuses tokens lower than the highest it accepted: a holder that was
// paused past its lock's validity cannot overwrite a newer holder's work.
func ExampleWithFencing() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e, stop, err := exampleEngine(3, 500*time.Millisecond)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()

	// The storage's side of fencing.
	var highest int64
	write := func(token int64) bool {
		if token < highest {
			return false
		}
		highest = token
		return true
	}

	first, err := e.TryLock(ctx, "report", time.Second, engine.WithFencing())
	if err != nil {
		fmt.Println(err)
		return
	}
	stale := first.FencingToken()
	first.Unlock(ctx) // (or: its validity ran out while it was paused)

	second, err := e.TryLock(ctx, "report", time.Second, engine.WithFencing())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("tokens increase:", second.FencingToken() > stale)
	fmt.Println("new holder writes:", write(second.FencingToken()))
	fmt.Println("paused holder writes:", write(stale))
	second.Unlock(ctx)
	// Output:
	// tokens increase: true
	// new holder writes: true
	// paused holder writes: false
}

// exampleEngine starts n in-process masters and an Engine over them with
// per-master timeout mt (generous: examples run on busy test machines).
func exampleEngine(n int, mt time.Duration) (*engine.Engine, func(), error) {
	var ms []*miniredis.Miniredis
	stop := func() {
		for _, m := range ms {
			m.Close()
		}
	}
	var addrs []string
	for range n {
		m, err := miniredis.Run()
		if err != nil {
			stop()
			return nil, nil, err
		}
		ms = append(ms, m)
		addrs = append(addrs, m.Addr())
	}
	e, err := engine.New(engine.Config{FreshMasters: true, Addrs: addrs, MasterTimeout: mt})
	if err != nil {
		stop()
		return nil, nil, err
	}
	return e, func() { e.Close(); stop() }, nil
}

// With WithAutoExtend the engine's watchdog keeps the lock for as long as
// the work takes, extending it about every third of its TTL; Done and Err
// report the end of the lock.
func ExampleWithAutoExtend() {
	e, stop, err := exampleEngine(3, 300*time.Millisecond)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()
	ctx := context.Background()

	l, err := e.TryLock(ctx, "nightly-job", time.Second, engine.WithAutoExtend(time.Hour))
	if err != nil {
		fmt.Println(err)
		return
	}
	time.Sleep(1500 * time.Millisecond) // longer than the TTL: work goes on
	fmt.Println("still held:", l.Err() == nil && l.Valid())
	fmt.Println("extended:", e.Stats().Extended >= 2)

	l.Unlock(ctx)
	<-l.Done()
	fmt.Println("ended:", l.Err())
	// Output:
	// still held: true
	// extended: true
	// ended: engine: unlocked
}

// Lock.Context hands the lock's lifetime to the work it protects: the
// context is cancelled when the lock is lost — here when the watchdog's
// bound (1.5 s) is reached — and its cause says why.
func ExampleLock_Context() {
	e, stop, err := exampleEngine(3, 300*time.Millisecond)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()

	l, err := e.TryLock(context.Background(), "report", time.Second, engine.WithAutoExtend(1500*time.Millisecond))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := l.Context(context.Background())
	defer cancel()

	<-ctx.Done() // the work would stop here
	fmt.Println("lost:", errors.Is(context.Cause(ctx), engine.ErrLockLost))
	fmt.Println("bound reached:", errors.Is(context.Cause(ctx), engine.ErrMaxHold))
	// Output:
	// lost: true
	// bound reached: true
}

// Engine.Do holds a lock around a function: it waits for the key, keeps
// the lock while fn runs, cancels fn's context if the lock is lost, and
// releases it when fn returns.
func ExampleEngine_Do() {
	e, stop, err := exampleEngine(3, 300*time.Millisecond)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()
	ctx := context.Background()

	err = e.Do(ctx, "invoice:7", time.Second, func(ctx context.Context) error {
		l := engine.LockFrom(ctx)
		fmt.Println("fenced:", l.FencingToken() > 0)
		time.Sleep(1500 * time.Millisecond) // longer than the TTL: the watchdog keeps it
		_, err := e.TryLock(ctx, "invoice:7", time.Second)
		fmt.Println("held meanwhile:", errors.Is(err, engine.ErrNotAcquired))
		return ctx.Err() // nil: the lock was not lost
	}, engine.WithFencing())
	fmt.Println("done:", err)
	l, err := e.TryLock(ctx, "invoice:7", time.Second)
	fmt.Println("free after:", err == nil)
	l.Unlock(ctx)
	// Output:
	// fenced: true
	// held meanwhile: true
	// done: <nil>
	// free after: true
}

// TryLockAsync starts an acquisition without a goroutine waiting for it:
// the result comes to a callback on the master connection that completes
// it. The callback must not block: hand the lock to a goroutine to use it.
func ExampleEngine_TryLockAsync() {
	e, stop, err := exampleEngine(3, 300*time.Millisecond)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()
	ctx := context.Background()

	results := make(chan error, 3)
	locks := make(chan *engine.Lock, 3)
	for _, key := range []string{"job:1", "job:2", "job:1"} {
		e.TryLockAsync(ctx, key, 10*time.Second, func(l *engine.Lock, err error) {
			if err == nil {
				locks <- l
			}
			results <- err
		})
	}
	granted, held := 0, 0
	for range 3 {
		switch err := <-results; {
		case err == nil:
			granted++
		case errors.Is(err, engine.ErrNotAcquired):
			held++
		}
	}
	fmt.Println("granted:", granted, "held:", held)
	close(locks)
	for l := range locks {
		l.Unlock(ctx)
	}
	// Output:
	// granted: 2 held: 1
}
