package engine_test

// Adversarial review of the hand-off in one round trip (issue #46).

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
)

// waitIdle waits until the only Lock call of v's engine on key has made
// its first attempt (refused) and waits between tries: an Unlock then
// hands the key off in one script, not by a kick.
func waitIdle(t *testing.T, v *env, key string) {
	t.Helper()
	waitHeadIdle(t, v, key)
}

// slowMasters stops masters idx for d (SIGSTOP), so that what is sent to
// them meanwhile is answered about d later, then resumes them.
func slowMasters(t *testing.T, v *env, d time.Duration, idx ...int) {
	t.Helper()
	mastertest.RequireReal(t, v.set)
	ms := v.set.Masters()
	for _, i := range idx {
		if err := ms[i].Pause(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, i := range idx {
			ms[i].Resume()
		}
	})
	time.AfterFunc(d, func() {
		for _, i := range idx {
			ms[i].Resume()
		}
	})
}

// TestHandOffReleaseKeepsItsTimeout: the holder's release, when it goes
// with the waiter's acquire as one script, must keep the release's own
// per-master timeout. sendHandOff gives the one request the earlier of
// the two deadlines, so a waiter's short per-master timeout (its own
// WithMasterTimeout, or the default one of a short TTL) becomes the
// release's: masters that answer within the release's timeout but after
// the waiter's count as failed releases, and Unlock reports ErrUnavailable
// for a release that every master executed (a release sent alone, or
// behind on the same connection as the two commands did before, succeeds).
func TestHandOffReleaseKeepsItsTimeout(t *testing.T) {
	v := newEnv(t, 5, functional) // per-master timeout 1 s
	ctx := context.Background()
	key := keyName(t)
	holder := v.mustLock(key, 10*time.Second)
	got := make(chan error, 1)
	go func() {
		l, err := v.e.Lock(ctx, key, 5*time.Second, engine.WithMasterTimeout(20*time.Millisecond),
			engine.WithRetryDelay(50*time.Millisecond))
		if err == nil {
			defer l.Unlock(ctx)
		}
		got <- err
	}()
	waitIdle(t, v, key)
	before := v.e.Stats().HandOffs
	// Three masters answer 200 ms late: within the release's 1 s timeout.
	slowMasters(t, v, 200*time.Millisecond, 0, 1, 2)
	err := holder.Unlock(ctx)
	if v.e.Stats().HandOffs == before {
		t.Fatal("no hand-off in one script: the test does not test it")
	}
	if err != nil {
		t.Errorf("Unlock: %v; want nil: every master released the holder's token within the release's per-master timeout (1 s), "+
			"but the release was given the waiter's (20 ms)", err)
	}
	if err := <-got; err != nil {
		t.Errorf("Lock: %v", err)
	}
}

// TestHandOffAcquireKeepsItsTimeout: the converse. The waiter's acquire,
// sent with the release as one script, is cut at the release's per-master
// timeout (here the default of the holder's 500 ms TTL, 5 ms) instead of
// its own (WithMasterTimeout(1s)): masters answering 100 ms later count
// as failures, and a Lock allowed one more try fails with ErrUnavailable
// where its own acquire (sent alone or behind the release) is granted.
func TestHandOffAcquireKeepsItsTimeout(t *testing.T) {
	v := newEnv(t, 5, engine.Config{FreshMasters: true}) // default per-master timeout: max(5ms, min(50ms, ttl/100))
	ctx := context.Background()
	key := keyName(t)
	holder := v.mustLock(key, 500*time.Millisecond, engine.WithMasterTimeout(time.Second))
	got := make(chan error, 1)
	go func() {
		l, err := v.e.Lock(ctx, key, 10*time.Second, engine.WithMasterTimeout(time.Second),
			engine.WithMaxTries(2), engine.WithRetryDelay(5*time.Second))
		if err == nil {
			defer l.Unlock(ctx)
		}
		got <- err
	}()
	waitIdle(t, v, key)
	before := v.e.Stats().HandOffs
	slowMasters(t, v, 100*time.Millisecond, 0, 1, 2)
	holder.UnlockAsync(func(error) {}) // its own release may time out: not what is checked
	if v.e.Stats().HandOffs == before {
		t.Fatal("no hand-off in one script: the test does not test it")
	}
	if err := <-got; err != nil {
		if errors.Is(err, engine.ErrUnavailable) {
			t.Errorf("Lock: %v; want the key: the waiter's acquire was cut at the release's per-master timeout (5 ms), not its own (1 s)", err)
		} else {
			t.Errorf("Lock: %v", err)
		}
	}
}
