package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/enginex"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
)

// TestExtendFailureLowersDeadline: after an Extend that did not succeed,
// the lock's deadline is never later than what a quorum may hold: some
// masters took the new, shorter TTL.
func TestExtendFailureLowersDeadline(t *testing.T) {
	v := newEnv(t, 5, engine.Config{FreshMasters: true, MasterTimeout: 300 * time.Millisecond})
	mastertest.RequireReal(t, v.set)
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		cancel bool // the caller gives up before the answers
	}{{"no quorum", false}, {"cancelled", true}} {
		t.Run(tc.name, func(t *testing.T) {
			l := v.mustLock(keyName(t), 10*time.Second)
			v.pause(0, 1, 2)
			defer v.resume(0, 1, 2)
			ectx := ctx
			if tc.cancel {
				var cancel context.CancelFunc
				ectx, cancel = context.WithTimeout(ctx, 20*time.Millisecond)
				defer cancel()
			}
			start := time.Now()
			err := l.Extend(ectx, 300*time.Millisecond)
			if err == nil {
				t.Fatal("Extend with 3 of 5 masters paused succeeded")
			}
			if tc.cancel != errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Extend: %v", err)
			}
			if limit := start.Add(300 * time.Millisecond); l.Until().After(limit) {
				t.Fatalf("after a failed Extend to 300ms the deadline is %v later than start+300ms (it kept the old 10s)", l.Until().Sub(limit))
			}
		})
	}
}

// TestUnlockRetry: an Unlock that timed out on stalled masters can be
// called again; it asks only the masters that did not answer, and reports
// the quorum over all answers.
func TestUnlockRetry(t *testing.T) {
	v := newEnv(t, 5, engine.Config{FreshMasters: true, MasterTimeout: 300 * time.Millisecond})
	mastertest.RequireReal(t, v.set)
	ctx := context.Background()
	key := keyName(t)
	l := v.mustLock(key, 10*time.Second)
	v.pause(0, 1, 2)
	err := l.Unlock(ctx)
	if !errors.Is(err, engine.ErrLockLost) || !errors.Is(err, engine.ErrUnavailable) {
		v.resume(0, 1, 2)
		t.Fatalf("Unlock with 3 of 5 paused: %v; want ErrLockLost and ErrUnavailable", err)
	}
	if l.Valid() {
		t.Fatal("Valid after Unlock")
	}
	v.resume(0, 1, 2)
	before := v.e.Stats()
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("retried Unlock: %v; want the quorum result (released)", err)
	}
	if st := v.e.Stats(); st.Released != before.Released+1 {
		t.Fatalf("Released %d → %d", before.Released, st.Released)
	}
	v.waitGone(key, 5*time.Second)
	if err := l.Unlock(ctx); !errors.Is(err, engine.ErrUnlocked) || errors.Is(err, engine.ErrLockLost) {
		t.Fatalf("Unlock after a successful one: %v, want ErrUnlocked (and not ErrLockLost: nothing was lost)", err)
	}
}

// TestKeyPinnedToOneConnection: with several connections per master, every
// command on one key (lock operations and keyed Broadcasts) goes over one
// connection per master, so the cleanup
// of a failed attempt cannot overtake a later grant of the same key (and
// token) sent on another connection.
func TestKeyPinnedToOneConnection(t *testing.T) {
	v := newEnv(t, 3, engine.Config{FreshMasters: true, ConnsPerMaster: 4, MasterTimeout: time.Second}) // generous: -race on 2 noisy cores
	ctx := context.Background()
	before := make([]uint64, 4)
	for k, c := range enginex.Open(v.e).Conns(0) {
		before[k] = c.Stats().Requests
	}
	for range 20 {
		l, err := v.e.TryLock(ctx, "pinned", time.Second, engine.WithToken("same"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := v.e.TryLock(ctx, "pinned", time.Second, engine.WithToken("other")); !errors.Is(err, engine.ErrNotAcquired) {
			t.Fatalf("second TryLock: %v", err)
		}
		if err := l.Extend(ctx, time.Second); err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		// Keyed commands sent by Broadcast (the proxy's script acquires and
		// their cleanups) take the key's connection too.
		if _, err := enginex.Open(v.e).Broadcast(ctx, "pinned", 0, nil, []byte("*2\r\n$3\r\nGET\r\n$6\r\npinned\r\n")); err != nil {
			t.Fatal(err)
		}
	}
	used := 0
	for k, c := range enginex.Open(v.e).Conns(0) {
		if c.Stats().Requests != before[k] {
			used++
		}
	}
	if used != 1 {
		t.Fatalf("one key's commands went over %d of 4 connections to master 0", used)
	}
}
