package engine_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/localmaster"
)

func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// Five local masters (redis-server processes, or embedded ones).
	masters, err := localmaster.Start(ctx, localmaster.Options{N: 5, Notice: io.Discard})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer masters.Close()

	e, err := engine.New(engine.Config{
		Addrs: masters.Addrs(),
		// Generous for a busy test machine; the default is ttl/100
		// clamped to [5ms, 50ms].
		MasterTimeout: 500 * time.Millisecond,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer e.Close()
	if err := e.WaitReady(ctx); err != nil {
		fmt.Println(err)
		return
	}

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
