package engine_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"

	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/proccpu"
	"github.com/redlock-dev/redlock/internal/test/check"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
)

func TestTryLockRefusesWaitOptions(t *testing.T) {
	v := newEnv(t, 3, functional)
	ctx := context.Background()
	for _, opt := range []engine.Option{engine.WithRetryDelay(time.Second), engine.WithMaxTries(3)} {
		if l, err := v.e.TryLock(ctx, keyName(t), time.Second, opt); !errors.Is(err, engine.ErrBadArgument) {
			t.Fatalf("TryLock with a wait-only option = %v, %v; want ErrBadArgument", l, err)
		}
	}
	// One token for several attempts: an earlier attempt's release could
	// delete a later attempt's grant (review of issue #22).
	if l, err := v.e.Lock(ctx, keyName(t), time.Second, engine.WithToken("same-for-every-attempt")); !errors.Is(err, engine.ErrBadArgument) {
		t.Fatalf("Lock with WithToken = %v, %v; want ErrBadArgument", l, err)
	}
	l, err := v.e.Lock(ctx, keyName(t), time.Second, engine.WithRetryDelay(time.Millisecond), engine.WithMaxTries(3))
	if err != nil {
		t.Fatalf("Lock with wait options: %v", err)
	}
	if r := l.Remaining(); r <= 0 || r > time.Second {
		t.Fatalf("Remaining() = %v for a fresh 1s lock", r)
	}
	l.Unlock(ctx)
}

// TestMaxExtensionsCountsSuccesses: a refused extension does not use up
// the allowance; successful ones do. A lock an extension found lost stays
// ended: a later Extend sends nothing and returns the loss, even where the
// masters hold its token again (it raised Until back while Done was
// closed and Err said lost: issue #46's review).
func TestMaxExtensionsCountsSuccesses(t *testing.T) {
	cfg := functional
	cfg.MaxExtensions = 2
	v := newEnv(t, 3, cfg)
	ctx := context.Background()
	key := keyName(t)
	l := v.mustLock(key, 10*time.Second)
	if err := l.Extend(ctx, time.Hour); !errors.Is(err, engine.ErrBadArgument) {
		t.Fatalf("Extend over MaxTTL = %v", err)
	}
	for i := range 2 {
		if err := l.Extend(ctx, 10*time.Second); err != nil {
			t.Fatalf("extension %d after a refused one: %v", i+1, err)
		}
	}
	if err := l.Extend(ctx, 10*time.Second); !errors.Is(err, engine.ErrTooManyExtensions) {
		t.Fatalf("third successful extension = %v; want ErrTooManyExtensions", err)
	}

	lost := v.mustLock(key+":lost", 10*time.Second)
	for i := range v.direct {
		v.mustExec(i, "DEL", lost.Key())
	}
	if err := lost.Extend(ctx, 10*time.Second); !errors.Is(err, engine.ErrLockLost) {
		t.Fatalf("Extend of a deleted lock = %v", err)
	}
	for i := range v.direct {
		v.mustExec(i, "SET", lost.Key(), lost.Token(), "PX", "5000")
	}
	if err := lost.Extend(ctx, 10*time.Second); !errors.Is(err, engine.ErrLockLost) || lost.Valid() {
		t.Fatalf("Extend of a lock found lost, its token set again: %v, Valid %v; want the loss, not valid", err, lost.Valid())
	}
	for i := range v.direct {
		if pttl := v.mustExec(i, "PTTL", lost.Key()).Int; pttl > 5000 {
			t.Fatalf("master %d: PTTL %d: the ended lock's Extend reached it", i, pttl)
		}
	}
}

