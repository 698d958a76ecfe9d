package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
)

// TestUnlockExtendAsyncStress: concurrent Unlock (some with contexts that
// end at once or mid-flight), UnlockAsync, Extend (cancelled) and
// ExtendAsync on the same locks, with two masters stopped (short
// releases wait for every answer). Every done is called exactly once, no
// call hangs, and a final Unlock completes.
func TestUnlockExtendAsyncStress(t *testing.T) {
	cfg := functional
	cfg.MasterTimeout = 50 * time.Millisecond
	v := newEnv(t, 5, cfg)
	for round := range 30 {
		if round == 10 {
			v.pause(3, 4)
		}
		if round == 20 {
			v.resume(3, 4)
			v.pause(0, 1, 2)
		}
		var l *engine.Lock
		if round < 20 {
			l = stressLock(t, v, round)
		} else {
			// An attempt with a quorum stopped (it fails; its cleanup
			// waits behind them), then a lock taken while they answer.
			v.e.TryLock(context.Background(), fmt.Sprint("stress:", round), 5*time.Second)
			v.resume(0, 1, 2)
			l = stressLock(t, v, round)
			v.pause(0, 1, 2)
		}
		var wg sync.WaitGroup
		var calls [8]atomic.Int32
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				switch g % 4 {
				case 0:
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(g)*time.Millisecond)
					l.Unlock(ctx)
					cancel()
					calls[g].Add(1)
				case 1:
					ch := make(chan struct{})
					l.UnlockAsync(func(error) {
						if calls[g].Add(1) > 1 {
							t.Errorf("UnlockAsync done twice")
						}
						close(ch)
					})
					select {
					case <-ch:
					case <-time.After(5 * time.Second):
						t.Errorf("UnlockAsync done never called")
					}
				case 2:
					ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
					l.Extend(ctx, 10*time.Second)
					cancel()
					calls[g].Add(1)
				case 3:
					ch := make(chan struct{})
					l.ExtendAsync(10*time.Second, func(error) {
						if calls[g].Add(1) > 1 {
							t.Errorf("ExtendAsync done twice")
						}
						close(ch)
					})
					select {
					case <-ch:
					case <-time.After(5 * time.Second):
						t.Errorf("ExtendAsync done never called")
					}
				}
			}()
		}
		wg.Wait()
		done := make(chan error, 1)
		go func() { done <- l.Unlock(context.Background()) }()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, engine.ErrUnlocked) && !errors.Is(err, engine.ErrLockLost) {
				t.Errorf("round %d: final Unlock: %v", round, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: final Unlock hung (relMu never unlocked?)", round)
		}
	}
}

// stressLock takes the lock a round of TestUnlockExtendAsyncStress works
// on. The acquisition is the premise, not the subject: it gets a per-master
// timeout a loaded host's running masters answer within (the engine's
// 50 ms, which Unlock and Extend keep, was missed by every master at once
// under load), and is tried again — on a fresh key, clear of what a failed
// attempt left on a master that answered late — while too few masters
// answered (a stopped master's connection may still be reconnecting).
func stressLock(t *testing.T, v *env, round int) *engine.Lock {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for try := 0; ; try++ {
		l, err := v.e.TryLock(context.Background(), fmt.Sprint("stress:", round, ":", try), 5*time.Second,
			engine.WithMasterTimeout(time.Second))
		if err == nil {
			return l
		}
		if !errors.Is(err, engine.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("round %d: TryLock: %v", round, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
