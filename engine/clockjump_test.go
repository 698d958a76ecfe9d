package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/enginex"
	"github.com/redlock-dev/redlock/internal/localmaster"
	"github.com/redlock-dev/redlock/internal/test/clockfront"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
)

// clockJumpEntries are the engine's acquisitions: each takes key for
// owner (the reentrant lock's owner) and ttl; granted reports a grant.
var clockJumpEntries = []struct {
	name string
	take func(ctx context.Context, e *engine.Engine, key, owner string, ttl time.Duration) (granted bool, err error)
}{
	{"TryLock", func(ctx context.Context, e *engine.Engine, key, owner string, ttl time.Duration) (bool, error) {
		l, err := e.TryLock(ctx, key, ttl)
		return l != nil, err
	}},
	{"TryLock fenced", func(ctx context.Context, e *engine.Engine, key, owner string, ttl time.Duration) (bool, error) {
		l, err := e.TryLock(ctx, key, ttl, engine.WithFencing())
		return l != nil, err
	}},
	{"Reentrant.TryLock", func(ctx context.Context, e *engine.Engine, key, owner string, ttl time.Duration) (bool, error) {
		r, err := e.NewReentrant(key, owner)
		if err != nil {
			return false, err
		}
		err = r.TryLock(ctx, ttl)
		return err == nil, err
	}},
	{"RWLock.TryLock", func(ctx context.Context, e *engine.Engine, key, owner string, ttl time.Duration) (bool, error) {
		rw, err := e.NewRWLock(key)
		if err != nil {
			return false, err
		}
		l, err := rw.TryLock(ctx, ttl)
		return l != nil, err
	}},
	{"Semaphore.TryAcquire", func(ctx context.Context, e *engine.Engine, key, owner string, ttl time.Duration) (bool, error) {
		s, err := e.NewSemaphore(key, 1)
		if err != nil {
			return false, err
		}
		l, err := s.TryAcquire(ctx, ttl)
		return l != nil, err
	}},
	{"TryLockAll", func(ctx context.Context, e *engine.Engine, key, owner string, ttl time.Duration) (bool, error) {
		ls, err := e.TryLockAll(ctx, []string{key}, ttl)
		return ls != nil, err
	}},
}

// TestClockJumpDetected: one engine holds each kind's lock on five
// masters; the clocks of masters 0-2 then jump forward by more than the
// TTL (their TIME runs ahead and every key's TTL is cut by the jump,
// clockfront), so those three masters lose the holder's keys while the
// holder's validity lasts. A second engine that read the masters' clocks
// before the jump (its connections' handshakes) sees the jump in the
// TIME that starts the acquisition's batch, quarantines the three masters
// before their grants are counted, and is refused: unavailable, never
// granted. With the clock check off (DisableClockCheck), the same
// acquisition is granted while the holder is valid — two holders: the
// test can fail.
func TestClockJumpDetected(t *testing.T) {
	set := mastertest.Start(t, 5)
	mastertest.RequireReal(t, set)
	for _, off := range []bool{false, true} {
		name := "check on"
		if off {
			name = "check off"
		}
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			holder, contender, fronts := jumpEngines(t, ctx, set, off)
			prefix := "cj:" + name + ":"
			start := time.Now()
			for _, en := range clockJumpEntries {
				if ok, err := en.take(ctx, holder, prefix+en.name, "holder", 8*time.Second); !ok {
					t.Fatalf("%s: the holder: %v", en.name, err)
				}
			}
			// A grant answers at a quorum: a master's write still on its
			// way would land after the jump, not be expired by it.
			waitAnswered(t, holder)
			for _, f := range fronts {
				if err := f.Jump(ctx, 9*time.Second); err != nil {
					t.Fatal(err)
				}
			}
			for _, en := range clockJumpEntries {
				granted, err := en.take(ctx, contender, prefix+en.name, "contender", time.Second)
				if time.Since(start) > 7*time.Second {
					t.Fatalf("%s: the holder's 8s lock is about to run out; the test proves nothing", en.name)
				}
				switch {
				case off && !granted:
					t.Errorf("%s, check off: %v; want the unsafe grant the check prevents (masters 0-2 lost the key early)", en.name, err)
				case !off && granted:
					t.Errorf("%s: granted while the holder is valid, after masters 0-2's clocks jumped", en.name)
				case !off && !errors.Is(err, engine.ErrUnavailable):
					t.Errorf("%s: %v; want ErrUnavailable (the jumped masters' grants do not count)", en.name, err)
				}
			}
			st := contender.Stats()
			if !off && st.ClockJumpsAhead < 3 {
				t.Errorf("Stats.ClockJumpsAhead = %d; want a jump counted on each of the 3 masters", st.ClockJumpsAhead)
			}
			if off && st.ClockJumpsAhead != 0 {
				t.Errorf("check off, yet ClockJumpsAhead = %d", st.ClockJumpsAhead)
			}
		})
	}
}

// jumpEngines starts a holder and a contender engine over set, the first
// 3 masters behind clockfront fronts (returned), and waits until the
// contender is connected (its handshakes read the masters' clocks); off
// turns the contender's clock check off. Both close when t ends.
func jumpEngines(t *testing.T, ctx context.Context, set *localmaster.Set, off bool) (holder, contender *engine.Engine, fronts []*clockfront.Front) {
	t.Helper()
	addrs, fronts := frontsFor(t, set.Addrs(), 3)
	cfg := engine.Config{Addrs: addrs, FreshMasters: true, MasterTimeout: 500 * time.Millisecond, MaxTTL: 10 * time.Second}
	holder, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Close() })
	cfg.DisableClockCheck = off
	contender, err = engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { contender.Close() })
	if _, err := contender.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return holder, contender, fronts
}

// waitAnswered waits until e has no request in flight on any master.
func waitAnswered(t *testing.T, e *engine.Engine) {
	t.Helper()
	tr := enginex.Open(e)
	deadline := time.Now().Add(5 * time.Second)
	for i := range e.Masters() {
		for _, c := range tr.Conns(i) {
			for c.Stats().Pending > 0 {
				if time.Now().After(deadline) {
					t.Fatalf("master %d: %d requests still unanswered", i, c.Stats().Pending)
				}
				time.Sleep(time.Millisecond)
			}
		}
	}
}

// frontsFor puts clockfront fronts before the first n of addrs (closed
// when t ends) and returns the addresses to use and the fronts.
func frontsFor(t *testing.T, addrs []string, n int) ([]string, []*clockfront.Front) {
	addrs = append([]string(nil), addrs...)
	var fronts []*clockfront.Front
	for i := range n {
		f := clockfront.Start(t, addrs[i])
		fronts = append(fronts, f)
		addrs[i] = f.Addr()
	}
	return addrs, fronts
}
