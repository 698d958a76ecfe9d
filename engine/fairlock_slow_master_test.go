package engine_test

// A fair lock with masters slow or briefly unreachable: Lock returns a
// lock only while it is valid, an arrival is retried as Engine.Lock
// retries, and a waiter that keeps trying keeps its place.

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
)

// flapMaster keeps master i slow: paused 1.5s, running 30ms, over and over
// until the test ends. Each paused spell is shorter than the per-master
// timeout (1s) plus the connection's stall timeout (1s), so the session
// is never closed as stalled: requests sent while it is paused time out
// and are answered late, as with a master behind a slow network.
func flapMaster(t *testing.T, v *env, i int) {
	mastertest.RequireReal(t, v.set)
	m := v.set.Masters()[i]
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			m.Pause()
			select {
			case <-stop:
				m.Resume()
				return
			case <-time.After(1500 * time.Millisecond):
			}
			m.Resume()
			select {
			case <-stop:
				return
			case <-time.After(30 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
}

// Grant rule (c): a call returns a lock only while it is valid, checked
// last. FairLock.Lock checked validity in finish and then ran leave(), a
// broadcast that waited for every master up to the per-master timeout:
// with one master stalled it returned a lock whose validity had run out.
// leave is now sent without waiting.
//
// Found by the adversarial review of engine.FairLock (issue #34): it
// failed on the first version.
func TestFairLockValidAtReturn(t *testing.T) {
	v := newEnv(t, 5, functional) // MasterTimeout 1s
	mastertest.RequireReal(t, v.set)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := keyName(t)
	fl, err := v.e.NewFairLock(key, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	holder, err := fl.TryLock(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	flapMaster(t, v, 4)
	type result struct {
		l   *engine.Lock
		err error
		at  time.Time
	}
	got := make(chan result, 1)
	go func() {
		l, err := fl.Lock(ctx, 100*time.Millisecond)
		got <- result{l, err, time.Now()}
	}()
	// A is queued (no TryLock can be granted before A); master 4 is not
	// asked (it is paused most of the time).
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		n := 0
		for i := range 4 {
			q, _ := v.exec(i, "ZCARD", "redlock:fair:{"+key+"}:"+key+":queue")
			if q.Int >= 1 {
				n++
			}
		}
		if n >= v.e.Quorum() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("A not queued")
		}
	}
	time.Sleep(700 * time.Millisecond) // out of phase with master 4's running spells
	go holder.Unlock(ctx)
	// While A's Lock is still inside leave(), its 100ms lock expires and
	// another caller takes the key.
	var other *engine.Lock
	deadline := time.Now().Add(5 * time.Second)
	for other == nil && time.Now().Before(deadline) {
		select {
		case r := <-got:
			got <- r
			deadline = time.Now() // A returned first: stop
			continue
		default:
		}
		if l, err := fl.TryLock(ctx, 5*time.Second, engine.WithMasterTimeout(50*time.Millisecond)); err == nil {
			other = l
		}
		time.Sleep(5 * time.Millisecond)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("Lock: %v", r.err)
	}
	left := r.l.Until().Sub(r.at)
	t.Logf("A's Lock returned with %v of validity left; another TryLock got the key later: %v", left, other != nil)
	if left <= 0 {
		t.Fatalf("FairLock.Lock returned a lock whose validity had ended %v before (the grant rule's (c): valid when returned)", -left)
	}
	if other != nil && other.Until().Add(-5*time.Second).Before(r.l.Until()) {
		t.Fatalf("another holder was granted while A's lock was valid")
	}
}

// FairLock.Lock tries again while too few masters answer — its arrival
// too: a quorum briefly unreachable when Lock was called failed it at
// once with ErrUnavailable, where Engine.Lock waits.
//
// Found by the adversarial review of engine.FairLock (issue #34): it
// failed on the first version.
func TestFairLockArrivalRetried(t *testing.T) {
	v := newEnv(t, 5, engine.Config{FreshMasters: true, MasterTimeout: 200 * time.Millisecond})
	mastertest.RequireReal(t, v.set)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	key := keyName(t)
	fl, err := v.e.NewFairLock(key, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	v.pause(2, 3, 4)
	go func() {
		time.Sleep(1500 * time.Millisecond)
		v.set.Masters()[2].Resume()
		v.set.Masters()[3].Resume()
		v.set.Masters()[4].Resume()
	}()
	start := time.Now()
	l, err := fl.Lock(ctx, 5*time.Second)
	if err != nil {
		t.Fatalf("FairLock.Lock with the quorum back after 1.5s (ctx 10s): %v after %v; want the lock (Engine.Lock retries)", err, time.Since(start).Round(time.Millisecond))
	}
	l.Unlock(ctx)
}

// A waiter keeps its place only while its entry is refreshed within the
// waiter timeout. Refreshed only by its tries, with a master stalled
// (every failed try waits the per-master timeout and the cleanup) the
// entry of a waiter that never stopped trying expired between its tries
// and a later arrival was granted first; it is now refreshed every
// quarter of the waiter timeout. Eight independent keys run in parallel.
//
// Found by the adversarial review of engine.FairLock (issue #34): it
// failed on the first version.
func TestFairLockOrderWithSlowMaster(t *testing.T) {
	v := newEnv(t, 5, functional) // MasterTimeout 1s
	mastertest.RequireReal(t, v.set)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	flapMaster(t, v, 4)
	const rounds = 8
	var wg sync.WaitGroup
	violations := make([]string, rounds)
	for r := range rounds {
		wg.Go(func() {
			fl, err := v.e.NewFairLock(fmt.Sprintf("%s:%d", keyName(t), r), 300*time.Millisecond)
			if err != nil {
				violations[r] = err.Error()
				return
			}
			holder, err := fl.TryLock(ctx, 30*time.Second)
			if err != nil {
				violations[r] = "holder: " + err.Error()
				return
			}
			order := make(chan string, 2)
			lock := func(name string) {
				l, err := fl.Lock(ctx, 5*time.Second)
				if err != nil {
					order <- name + ":" + err.Error()
					return
				}
				order <- name
				time.Sleep(50 * time.Millisecond)
				l.Unlock(ctx)
			}
			go lock("A")
			time.Sleep(2500 * time.Millisecond) // A's arrival (two broadcasts, 1s each behind the stalled master) ended
			go lock("B")
			time.Sleep(3000 * time.Millisecond) // B arrived
			holder.Unlock(ctx)
			first, second := <-order, <-order
			if first != "A" {
				violations[r] = fmt.Sprintf("granted in the order %s, %s; A arrived first and kept trying", first, second)
			}
		})
	}
	wg.Wait()
	bad := 0
	for r, s := range violations {
		if s != "" {
			bad++
			t.Logf("key %d: %s", r, s)
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d keys granted a later arrival first", bad, rounds)
	}
}
