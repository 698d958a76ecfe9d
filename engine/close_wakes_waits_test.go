package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/test/check"
)

// TestCloseWakesRetryingWaits: Engine.Close ends the waits that retry —
// Semaphore.Acquire, RWLock.Lock and RLock — with ErrClosed at once, as it
// ends Engine.Lock's: they slept out their retry delay (up to twice it)
// before noticing, holding their goroutine past Close (found by the
// review of issue #46).
func TestCloseWakesRetryingWaits(t *testing.T) {
	for _, c := range []struct {
		name string
		wait func(t *testing.T, e *engine.Engine, key string) func(context.Context) error
	}{
		{"Semaphore.Acquire", func(t *testing.T, e *engine.Engine, key string) func(context.Context) error {
			s, _ := e.NewSemaphore(key, 1)
			if _, err := s.TryAcquire(context.Background(), 20*time.Second); err != nil {
				t.Fatal(err)
			}
			return func(ctx context.Context) error {
				_, err := s.Acquire(ctx, 5*time.Second, engine.WithRetryDelay(10*time.Second))
				return err
			}
		}},
		{"RWLock.Lock", func(t *testing.T, e *engine.Engine, key string) func(context.Context) error {
			rw, _ := e.NewRWLock(key)
			if _, err := rw.TryRLock(context.Background(), 20*time.Second); err != nil {
				t.Fatal(err)
			}
			return func(ctx context.Context) error {
				_, err := rw.Lock(ctx, 5*time.Second, engine.WithRetryDelay(10*time.Second))
				return err
			}
		}},
		{"RWLock.RLock", func(t *testing.T, e *engine.Engine, key string) func(context.Context) error {
			rw, _ := e.NewRWLock(key)
			if _, err := rw.TryLock(context.Background(), 20*time.Second); err != nil {
				t.Fatal(err)
			}
			return func(ctx context.Context) error {
				_, err := rw.RLock(ctx, 5*time.Second, engine.WithRetryDelay(10*time.Second))
				return err
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := newEnv(t, 3, functional)
			wait := c.wait(t, v.e, keyName(t))
			failed := v.e.Stats().Failed
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res := make(chan error, 1)
			go func() { res <- wait(ctx) }()
			check.Eventually(t, 10*time.Second, "the first try refused (the wait sleeping before the next)", func() bool { return v.e.Stats().Failed > failed })
			v.e.Close()
			select {
			case err := <-res:
				if !errors.Is(err, engine.ErrClosed) {
					t.Fatalf("%s after Close: %v, want ErrClosed", c.name, err)
				}
			case <-time.After(2 * time.Second):
				t.Fatalf("%s still waiting 2 s after Engine.Close returned", c.name)
			}
		})
	}
}
