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

	e, err := engine.New(engine.Config{
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
	var addrs []string
	for range 3 {
		m, err := miniredis.Run()
		if err != nil {
			fmt.Println(err)
			return
		}
		defer m.Close()
		addrs = append(addrs, m.Addr())
	}
	e, err := engine.New(engine.Config{Addrs: addrs, MasterTimeout: 500 * time.Millisecond})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer e.Close()

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
