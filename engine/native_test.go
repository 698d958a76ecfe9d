package engine_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/internal/test/nativemaster"
)

// TestNativeCommands: over five masters of which two have DELEX, one
// DELIFEQ, one only SET IFEQ and one nothing (Debian's Redis 7.0), each
// master gets the native release and extension it has and the scripts
// otherwise: the fallback is per master, and the lock works the same
// (held on every master, extended on every master, gone after Unlock;
// no two holders among concurrent lockers).
func TestNativeCommands(t *testing.T) {
	set := mastertest.Start(t, 5)
	mastertest.RequireReal(t, set)
	fronts, addrs := nativemaster.StartMixed(t, set.Addrs())
	// The fronts answer one command at a time per connection: a loaded
	// machine must not turn that into timeouts.
	e, err := engine.New(engine.Config{Addrs: addrs, FreshMasters: true, MasterTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	st, err := e.WaitReady(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"DELEX", "DELEX", "DELIFEQ", "", ""} {
		if got := st[i].Info.DeleteIfEqual; got != want {
			t.Fatalf("master %d: DeleteIfEqual %q, want %q", i, got, want)
		}
		if got := st[i].Info.SetIfEqual; got != (i < 4) {
			t.Fatalf("master %d: SetIfEqual %v", i, got)
		}
	}
	direct := make([]*conn.Conn, 5)
	for i, a := range set.Addrs() {
		if direct[i], err = conn.Dial(ctx, a, conn.Config{}); err != nil {
			t.Fatal(err)
		}
		defer direct[i].Close()
	}
	counts := func(i int) [4]int {
		f := fronts[i]
		return [4]int{f.Count("SET"), f.Count("DELEX"), f.Count("DELIFEQ"), f.Count("EVALSHA") + f.Count("EVAL")}
	}
	var before [5][4]int
	for i := range fronts {
		before[i] = counts(i)
	}

	key := keyName(t)
	l, err := e.Lock(ctx, key, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Extend(ctx, 40*time.Second); err != nil {
		t.Fatal(err)
	}
	check := func(what string, ok func(i int) bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for i := range direct {
			for !ok(i) {
				if time.Now().After(deadline) {
					t.Fatalf("master %d: %s", i, what)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
	}
	check("not extended to more than 10 s", func(i int) bool {
		r, err := direct[i].Exec(ctx, "PTTL", key)
		return err == nil && r.Int > 10000
	})
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	check("still holds the key after Unlock", func(i int) bool {
		r, err := direct[i].Exec(ctx, "EXISTS", key)
		return err == nil && r.Int == 0
	})
	// SET (acquire, extension), DELEX, DELIFEQ, scripts: per master.
	want := [5][4]int{{2, 1, 0, 0}, {2, 1, 0, 0}, {2, 0, 1, 0}, {2, 0, 0, 1}, {1, 0, 0, 2}}
	check("did not get the commands it has", func(i int) bool {
		got := counts(i)
		for j := range got {
			got[j] -= before[i][j]
		}
		return got == want[i]
	})

	// Concurrent lockers on a few keys: releases are merged on the
	// masters without native commands and sent one by one on the others
	// — those not sent with the next waiter's acquire as one script
	// (the hand-off, Stats.HandOffs), on every master.
	handOffs := e.Stats().HandOffs
	var inside [4]atomic.Int32
	var overlaps, cycles atomic.Int64
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := g % 4
			for range 40 {
				l, err := e.Lock(ctx, key+":"+string(rune('a'+k)), 5*time.Second)
				if err != nil {
					t.Error(err)
					return
				}
				if inside[k].Add(1) != 1 {
					overlaps.Add(1)
				}
				inside[k].Add(-1)
				if err := l.Unlock(ctx); err != nil {
					t.Error(err)
					return
				}
				cycles.Add(1)
			}
		}()
	}
	wg.Wait()
	if overlaps.Load() != 0 || cycles.Load() != 16*40 {
		t.Fatalf("%d overlaps in %d cycles", overlaps.Load(), cycles.Load())
	}
	handOffs = e.Stats().HandOffs - handOffs
	if fronts[0].Count("DELEX")+int(handOffs) < 16*40/2 || fronts[2].Count("DELIFEQ")+int(handOffs) < 16*40/2 {
		t.Fatalf("native releases: DELEX %d, DELIFEQ %d, and %d hand-offs", fronts[0].Count("DELEX"), fronts[2].Count("DELIFEQ"), handOffs)
	}
}
