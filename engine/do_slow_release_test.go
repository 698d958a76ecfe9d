package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
)

// TestDoOutcomeAfterSlowRelease (this round's review): fn returns while
// the lock is valid by a few ms; Do's release then waits for paused
// masters, and the validity ends before Do returns: Do must report the
// loss (property h: "if the validity ended before it returns"). Before the
// fix Do read the loss before the release and returned nil (2 of 10 runs).
func TestDoOutcomeAfterSlowRelease(t *testing.T) {
	set := mastertest.Start(t, 3)
	ms := set.Masters()
	var addrs []string
	for _, m := range ms {
		addrs = append(addrs, m.Addr())
	}
	e, err := engine.New(engine.Config{Addrs: addrs, FreshMasters: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := e.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	var until time.Time
	err = e.Do(ctx, "slow-release-do", 400*time.Millisecond, func(fctx context.Context) error {
		l := engine.LockFrom(fctx)
		ms[0].Pause()
		ms[1].Pause()
		for l.Remaining() > 3*time.Millisecond {
		}
		until = l.Until()
		return nil
	})
	returned := time.Now()
	ms[0].Resume()
	ms[1].Resume()
	t.Logf("Do returned %v, %v after the validity's end", err, returned.Sub(until))
	if err == nil && returned.After(until) {
		t.Errorf("Do returned nil %v after the lock's validity ended", returned.Sub(until))
	}
}

// TestLeadOutcomeAfterSlowResign: as above for Election.Lead (its Resign
// waits for the paused masters).
func TestLeadOutcomeAfterSlowResign(t *testing.T) {
	set := mastertest.Start(t, 3)
	ms := set.Masters()
	var addrs []string
	for _, m := range ms {
		addrs = append(addrs, m.Addr())
	}
	e, err := engine.New(engine.Config{Addrs: addrs, FreshMasters: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := e.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	el, err := e.NewElection("slow-release-lead", 400*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	var until time.Time
	err = el.Lead(ctx, "v", func(fctx context.Context, ld *engine.Leadership) error {
		l := ld.Lock()
		ms[0].Pause()
		ms[1].Pause()
		for l.Remaining() > 3*time.Millisecond {
		}
		until = l.Until()
		return nil
	})
	returned := time.Now()
	ms[0].Resume()
	ms[1].Resume()
	t.Logf("Lead returned %v, %v after the validity's end", err, returned.Sub(until))
	if err == nil && returned.After(until) {
		t.Errorf("Lead returned nil %v after the leadership's validity ended", returned.Sub(until))
	}
}
