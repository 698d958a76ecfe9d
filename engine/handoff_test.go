package engine_test

// The FIFO hand-off: an attempt begun by Unlock for a waiter elsewhere is
// judged at its decision, and Lock returns it only while it is valid.

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
)

// pauseOnRefusal stops master 4 when the armed acquisition attempt ends
// refused, then (on its own goroutine, 50 ms later) runs after.
type pauseOnRefusal struct {
	engine.NopObserver
	armed atomic.Bool
	v     atomic.Pointer[env]
	after atomic.Value // func()
}

func (o *pauseOnRefusal) Acquire(ev engine.AcquireEvent) {
	if ev.Result != engine.AcquireGranted && o.armed.CompareAndSwap(true, false) {
		o.v.Load().set.Masters()[4].Pause()
		f := o.after.Load().(func())
		go func() { time.Sleep(50 * time.Millisecond); f() }()
	}
}

// TestHandOffCollectedLate: the FIFO hand-off's attempt (begun by
// Unlock in waitRoom.released with the waiter elsewhere) is now judged at
// its decision, on the master's reader (acquisition.judge); the waiter
// collects it with finish whenever it comes back to its loop, and finish
// returns a.res without looking at the clock. Before ff74085 finish ran
// the verdict when the waiter collected the attempt. Here the waiter is in
// holdLeft (its PTTL broadcast waits for a stopped master, 1 s) when the
// holder unlocks; the hand-off attempt of a 300 ms lock is granted at
// once, and Lock returns it about a second later, long expired.
//
// Found by the adversarial review of TryLockAsync (the acquisition as a
// callback chain): it failed before its fix.
func TestHandOffCollectedLate(t *testing.T) {
	v, obs := collectedLateEnv(t)
	ctx := context.Background()
	key := keyName(t)

	holder := v.mustLock(key, 10*time.Second)
	obs.after.Store(func() { holder.Unlock(context.Background()) })
	obs.armed.Store(true)

	start := time.Now()
	l, err := v.e.Lock(ctx, key, 300*time.Millisecond)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	defer l.Unlock(ctx)
	t.Logf("Lock returned after %v: Valid %v, Remaining %v", took, l.Valid(), l.Remaining())
	if !l.Valid() {
		t.Errorf("Lock returned a lock that is not valid at return (Remaining %v, TTL 300ms, returned after %v): grant rule (c)", l.Remaining(), took)
		if l2, err := v.e.TryLock(ctx, key, 5*time.Second); err == nil {
			t.Errorf("and another TryLock of the key succeeds at once (token %q)", l2.Token())
			l2.Unlock(ctx)
		}
	}
}

// collectedLateEnv starts five masters and an engine (per-master timeout
// 1 s) whose observer, once armed, stops master 4 when an acquisition
// attempt ends refused and then runs its after: a Lock call's refused
// try sends the waiter to holdLeft's PTTL read, which waits a second for
// master 4, while after hands the key over.
func collectedLateEnv(t *testing.T) (*env, *pauseOnRefusal) {
	obs := &pauseOnRefusal{}
	cfg := functional // MasterTimeout 1 s
	cfg.Observer = obs
	v := newEnv(t, 5, cfg)
	obs.v.Store(v)
	t.Cleanup(func() { v.set.Masters()[4].Resume() })
	return v, obs
}

