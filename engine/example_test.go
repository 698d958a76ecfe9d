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