// TestDoneAndContext: without a watchdog, Done closes when the validity
// runs out — before Until, not after — and Context is cancelled with the
// cause; Unlock ends them with ErrUnlocked.
func TestDoneAndContext(t *testing.T) {
	v := newEnv(t, 3, functional)
	ctx := context.Background()
	const ttl = 300 * time.Millisecond
	l := v.mustLock(keyName(t, "expire"), ttl)
	lctx, cancel := l.Context(ctx)
	defer cancel()
	if l.Err() != nil {
		t.Fatalf("Err() = %v while held", l.Err())
	}
	select {
	case <-l.Done():
		// The keeper aims a millisecond before the deadline; a starved
		// machine may wake its timer later (the loss test below has no
		// such slack: a failed extension ends the lock at once).
		if now := time.Now(); now.After(l.Until().Add(20 * time.Millisecond)) {
			t.Fatalf("Done closed %v after the validity deadline", now.Sub(l.Until()))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Done did not close after the validity ran out")
	}
	if !errors.Is(l.Err(), engine.ErrLockLost) {
		t.Fatalf("Err() = %v after expiry", l.Err())
	}
	<-lctx.Done()
	if c := context.Cause(lctx); !errors.Is(c, engine.ErrLockLost) {
		t.Fatalf("Context cause = %v", c)
	}

	l2 := v.mustLock(keyName(t, "unlock"), 10*time.Second)
	done := l2.Done()
	ctx2, cancel2 := l2.Context(ctx)
	defer cancel2()
	if err := l2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	<-done
	<-ctx2.Done()
	if !errors.Is(l2.Err(), engine.ErrUnlocked) || !errors.Is(context.Cause(ctx2), engine.ErrUnlocked) {
		t.Fatalf("after Unlock: Err() = %v, cause %v", l2.Err(), context.Cause(ctx2))
	}
}

// TestWatchdogManyLocks holds locks with auto-extend for three TTLs: every
// one is still held on every master at the end, no goroutine per lock.
func TestWatchdogManyLocks(t *testing.T) {
	n, ttl := 10_000, 2*time.Second
	if raceEnabled || testing.Short() {
		n = 2_000 // the full count runs in make fault (no race detector)
	}
	if s := os.Getenv("REDLOCK_WATCHDOG_LOCKS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	v := newEnv(t, 3, engine.Config{FreshMasters: true, MasterTimeout: 200 * time.Millisecond})
	ctx := context.Background()
	take := func(from, to int) []*engine.Lock {
		out := make([]*engine.Lock, to-from)
		var wg sync.WaitGroup
		var failed atomic.Int64
		for w := range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := from + w; i < to; i += 32 {
					l, err := v.e.TryLock(ctx, fmt.Sprintf("%s:%d", t.Name(), i), ttl, engine.WithAutoExtend(0))
					for try := 0; errors.Is(err, engine.ErrUnavailable) && try < 5; try++ {
						// A loaded host's late answers: the watchdog, not
						// the acquisitions, is the subject.
						l, err = v.e.TryLock(ctx, fmt.Sprintf("%s:%d", t.Name(), i), ttl, engine.WithAutoExtend(0))
					}
					if err != nil {
						failed.Add(1)
						continue
					}
					out[i-from] = l
				}
			}()
		}
		wg.Wait()
		if failed.Load() > 0 {
			t.Fatalf("%d of %d acquisitions failed", failed.Load(), to-from)
		}
		return out
	}
	few := take(0, 100)
	time.Sleep(50 * time.Millisecond)
	g1 := runtime.NumGoroutine()
	locks := append(few, take(100, n)...)
	// The take's workers may still be exiting: wait for the count, at most
	// 5 s (a goroutine per lock would never come back down).
	check.Eventually(t, 5*time.Second, fmt.Sprintf("no more goroutines with %d auto-extended locks than with 100 (%d)", n, g1), func() bool {
		return runtime.NumGoroutine() <= g1+2
	})
	ext0 := v.e.Stats().Extended
	cpu0 := cpuTime()
	time.Sleep(3 * ttl)
	cpu := cpuTime() - cpu0
	ext := v.e.Stats().Extended - ext0
	if min := uint64(n) * 6; ext < min { // 3 TTLs at about ttl/3: ~9 each
		t.Errorf("%d extensions of %d locks in 3 TTLs; want at least %d", ext, n, min)
	}
	t.Logf("%d locks, %d goroutines; %d extensions in %v, %.1f µs CPU per extension (this process, race=%v)",
		n, runtime.NumGoroutine(), ext, 3*ttl, float64(cpu.Microseconds())/float64(ext), raceEnabled)
	for i, l := range locks {
		if err := l.Err(); err != nil {
			t.Fatalf("lock %d lost: %v", i, err)
		}
	}
	// Every master still holds every token (MGET in batches).
	for m := range v.direct {
		for from := 0; from < n; from += 1000 {
			args := []string{"MGET"}
			for _, l := range locks[from:min(from+1000, n)] {
				args = append(args, l.Key())
			}
			r := v.mustExec(m, args...)
			for j, el := range r.Elems {
				if l := locks[from+j]; el.Text() != l.Token() {
					t.Fatalf("master %d: %s = %q, want the holder's token", m, l.Key(), el.Text())
				}
			}
		}
	}
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 32 {
				// (A lock the watchdog reported lost since the checks above —
				// a loaded host's extensions past their timeout — is not
				// this cleanup's failure.)
				if err := locks[i].Unlock(ctx); err != nil && (!errors.Is(err, engine.ErrLockLost) || locks[i].Err() == nil) {
					t.Errorf("Unlock %d: %v", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func cpuTime() time.Duration {
	t, _ := proccpu.Self()
	return t.Total()
}

// TestWatchdogLoss: with 3 of 5 masters stopped, the extensions get too
// few answers to tell whether the lock is held: the watchdog retries while
// validity is left, and Done closes as the validity is about to end (when
// no extension could be decided before the deadline: a per-master timeout
// before it), not at the first failed extension, with an error matching
// ErrLockLost and ErrUnavailable. Before,
// the first failed extension ended the lock with most of its validity
// left (redlock lock then killed its command early).
func TestWatchdogLoss(t *testing.T) {
	v := newEnv(t, 5, engine.Config{FreshMasters: true, MasterTimeout: 100 * time.Millisecond})
	mastertest.RequireReal(t, v.set)
	const ttl = time.Second
	l := v.mustLock(keyName(t), ttl, engine.WithAutoExtend(0))
	time.Sleep(ttl / 2) // at least one extension went through
	if l.Err() != nil || v.e.Stats().Extended == 0 {
		t.Fatalf("after half a TTL: Err() = %v, %d extensions", l.Err(), v.e.Stats().Extended)
	}
	v.pause(0, 1, 2)
	deadline := l.Until()
	select {
	case <-l.Done():
		now := time.Now()
		if now.After(deadline) || now.After(l.Until()) {
			t.Fatalf("Done closed %v after the validity deadline", now.Sub(deadline))
		}
		// It ends when no extension could be decided before the
		// deadline any more: a per-master timeout (100ms) before it.
		if left := l.Until().Sub(now); left > 150*time.Millisecond {
			t.Fatalf("Done closed with %v of validity left: the lock was not lost yet", left)
		}
		if st := v.e.Stats(); st.ExtendFailed < 2 {
			t.Fatalf("%d failed extensions: the watchdog did not retry", st.ExtendFailed)
		}
		t.Logf("lost %v before the deadline: %v", deadline.Sub(now), l.Err())
	case <-time.After(3 * ttl):
		t.Fatal("Done did not close with 3 of 5 masters stopped")
	}
	if err := l.Err(); !errors.Is(err, engine.ErrLockLost) || !errors.Is(err, engine.ErrUnavailable) {
		t.Fatalf("Err() = %v; want ErrLockLost and ErrUnavailable", err)
	}
}

// TestWatchdogRetryRecovers: masters stopped for less than the validity
// left: the watchdog's retries reach them when they come back and the
// lock is still held, Done never closed. And an extension a quorum
// refuses (the key is gone) still ends the lock at once, as lost rather
// than unavailable.
func TestWatchdogRetryRecovers(t *testing.T) {
	v := newEnv(t, 5, engine.Config{FreshMasters: true, MasterTimeout: 100 * time.Millisecond})
	mastertest.RequireReal(t, v.set)
	const ttl = 2 * time.Second
	key := keyName(t)
	l := v.mustLock(key, ttl, engine.WithAutoExtend(0))
	done := l.Done()
	time.Sleep(ttl / 4)
	v.pause(0, 1, 2) // the next extension (at ttl/3) gets 2 answers of 5
	time.Sleep(ttl / 2)
	v.resume(0, 1, 2)
	time.Sleep(ttl)
	select {
	case <-done:
		t.Fatalf("the lock ended although the masters came back within its validity: %v", l.Err())
	default:
	}
	st := v.e.Stats()
	if st.ExtendFailed == 0 || l.Remaining() < ttl/2 {
		t.Fatalf("%d failed extensions, %v left: want failures, then the lock extended again", st.ExtendFailed, l.Remaining())
	}
	for i := range 5 { // taken away on every master: the next extension is refused
		v.mustExec(i, "DEL", key)
	}
	select {
	case <-done:
		if err := l.Err(); !errors.Is(err, engine.ErrLockLost) || errors.Is(err, engine.ErrUnavailable) {
			t.Fatalf("Err() = %v; want ErrLockLost (refused by a quorum), not ErrUnavailable", err)
		}
		if l.Remaining() < ttl/4 {
			t.Fatalf("ended with only %v left: a refused extension must end it at once", l.Remaining())
		}
	case <-time.After(ttl):
		t.Fatal("Done did not close after the key was deleted on every master")
	}
}

// TestWatchdogMaxHold: the watchdog stops at the bound; the lock then
// ends when its validity runs out, with ErrMaxHold.
func TestWatchdogMaxHold(t *testing.T) {
	v := newEnv(t, 3, functional)
	const ttl, hold = 300 * time.Millisecond, 700 * time.Millisecond
	start := time.Now()
	l := v.mustLock(keyName(t), ttl, engine.WithAutoExtend(hold))
	select {
	case <-l.Done():
	case <-time.After(10 * hold):
		t.Fatal("Done did not close after the max hold")
	}
	if el := time.Since(start); el < hold-ttl/2 || el > hold+ttl {
		t.Errorf("lock ended after %v; want about %v", el, hold)
	}
	if err := l.Err(); !errors.Is(err, engine.ErrMaxHold) || !errors.Is(err, engine.ErrLockLost) {
		t.Fatalf("Err() = %v; want ErrMaxHold and ErrLockLost", err)
	}
	if v.e.Stats().Extended == 0 {
		t.Fatal("no extension before the bound")
	}
}

// TestHandOffInProcess: Lock calls on one key queue in arrival order, and
// each Unlock hands the key to the next one at once — far sooner than the
// retry delay (10 s here) or the TTL (30 s) would let them try.
func TestHandOffInProcess(t *testing.T) {
	v := newEnv(t, 3, functional)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	key := keyName(t)
	const ttl = 30 * time.Second
	holder := v.mustLock(key, ttl)
	const waiters = 8
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := v.e.Lock(ctx, key, ttl, engine.WithRetryDelay(10*time.Second))
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			if err := l.Unlock(ctx); err != nil {
				t.Errorf("waiter %d Unlock: %v", i, err)
			}
		}()
		time.Sleep(30 * time.Millisecond) // arrival order
	}
	start := time.Now()
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	took := time.Since(start)
	for i, w := range order {
		if w != i {
			t.Fatalf("grant order %v; want arrival order", order)
		}
	}
	if len(order) != waiters || took > 5*time.Second {
		t.Fatalf("%d of %d waiters served in %v", len(order), waiters, took)
	}
	t.Logf("%d hand-offs in %v", waiters, took)
}

// TestWaitFromPTTL: a holder elsewhere (another engine) never unlocks; the
// waiter tries when the key expires on a quorum, not at its 10 s retry
// delay.
func TestWaitFromPTTL(t *testing.T) {
	v := newEnv(t, 3, functional)
	other := newEnvOn(t, v.set, functional)
	const ttl = 400 * time.Millisecond
	key := keyName(t)
	h := other.mustLock(key, ttl)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	start := time.Now()
	l, err := v.e.Lock(ctx, key, ttl, engine.WithRetryDelay(10*time.Second))
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	took := time.Since(start)
	if time.Now().Before(h.Until()) || took > ttl+time.Second {
		t.Fatalf("acquired after %v (holder valid until %v from start)", took, h.Until().Sub(start))
	}
	l.Unlock(ctx)
}

// TestReleaseNotification: with a release channel, a waiter of one engine
// gets a key another engine unlocks at once, although the holder's TTL is
// 30 s and the waiter's retry delay 10 s.
func TestReleaseNotification(t *testing.T) {
	cfg := functional
	cfg.ReleaseChannel = "redlock:released"
	v := newEnv(t, 3, cfg)
	other := newEnvOn(t, v.set, cfg)
	key := keyName(t)
	const ttl = 30 * time.Second
	h := other.mustLock(key, ttl)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	got := make(chan error, 1)
	go func() {
		l, err := v.e.Lock(ctx, key, ttl, engine.WithRetryDelay(10*time.Second))
		if err == nil {
			l.Unlock(context.Background())
		}
		got <- err
	}()
	time.Sleep(300 * time.Millisecond) // the waiter tried and waits
	start := time.Now()
	if err := h.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("waiter got the key %v after the release elsewhere", took)
	}
}

// TestLockCancelledWaiterLeavesQueue: a waiter whose ctx ends leaves the
// queue; the next one is still served by the hand-off.
func TestLockCancelledWaiterLeavesQueue(t *testing.T) {
	v := newEnv(t, 3, functional)
	key := keyName(t)
	const ttl = 30 * time.Second
	holder := v.mustLock(key, ttl)
	short, cancelShort := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() { _, err := v.e.Lock(short, key, ttl); first <- err }()
	time.Sleep(50 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	second := make(chan error, 1)
	go func() {
		l, err := v.e.Lock(ctx, key, ttl, engine.WithRetryDelay(10*time.Second))
		if err == nil {
			l.Unlock(ctx)
		}
		second <- err
	}()
	time.Sleep(50 * time.Millisecond)
	cancelShort()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v", err)
	}
	holder.Unlock(ctx)
	select {
	case err := <-second:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the remaining waiter was not handed the key")
	}
}

// TestCloseEndsWaitersAndWatchdog: Close returns every waiting Lock call
// with ErrClosed, and ends the locks the watchdog kept.
func TestCloseEndsWaitersAndWatchdog(t *testing.T) {
	v := newEnv(t, 3, functional)
	key := keyName(t)
	holder := v.mustLock(key, 30*time.Second, engine.WithAutoExtend(0))
	errs := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := v.e.Lock(context.Background(), key, 30*time.Second, engine.WithRetryDelay(10*time.Second))
			errs <- err
		}()
	}
	time.Sleep(100 * time.Millisecond)
	v.e.Close()
	for range 3 {
		select {
		case err := <-errs:
			if !errors.Is(err, engine.ErrClosed) {
				t.Fatalf("waiter after Close: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a waiter still blocked after Close")
		}
	}
	select {
	case <-holder.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed after Close")
	}
	if !errors.Is(holder.Err(), engine.ErrClosed) {
		t.Fatalf("Err() after Close = %v", holder.Err())
	}
}

// TestLockDeadlineNamesUnavailable: a Lock whose tries failed for want of a
// quorum until its deadline returns the deadline error wrapping the last
// try's (ErrUnavailable) — not a bare "deadline exceeded" that reads as
// "held"; a key held until the deadline gives the bare context error.
func TestLockDeadlineNamesUnavailable(t *testing.T) {
	// 1 s (within each Lock's deadline): a try on "held" must not come back
	// unavailable on a loaded host; killed masters fail at once.
	v := newEnv(t, 3, engine.Config{FreshMasters: true, MasterTimeout: time.Second})
	mastertest.RequireReal(t, v.set)
	held := v.mustLock("held", 5*time.Second)
	defer held.Unlock(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err := v.e.Lock(ctx, "held", time.Second)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, engine.ErrUnavailable) {
		t.Fatalf("held until the deadline: %v", err)
	}
	for _, m := range v.set.Masters()[1:] {
		if err := m.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err = v.e.Lock(ctx, "free", time.Second)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, engine.ErrUnavailable) {
		t.Fatalf("no quorum until the deadline: %v", err)
	}
}
