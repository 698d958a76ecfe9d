package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
)

// TestPresetsManyMasters: an operation's presets (the masters its fan-out
// records instead of sending to: a failed acquisition's cleanup that
// created nothing, a retried release) hold for every master, with the
// presets in the op itself (8 masters) and past it (9), and pooled ops
// never share them: failed caller-token acquisitions of held keys, whose
// cleanups preset every master, run beside acquire-release cycles, whose
// releases preset none. A shared or short preset would leave a released
// key on a master, remove a held key by its token, or index out of range.
func TestPresetsManyMasters(t *testing.T) {
	for _, n := range []int{8, 9} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			v := newEnv(t, n, engine.Config{FreshMasters: true, MasterTimeout: time.Second})
			ctx := context.Background()
			const held = 3
			for j := range held {
				l := v.mustLock(fmt.Sprintf("pm:held:%d", j), time.Minute, engine.WithToken(fmt.Sprintf("tok-%d", j)))
				v.waitHeld(l.Key(), l.Token())
			}
			var wg sync.WaitGroup
			errs := make(chan error, 100)
			for j := range held { // each failed attempt's cleanup presets every master
				wg.Add(1)
				go func() {
					defer wg.Done()
					key, tok := fmt.Sprintf("pm:held:%d", j), fmt.Sprintf("tok-%d", j)
					for range 100 {
						if _, err := v.e.TryLock(ctx, key, time.Minute, engine.WithToken(tok)); !errors.Is(err, engine.ErrNotAcquired) {
							errs <- fmt.Errorf("TryLock of the held %s with its own token: %v, want ErrNotAcquired", key, err)
							return
						}
					}
				}()
			}
			cycled := make([]string, 3)
			for g := range cycled { // releases that preset nothing
				cycled[g] = fmt.Sprintf("pm:cycle:%d", g)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 100 {
						l, err := v.e.TryLock(ctx, cycled[g], time.Minute)
						if err != nil {
							errs <- fmt.Errorf("TryLock %s: %v", cycled[g], err)
							return
						}
						if err := l.Unlock(ctx); err != nil {
							errs <- fmt.Errorf("Unlock %s: %v", cycled[g], err)
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			for _, key := range cycled {
				v.waitGone(key, 5*time.Second) // every master was released
			}
			for j := range held {
				key, tok := fmt.Sprintf("pm:held:%d", j), fmt.Sprintf("tok-%d", j)
				if vals := v.values(key); countOf(vals, tok) != n {
					t.Errorf("%s: masters hold %q, want %q on all %d (a cleanup released what it did not create)", key, vals, tok, n)
				}
			}

			// A retried release: the masters the first release reached
			// are preset; the second reaches the rest.
			l := v.mustLock("pm:retry", time.Minute)
			v.waitHeld("pm:retry", l.Token())
			paused := make([]int, 0, n)
			for i := n - v.e.Quorum(); i < n; i++ {
				paused = append(paused, i) // the last ones: past the op's own 8 when n is 9
			}
			v.pause(paused...)
			if err := l.Unlock(ctx); err == nil {
				t.Fatalf("Unlock with %d of %d masters paused: nil, want an error", len(paused), n)
			}
			v.resume(paused...)
			// Stale replies from before the pause come back first.
			deadline := time.Now().Add(10 * time.Second)
			for {
				err := l.Unlock(ctx)
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the retried Unlock: %v", err)
				}
				time.Sleep(50 * time.Millisecond)
			}
			v.waitGone("pm:retry", 5*time.Second)
		})
	}
}
