package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
)

// TestDo: fn's error comes back and the key is released after it; a held
// key keeps fn from running until ctx ends; a lock lost while fn runs
// cancels fn's context with the loss as its cause, and Do returns the
// loss.
func TestDo(t *testing.T) {
	cfg := functional
	cfg.MasterTimeout = 100 * time.Millisecond
	v := newEnv(t, 5, cfg)
	ctx := context.Background()

	boom := errors.New("boom")
	if err := v.e.Do(ctx, "do:a", time.Second, func(context.Context) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Do with a failing fn: %v; want fn's error", err)
	}
	l := v.mustLock("do:a", time.Second) // released after fn
	l.Unlock(ctx)

	held := v.mustLock("do:b", 5*time.Second)
	wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	ran := false
	err := v.e.Do(wctx, "do:b", time.Second, func(context.Context) error { ran = true; return nil })
	cancel()
	if ran || err == nil {
		t.Fatalf("Do on a held key: ran %v, err %v; want not run, an error", ran, err)
	}
	held.Unlock(ctx)

	var cause error
	err = v.e.Do(ctx, "do:c", time.Second, func(fctx context.Context) error {
		if engine.LockFrom(fctx) == nil {
			t.Error("LockFrom: nil inside fn")
		}
		killMasters(v, []int{0, 2, 4})
		select {
		case <-fctx.Done():
			cause = context.Cause(fctx)
		case <-time.After(5 * time.Second):
			t.Error("fn's context was not cancelled when the lock was lost")
		}
		return nil
	})
	if !errors.Is(cause, engine.ErrLockLost) || !errors.Is(err, engine.ErrLockLost) {
		t.Fatalf("lock lost while fn ran: cause %v, Do %v; want both ErrLockLost", cause, err)
	}
}