// waitHeadIdle waits until the Lock call heading key's queue is between
// tries (its first, refused, try answered): an Unlock then hands it the
// key in one script. (Waiting counts it from its arrival: on a busy
// machine its first try may still be out, and the Unlock then kicks it
// instead.)
func waitHeadIdle(t *testing.T, v *env, key string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !v.e.HeadIdle(key) {
		if time.Now().After(deadline) {
			t.Fatalf("the Lock call on %s is not waiting between tries", key)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitQueued waits until n Lock calls of v's engine wait.
func waitQueued(t *testing.T, v *env, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for v.e.Stats().Waiting < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d Lock calls waiting, want %d", v.e.Stats().Waiting, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestHandOffOneScript: an Unlock while a Lock call of the same engine
// waits sends one script per master (the release and the waiter's
// acquire: scripts.HandOff), no SET; the waiter gets the key in that
// round trip, with its own token on every master and its validity counted
// from the send.
func TestHandOffOneScript(t *testing.T) {
	v := newEnv(t, 5, functional)
	ctx := context.Background()
	key := keyName(t)
	holder := v.mustLock(key, 10*time.Second)
	type res struct {
		l   *engine.Lock
		err error
	}
	got := make(chan res, 1)
	go func() {
		l, err := v.e.Lock(ctx, key, 5*time.Second)
		got <- res{l, err}
	}()
	waitHeadIdle(t, v, key)
	before := v.e.Stats()
	dels := make([]int64, 5)
	for i := range dels {
		dels[i] = commandCalls(t, v, i, "del")
	}
	sent := time.Now()
	if err := holder.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("Lock: %v", r.err)
	}
	defer r.l.Unlock(ctx)
	after := v.e.Stats()
	if after.HandOffs != before.HandOffs+1 {
		t.Errorf("HandOffs %d → %d, want one more", before.HandOffs, after.HandOffs)
	}
	if after.Released != before.Released+1 {
		t.Errorf("Released %d → %d: the holder's release was not counted", before.Released, after.Released)
	}
	for i := range dels {
		// The release script deletes the key (then SET NX writes it);
		// the hand-off's script overwrites it.
		if n := commandCalls(t, v, i, "del"); n != dels[i] {
			t.Errorf("master %d: %d DEL calls during the hand-off, want none (one script)", i, n-dels[i])
		}
	}
	v.waitValues(key, []int{0, 1, 2, 3, 4}, []string{r.l.Token(), r.l.Token(), r.l.Token(), r.l.Token(), r.l.Token()}, 5*time.Second)
	if u := r.l.Until(); u.After(sent.Add(5 * time.Second)) {
		t.Errorf("validity until %v, after the send + TTL (%v): not counted from the send", u, sent.Add(5*time.Second))
	}
}

// commandCalls returns master i's calls of cmd (INFO commandstats).
func commandCalls(t *testing.T, v *env, i int, cmd string) int64 {
	t.Helper()
	r := v.mustExec(i, "INFO", "commandstats")
	for _, line := range strings.Split(string(r.Str), "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls="); ok {
			n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
			return n
		}
	}
	return 0
}

// TestHandOffLeavesOtherHolder: when another holder took the key on a
// quorum of masters (the holder's keys lost there), the Unlock's hand-off
// writes nothing there: the waiter is not granted while the other holds
// it, its token is cleaned up where the hand-off wrote it, and it gets the
// key once it is free.
func TestHandOffLeavesOtherHolder(t *testing.T) {
	v := newEnv(t, 5, functional)
	ctx := context.Background()
	key := keyName(t)
	holder := v.mustLock(key, 10*time.Second)
	got := make(chan error, 1)
	var waiter atomic.Pointer[engine.Lock]
	go func() {
		// Its tries after the hand-off's are 400-800 ms apart (or at the
		// other holder's expiry): none writes its own token on masters 3
		// and 4 while the test looks for the hand-off's.
		l, err := v.e.Lock(ctx, key, 5*time.Second, engine.WithRetryDelay(400*time.Millisecond))
		waiter.Store(l)
		got <- err
	}()
	waitHeadIdle(t, v, key)
	// The holder's keys are lost on masters 0-2 (restarted empty, say)
	// and another holder (another process) takes the key there before the
	// holder unlocks.
	for i := range 3 {
		v.mustExec(i, "SET", key, "other-holder", "PX", "1500")
	}
	before := v.e.Stats().HandOffs
	holder.Unlock(ctx)
	select {
	case err := <-got:
		t.Fatalf("Lock returned while another holder has 3 of 5 masters: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	// The hand-off's token is cleaned up where it wrote it (the cleanup
	// follows the verdict: waited for), the other holder's value kept.
	v.waitValues(key, []int{0, 1, 2, 3, 4}, []string{"other-holder", "other-holder", "other-holder", nilValue, nilValue}, 2*time.Second)
	if err := <-got; err != nil {
		t.Fatalf("Lock after the other holder's expiry: %v", err)
	}
	waiter.Load().Unlock(ctx)
	t.Logf("hand-offs sent: %d", v.e.Stats().HandOffs-before)
}
