package fault_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/test/fault"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/internal/test/proctest"
	"github.com/redlock-dev/redlock/internal/test/redissonwire"
)

// The lock kinds' fault suite: contended holders of each kind through two
// engines over five real masters that are stopped and restarted empty
// (restartSteps: up to three at once, which only the quarantine covers).
// REDLOCK_FAULT_KIND_OPS sets the acquisitions per kind (make fault sets
// it; docs/safety.md has a run of ≥ 100k per kind).
const defaultKindOps = 2000

type kindScenario struct {
	name  string
	proxy bool // through the redlock proxy binary, with Redisson clients
	// share scales the kind's operations (0: 1): a fair lock's wait costs
	// four round trips (ticket, queue, try, leave), so it runs fewer.
	share float64
	// hold makes one try and, when granted, enters the checkers, holds
	// and leaves; it returns whether it entered, or the try's error.
	hold func(k *kindRun, rng *rand.Rand, w int) (bool, error)
}

// kindRun is one kind scenario's state shared by its workers.
type kindRun struct {
	ctx     context.Context
	engines []*engine.Engine
	chk     *fault.Checker // exclusive kinds: reentrant, LockAll
	crowd   *fault.Crowd   // shared kinds: semaphore, read-write
	ids     atomic.Int64
	mu      sync.Mutex
	re      map[string]*engine.Reentrant // per worker and key
	ops     atomic.Int64                 // entries, and re-entries of reentrant locks
	// Redisson clients (proxy scenarios): rc[2i] and rc[2i+1] are one
	// client (one id) connected to the first and the second proxy.
	rc []*redissonwire.Client
	// nem resends the Redisson clients' requests (nil: off).
	nem *retryNemesis
	// fifo checks the hand-off scenario's grant order.
	fifo fifoCheck
}

// fifoSlack is how much earlier a Lock call must begin than another of
// the same engine on the same key to be queued ahead of it for sure (the
// time between reading the clock and joining the queue, on a busy host).
const fifoSlack = 50 * time.Millisecond

// fifoCheck records the granted Lock calls per engine and key.
type fifoCheck struct {
	mu sync.Mutex
	// latest is, per engine and key, the latest start of a call granted
	// so far.
	latest map[string]time.Time
	// checked counts grants that waited longer than fifoSlack (so the
	// check had calls to order); inverted, grants that came after a grant
	// of a call that began more than fifoSlack after them; first is the
	// first inversion.
	checked, inverted int
	first             string
}

func (f *fifoCheck) granted(eng int, key string, start time.Time) {
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.latest == nil {
		f.latest = map[string]time.Time{}
	}
	id := fmt.Sprintf("%d/%s", eng, key)
	if now.Sub(start) > fifoSlack {
		f.checked++
	}
	if l := f.latest[id]; l.Sub(start) > fifoSlack {
		f.inverted++
		if f.first == "" {
			f.first = fmt.Sprintf("engine %d, %s: a call that began %v before a granted one was granted after it", eng, key, l.Sub(start))
		}
	}
	if start.After(f.latest[id]) {
		f.latest[id] = start
	}
}

// redisson returns a connection of worker w's Redisson client, to either
// proxy at random: a client's pool spread over proxies behind a load
// balancer.
func (k *kindRun) redisson(rng *rand.Rand, w int) *redissonwire.Client {
	return k.rc[2*(w%redissonClients)+rng.IntN(2)]
}

func (k *kindRun) engine(w int) *engine.Engine { return k.engines[w%len(k.engines)] }

func (k *kindRun) reentrant(w int, key string) *engine.Reentrant {
	k.mu.Lock()
	defer k.mu.Unlock()
	name := fmt.Sprintf("%d/%s", w, key)
	r := k.re[name]
	if r == nil {
		r, _ = k.engine(w).NewReentrant(key, fmt.Sprintf("w%d", w))
		k.re[name] = r
	}
	return r
}

func hotKey(rng *rand.Rand, prefix string, n int) string {
	return fmt.Sprintf("%s:%d", prefix, rng.IntN(n))
}

var kindScenarios = []kindScenario{
	// Redisson's RLock through the proxy: 24 clients replaying its exact
	// traffic (every recognised release, in turn) on 8 hot keys.
	{name: "redisson-rlock-via-proxy", proxy: true, hold: redissonHold},
	// Redisson's RReadWriteLock through the proxy: the same clients
	// (releases 3.20.0+), one turn in four a writer's lock() (waiting up
	// to 200 ms), the others a reader's tryLock, on 4 hot keys; 0.3 of the
	// operations (a contended read's compare-and-set may be retried).
	{name: "redisson-rwlock-via-proxy", proxy: true, share: 0.3, hold: redissonRWHold},
	// Redisson's RFairLock through the proxy: the same clients (releases
	// 3.20.0+) queue on 2 hot keys with tryLock(200 ms) — one try in two
	// a tryLock(), which does not queue — re-enter one time in three;
	// 0.15 of the operations (a waiting try costs a read, a ticket, a
	// queueing and the acquire).
	{name: "redisson-fairlock-via-proxy", proxy: true, share: 0.15, hold: redissonFairHold},
	// Reentrant: a holder re-enters (one script per master, raising the
	// TTL) and leaves once inside; the checker counts the raised validity.
	{name: "reentrant", hold: func(k *kindRun, rng *rand.Rand, w int) (bool, error) {
		key := hotKey(rng, "kinds:re", hotKeys)
		r := k.reentrant(w, key)
		if err := r.TryLock(k.ctx, ttl); err != nil {
			return false, err
		}
		id := k.ids.Add(1)
		l := r.Held()
		entered := k.chk.Enter(key, id, l.Until(), 0)
		if entered {
			k.ops.Add(1)
			if rng.IntN(2) == 0 && r.TryLock(k.ctx, ttl) == nil {
				k.ops.Add(1)
				k.chk.Extend(key, id, l.Until())
				time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
				r.Unlock(k.ctx) // count 2 → 1: still held
			}
			time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
			k.chk.Leave(key, id)
		}
		for r.Count() > 0 {
			r.Unlock(k.ctx)
		}
		return entered, nil
	}},
	// Election: campaigns (one try each) on two hot elections; a leader
	// enters with its term as fencing token, proclaims one time in four
	// while inside, leaves and resigns.
	{name: "election", hold: func(k *kindRun, rng *rand.Rand, w int) (bool, error) {
		name := hotKey(rng, "kinds:elect", 2)
		el, err := k.engine(w).NewElection(name, ttl)
		if err != nil {
			return false, err
		}
		ld, err := el.TryCampaign(k.ctx, fmt.Sprintf("w%d", w))
		if err != nil {
			return false, err
		}
		defer ld.Resign(k.ctx)
		id := k.ids.Add(1)
		if !k.chk.Enter(name, id, ld.Lock().Until(), ld.Term()) {
			return false, nil
		}
		k.ops.Add(1)
		if rng.IntN(4) == 0 {
			ld.Proclaim(k.ctx, fmt.Sprintf("w%d again", w))
		}
		time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
		k.chk.Leave(name, id)
		return true, nil
	}},
	// Fair lock: waiters queue on two hot keys (one try in two is a
	// TryLock, which does not queue) and wait up to 100ms for their turn.
	{name: "fairlock", share: 0.3, hold: func(k *kindRun, rng *rand.Rand, w int) (bool, error) {
		key := hotKey(rng, "kinds:fair", 2)
		fl, err := k.engine(w).NewFairLock(key, time.Second)
		if err != nil {
			return false, err
		}
		var l *engine.Lock
		if rng.IntN(2) == 0 {
			l, err = fl.TryLock(k.ctx, ttl)
		} else {
			wctx, cancel := context.WithTimeout(k.ctx, 100*time.Millisecond)
			l, err = fl.Lock(wctx, ttl, engine.WithRetryDelay(2*time.Millisecond))
			cancel()
			if errors.Is(err, context.DeadlineExceeded) {
				err = fmt.Errorf("%w: %w", engine.ErrNotAcquired, err) // waited its while: busy
			}
		}
		if err != nil {
			return false, err
		}
		defer l.Unlock(k.ctx)
		id := k.ids.Add(1)
		if !k.chk.Enter(key, id, l.Until(), 0) {
			return false, nil
		}
		k.ops.Add(1)
		time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
		k.chk.Leave(key, id)
		return true, nil
	}},
	// LockAll: two or three hot keys at once, every key entered.
	{name: "lockall", hold: func(k *kindRun, rng *rand.Rand, w int) (bool, error) {
		keys := []string{hotKey(rng, "kinds:all", hotKeys), hotKey(rng, "kinds:all", hotKeys), hotKey(rng, "kinds:all", hotKeys)}
		s, err := k.engine(w).TryLockAll(k.ctx, keys[:2+rng.IntN(2)], ttl)
		if err != nil {
			return false, err
		}
		defer s.Unlock(k.ctx)
		id := k.ids.Add(1)
		var in []string
		for _, l := range s.Locks() {
			if k.chk.Enter(l.Key(), id, l.Until(), 0) {
				in = append(in, l.Key())
			}
		}
		if len(in) > 0 {
			k.ops.Add(1)
		}
		time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
		for _, key := range in {
			k.chk.Leave(key, id)
		}
		return len(in) > 0, nil
	}},
	// The FIFO hand-off: Lock calls wait (up to 400 ms) on two hot keys,
	// 16 per engine; a holder's Unlock hands the key to its engine's
	// longest waiter in one script per master. Besides the checker's
	// exclusion, the FIFO check: of two granted Lock calls of one engine
	// on one key, the one that began more than fifoSlack earlier is
	// granted first (only the longest waiter tries, and the hand-off goes
	// to it). Locks of 100 ms, and one holder in 80 stays inside 10 ms
	// past its validity before it unlocks: the other engine may take the
	// key meanwhile, and the late Unlock's hand-off must not take it from
	// that holder. Half the operations: its faults cost it as much time
	// as the other kinds', and its waits are the suite's longest.
	{name: "handoff", share: 0.5, hold: func(k *kindRun, rng *rand.Rand, w int) (bool, error) {
		key := hotKey(rng, "kinds:handoff", 2)
		start := time.Now()
		wctx, cancel := context.WithTimeout(k.ctx, 400*time.Millisecond)
		l, err := k.engine(w).Lock(wctx, key, 100*time.Millisecond)
		waited := wctx.Err() != nil
		cancel()
		if err != nil {
			if waited && k.ctx.Err() == nil {
				return false, engine.ErrNotAcquired // waited its share: busy
			}
			return false, err
		}
		defer l.Unlock(k.ctx)
		k.fifo.granted(w%len(k.engines), key, start)
		id := k.ids.Add(1)
		if !k.chk.Enter(key, id, l.Until(), 0) {
			return false, nil
		}
		k.ops.Add(1)
		if rng.IntN(80) == 0 {
			time.Sleep(time.Until(l.Until()) + 10*time.Millisecond)
		} else {
			time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
		}
		k.chk.Leave(key, id)
		return true, nil
	}},
	// Semaphore: three permits on each of two keys, 32 workers.
	{name: "semaphore", hold: func(k *kindRun, rng *rand.Rand, w int) (bool, error) {
		key := hotKey(rng, "kinds:sem", 2)
		s, _ := k.engine(w).NewSemaphore(key, 3)
		l, err := s.TryAcquire(k.ctx, ttl)
		if err != nil {
			return false, err
		}
		defer l.Unlock(k.ctx)
		id := k.ids.Add(1)
		if !k.crowd.Enter(key, id, l.Until(), false, 3) {
			return false, nil
		}
		k.ops.Add(1)
		time.Sleep(time.Duration(rng.IntN(400)) * time.Microsecond)
		k.crowd.Leave(key, id)
		return true, nil
	}},
	// Read-write: one try in ten is a writer's.
	{name: "rwlock", hold: func(k *kindRun, rng *rand.Rand, w int) (bool, error) {
		key := hotKey(rng, "kinds:rw", 4)
		rw, _ := k.engine(w).NewRWLock(key)
		write := rng.IntN(10) == 0
		var l *engine.Lock
		var err error
		if write {
			// A waiting writer (its intent makes new readers wait), for a
			// short while: TryLock alone would rarely find no reader.
			wctx, cancel := context.WithTimeout(k.ctx, 100*time.Millisecond)
			l, err = rw.Lock(wctx, ttl, engine.WithRetryDelay(time.Millisecond))
			cancel()
		} else {
			l, err = rw.TryRLock(k.ctx, ttl)
		}
		if err != nil {
			return false, err
		}
		defer l.Unlock(k.ctx)
		id := k.ids.Add(1)
		if !k.crowd.Enter(key, id, l.Until(), write, 0) {
			return false, nil
		}
		k.ops.Add(1)
		if rng.IntN(4) == 0 {
			if err := l.Extend(k.ctx, ttl); err == nil {
				// The crowd keeps the entry's first deadline: a shorter
				// window, never a missed overlap on its side.
				time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
			}
		}
		time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond)
		k.crowd.Leave(key, id)
		return true, nil
	}},
}

// redissonClients is the number of Redisson clients of the proxy
// scenario; the workers share them (a worker is a thread of one).
const redissonClients = 24

// redissonHold is one Redisson thread's turn: lock() (subscribe, then
// retry on each wake-up or at the holder's TTL) on a hot key; inside, one
// time in four the watchdog's renewal, one time in two a re-entry — then
// an unlock of one level while still inside (nestedUnlock) —; then unlock
// to zero — each command through either of two proxies on the same
// masters, and resent by the retry nemesis. The validity counts from when
// the successful tryLock was sent, less the proxy's drift allowance.
func redissonHold(k *kindRun, rng *rand.Rand, w int) (bool, error) {
	key := hotKey(rng, "kinds:redisson", hotKeys)
	ctx, call := k.nem.call(k.ctx, rng)
	c := k.redisson(rng, w)
	thread := int64(w)
	// With the lock's lease, as Redisson sends its internalLockLeaseTime:
	// a nested unlock resets the TTL to it (an extension, at most MaxTTL).
	unlock := func() (int64, error) { return k.redisson(rng, w).UnlockLease(ctx, key, thread, ttl) }
	lctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	t0, err := c.LockAt(lctx, key, thread, ttl)
	waited := errors.Is(lctx.Err(), context.DeadlineExceeded)
	cancel()
	count := call.grants() // levels granted to copies of its tries
	if err != nil {
		k.release(call, count, true, unlock)
		if waited && k.ctx.Err() == nil {
			return false, engine.ErrNotAcquired // waited its share: busy
		}
		return false, err
	}
	count++
	drift := ttl/100 + 2*time.Millisecond
	id := k.ids.Add(1)
	entered := k.chk.Enter(key, id, t0.Add(ttl-drift), 0)
	if entered {
		k.ops.Add(1)
		if rng.IntN(4) == 0 {
			t1 := time.Now()
			if res, err := k.redisson(rng, w).Renew(ctx, ttl, []string{key}, []int64{thread}); err == nil && len(res) == 1 && res[0] == 1 {
				k.chk.Extend(key, id, t1.Add(ttl-drift))
			}
		}
		if rng.IntN(2) == 0 {
			t1 := time.Now()
			if ok, _, err := k.redisson(rng, w).TryLock(ctx, key, thread, ttl); ok && err == nil {
				count++
				k.ops.Add(1)
				k.chk.Extend(key, id, t1.Add(ttl-drift))
			}
		}
		count = k.nestedUnlock(call, count+call.grants(), unlock)
		time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
		k.chk.Leave(key, id)
	}
	k.release(call, count+call.grants(), true, unlock)
	return entered, nil
}

// redissonRWHold is one Redisson thread's turn on a read-write lock: a
// writer's lock() or a reader's tryLock, through either proxy; inside,
// one time in four the watchdog's renewal, one time in three a re-entry
// (a reader's re-entry, or the writer's re-entry of its write lock) and
// then an unlock of one level while still inside (nestedUnlock); then
// unlock to zero. A read hold's validity counts from its tryLock (a
// re-entry raises the TTL to the lease, never lowers it; the crowd keeps
// an entry's first deadline).
func redissonRWHold(k *kindRun, rng *rand.Rand, w int) (bool, error) {
	key := hotKey(rng, "kinds:redisson-rw", 4)
	thread := int64(w)
	write := rng.IntN(4) == 0
	ctx, call := k.nem.call(k.ctx, rng)
	unlock := func() (int64, error) {
		if write {
			return k.redisson(rng, w).WriteUnlock(ctx, key, thread, ttl)
		}
		return k.redisson(rng, w).ReadUnlock(ctx, key, thread)
	}
	var t0 time.Time
	var err error
	if write {
		lctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		t0, err = k.redisson(rng, w).RWLockAt(lctx, key, thread, ttl, true)
		waited := errors.Is(lctx.Err(), context.DeadlineExceeded)
		cancel()
		if err != nil && waited && k.ctx.Err() == nil {
			err = engine.ErrNotAcquired // waited its share: busy
		}
	} else {
		t0 = time.Now()
		var ok bool
		ok, _, err = k.redisson(rng, w).ReadTryLock(ctx, key, thread, ttl)
		if err == nil && !ok {
			err = engine.ErrNotAcquired
		}
	}
	count := call.grants()
	if err != nil {
		k.release(call, count, write, unlock)
		return false, err
	}
	count++
	drift := ttl/100 + 2*time.Millisecond
	id := k.ids.Add(1)
	entered := k.crowd.Enter(key, id, t0.Add(ttl-drift), write, 0)
	if entered {
		k.ops.Add(1)
		if rng.IntN(4) == 0 {
			if write {
				k.redisson(rng, w).WriteRenew(ctx, key, thread, ttl)
			} else {
				k.redisson(rng, w).ReadRenew(ctx, key, thread, ttl)
			}
		}
		if rng.IntN(3) == 0 {
			try := k.redisson(rng, w).ReadTryLock
			if write {
				try = k.redisson(rng, w).WriteTryLock
			}
			if ok, _, err := try(ctx, key, thread, ttl); ok && err == nil {
				count++
				k.ops.Add(1)
			}
		}
		count = k.nestedUnlock(call, count+call.grants(), unlock)
		time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond)
		k.crowd.Leave(key, id)
	}
	k.release(call, count+call.grants(), write, unlock)
	return entered, nil
}

// redissonFairHold is one Redisson thread's turn on a fair lock: a
// tryLock() or a waiting tryLock; inside, one time in four the watchdog's
// renewal, one time in three a re-entry and then an unlock of one level
// while still inside (nestedUnlock); then unlock to zero.
func redissonFairHold(k *kindRun, rng *rand.Rand, w int) (bool, error) {
	key := hotKey(rng, "kinds:redisson-fair", 2)
	thread := int64(w)
	ctx, call := k.nem.call(k.ctx, rng)
	unlock := func() (int64, error) { return k.redisson(rng, w).FairUnlock(ctx, key, thread, ttl) }
	c := k.redisson(rng, w)
	var t0 time.Time
	var err error
	if rng.IntN(2) == 0 {
		t0 = time.Now()
		var ok bool
		if ok, err = c.FairTryLock(ctx, key, thread, ttl); err == nil && !ok {
			err = engine.ErrNotAcquired
		}
	} else {
		t0, err = c.FairLockAt(ctx, key, thread, ttl, 200*time.Millisecond)
		if errors.Is(err, redissonwire.ErrGaveUp) {
			err = engine.ErrNotAcquired // waited its share: busy
		}
	}
	count := call.grants()
	if err != nil {
		k.release(call, count, true, unlock)
		return false, err
	}
	count++
	drift := ttl/100 + 2*time.Millisecond
	id := k.ids.Add(1)
	entered := k.chk.Enter(key, id, t0.Add(ttl-drift), 0)
	if entered {
		k.ops.Add(1)
		if rng.IntN(4) == 0 {
			t1 := time.Now()
			if res, err := k.redisson(rng, w).Renew(ctx, ttl, []string{key}, []int64{thread}); err == nil && len(res) == 1 && res[0] == 1 {
				k.chk.Extend(key, id, t1.Add(ttl-drift))
			}
		}
		if rng.IntN(3) == 0 {
			t1 := time.Now()
			if ok, _, err := k.redisson(rng, w).FairTryLockWait(ctx, key, thread, ttl, time.Second); ok && err == nil {
				count++
				k.ops.Add(1)
				k.chk.Extend(key, id, t1.Add(ttl-drift))
			}
		}
		count = k.nestedUnlock(call, count+call.grants(), unlock)
		time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
		k.chk.Leave(key, id)
	}
	k.release(call, count+call.grants(), true, unlock)
	return entered, nil
}

// kindSteps: two masters stopped and continued, then restartSteps.
func kindSteps(rng *rand.Rand) []step {
	a := rng.IntN(5)
	b := (a + 1 + rng.IntN(4)) % 5
	return append([]step{
		{0.03, fmt.Sprintf("SIGSTOP masters %d,%d", a, b), func(f *fixture) { f.stop(a, b) }},
		{0.06, fmt.Sprintf("SIGCONT masters %d,%d", a, b), func(f *fixture) { f.cont(a, b) }},
	}, restartSteps(rng)...)
}

// TestFaultKinds runs each lock kind's holders through kindSteps against
// real masters and checks each kind's guarantee: one holder per key
// (reentrant, LockAll), at most the permits (semaphore), writers alone and
// readers never with a writer (read-write) — the Redisson rows with the
// retry nemesis resending their clients' requests (retry_test.go). Then
// the retry burst (a count-2 hold's nested unlock resent at once through
// both proxies) and paused Do/Lead holders (paused_test.go), each a fixed
// number of trials.
func TestFaultKinds(t *testing.T) {
	target := envInt("REDLOCK_FAULT_KIND_OPS", defaultKindOps)
	seed := uint64(envInt("REDLOCK_FAULT_SEED", defaultSeed))
	t.Logf("lock kinds: seed %d, %d operations per kind, %d workers, ttl %v", seed, target, workers, ttl)
	var b strings.Builder
	fmt.Fprintf(&b, "\n| kind | operations | writers | most inside | overlaps | permits exceeded | reader with writer | busy tries | unavailable tries | seconds |\n")
	fmt.Fprintf(&b, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for i, ks := range kindScenarios {
		t.Run(ks.name, func(t *testing.T) {
			row := runKind(t, ks, seed+100+uint64(i), target)
			fmt.Fprintf(&b, "%s\n", row)
		})
	}
	t.Log(b.String())
	t.Run("retry-burst", func(t *testing.T) { checkRetryBurst(t, seed+90) })
	t.Run("paused-do-lead", func(t *testing.T) { checkPaused(t, seed+91) })
}

func runKind(t *testing.T, ks kindScenario, seed uint64, target int) string {
	if ks.share > 0 {
		target = max(1, int(float64(target)*ks.share))
	}
	set := mastertest.Start(t, 5)
	mastertest.RequireReal(t, set)
	f := &fixture{t: t, set: set}
	t.Cleanup(func() {
		for _, m := range set.Masters() {
			m.Resume()
		}
	})
	limit := scenarioLimit + time.Duration(target/1000)*time.Second // ≥ 100k for docs/safety.md: longer
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cfg := engine.Config{FreshMasters: true, Addrs: set.Addrs(), MaxTTL: ttl, MasterTimeout: masterTimeout,
		Conn: conn.Config{ReconnectMin: time.Millisecond, ReconnectMax: 50 * time.Millisecond, DialTimeout: 300 * time.Millisecond}}
	k := &kindRun{ctx: ctx, chk: &fault.Checker{Margin: margin}, crowd: &fault.Crowd{Margin: margin}, re: map[string]*engine.Reentrant{}}
	var restartProxy step
	if ks.proxy {
		// Two proxies on the same masters; each client's commands go to
		// either (redisson), and the first proxy is restarted (a new
		// process on the same address) during the run.
		flags := []string{"--master-timeout", masterTimeout.String(), "--reconnect-max", "50ms",
			"--dial-timeout", "300ms", "--max-ttl", ttl.String()}
		p1 := proctest.StartProxy(t, nil, set.Addrs(), flags...)
		p2 := proctest.StartProxy(t, nil, set.Addrs(), flags...)
		profs := redissonwire.Profiles
		if strings.Contains(ks.name, "rwlock") || strings.Contains(ks.name, "fairlock") {
			profs = redissonwire.RWProfiles // 3.20.0+
		}
		// Each client has two more connections, one to each proxy, for
		// the retry nemesis's copies. REDLOCK_FAULT_NO_RETRY=1 turns it
		// off (to compare; never in CI).
		noRetry := os.Getenv("REDLOCK_FAULT_NO_RETRY") == "1"
		k.nem = newRetryNemesis()
		for i := range redissonClients {
			prof := profs[i%len(profs)]
			var g [4]*redissonwire.Client
			for j, addr := range []string{p1.Addr, p2.Addr, p1.Addr, p2.Addr} {
				c, err := redissonwire.Dial(ctx, addr, prof)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(c.Close)
				if j > 0 {
					c.ID = g[0].ID
				}
				if !noRetry {
					c.Resend = k.nem.resend
				}
				g[j] = c
			}
			k.nem.group(g)
			k.rc = append(k.rc, g[0], g[1])
		}
		restartProxy = step{0.45, "restart proxy 1 (a new process, same address)", func(f *fixture) {
			addr := p1.Addr
			p1.Cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p1.Exited:
			case <-time.After(15 * time.Second):
				t.Fatal("proxy 1 did not stop")
			}
			p1 = proctest.StartProxy(t, nil, set.Addrs(), append(flags, "--listen", addr)...)
		}}
	} else {
		k.engines = []*engine.Engine{newEngine(t, ctx, cfg), newEngine(t, ctx, cfg)}
	}
	var busy, unavailable atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)+1))
			for ctx.Err() == nil && k.ops.Load() < int64(target) {
				_, err := ks.hold(k, rng, w)
				switch {
				case err == nil:
				case errors.Is(err, engine.ErrNotAcquired):
					busy.Add(1)
					time.Sleep(time.Duration(500+rng.IntN(1000)) * time.Microsecond)
				default:
					unavailable.Add(1)
					time.Sleep(time.Duration(2+rng.IntN(3)) * time.Millisecond)
				}
			}
		}()
	}
	injected := 0
	rng := rand.New(rand.NewPCG(seed, 0))
	steps := kindSteps(rng)
	if restartProxy.do != nil {
		steps = append(steps, restartProxy)
		slices.SortStableFunc(steps, func(a, b step) int { return cmp.Compare(a.at, b.at) })
	}
	for _, s := range steps {
		for ctx.Err() == nil && float64(k.ops.Load()) < s.at*float64(target) {
			time.Sleep(2 * time.Millisecond)
		}
		if ctx.Err() != nil {
			break
		}
		t.Logf("%6.2fs at %5d operations: %s", time.Since(start).Seconds(), k.ops.Load(), s.desc)
		s.do(f)
		injected++
	}
	awaitWorkers(t, ctx, cancel, &wg, func() bool { return k.ops.Load() >= int64(target) })
	ex, cr := k.chk.Result(), k.crowd.Result()
	if ks.name == "handoff" {
		var handOffs uint64
		for _, e := range k.engines {
			handOffs += e.Stats().HandOffs
		}
		k.fifo.mu.Lock()
		t.Logf("handoff: %d hand-offs in one script; FIFO: %d grants waited over %v, %d inverted", handOffs, k.fifo.checked, fifoSlack, k.fifo.inverted)
		if k.fifo.inverted != 0 {
			t.Errorf("%d Lock calls granted out of arrival order; first: %s", k.fifo.inverted, k.fifo.first)
		}
		k.fifo.mu.Unlock()
		if handOffs == 0 {
			t.Error("no hand-off went as one script")
		}
	}
	if ex.Violations() != 0 {
		t.Errorf("%d overlaps; first: %s", ex.Violations(), ex.FirstViolation)
	}
	if cr.Violations() != 0 {
		t.Errorf("%d permits exceeded, %d readers with a writer; first: %s", cr.Excess, cr.Mixed, cr.FirstViolation)
	}
	if k.nem != nil {
		t.Logf("%s: %v", ks.name, k.nem)
		if k.nem.sent.Load() == 0 && os.Getenv("REDLOCK_FAULT_NO_RETRY") != "1" {
			t.Error("the retry nemesis sent no copy")
		}
		if v := k.nem.violations(); v != 0 {
			t.Errorf("%d latched unlocks of a hold with levels left acted again (their copies answered differently); first: %s", v, k.nem.firstDiff)
		}
		if k.nem.firstNotKept != "" {
			t.Logf("first latched unlock of a last level whose copies answered differently: %s", k.nem.firstNotKept)
		}
	}
	if n := k.ops.Load(); n < int64(target) {
		t.Errorf("only %d operations of %d within %v", n, target, limit)
	}
	if injected == 0 {
		t.Error("no fault was injected")
	}
	switch ks.name {
	case "semaphore":
		if cr.MaxInside < 2 {
			t.Errorf("at most %d holder inside: the permits were not shared", cr.MaxInside)
		}
	case "rwlock", "redisson-rwlock-via-proxy":
		if cr.Writers == 0 || cr.MaxInside < 2 {
			t.Errorf("%d writers, at most %d inside: readers and writers were not both exercised", cr.Writers, cr.MaxInside)
		}
	}
	most := cr.MaxInside
	if ks.name == "reentrant" || ks.name == "lockall" || ks.name == "handoff" || ks.name == "redisson-rlock-via-proxy" || ks.name == "redisson-fairlock-via-proxy" {
		most = 1
	}
	return fmt.Sprintf("| %s | %d | %d | %d | %d | %d | %d | %d | %d | %.1f |", ks.name, k.ops.Load(), cr.Writers, most,
		ex.Overlaps, cr.Excess, cr.Mixed, busy.Load(), unavailable.Load(), time.Since(start).Seconds())
}

// stragglerGrace is how long the workers may take to finish the calls they
// are in once the run's target is reached. Every call is bounded by far
// less (a 1 s TTL, 25 ms per master, waits of at most 1 s), so a worker
// still in one after this is stuck: awaitWorkers logs where and ends the
// run's context instead of waiting out the scenario's limit (a run under
// the race detector once waited 111 s for one).
const stragglerGrace = 20 * time.Second

// awaitWorkers waits for wg; once done() holds (the target reached) it
// waits at most stragglerGrace more, then logs the test process's stacks
// that are in the scenario's calls and cancels ctx.
func awaitWorkers(t *testing.T, ctx context.Context, cancel context.CancelFunc, wg *sync.WaitGroup, done func() bool) {
	t.Helper()
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var reached time.Time
	for {
		select {
		case <-finished:
			return
		case <-ctx.Done():
			<-finished
			return
		case <-tick.C:
		}
		if reached.IsZero() {
			if done() {
				reached = time.Now()
			}
			continue
		}
		if time.Since(reached) < stragglerGrace {
			continue
		}
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var stuck []string
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "fault_test.") && !strings.Contains(g, "awaitWorkers") && !strings.Contains(g, "testing.tRunner") {
				stuck = append(stuck, g)
			}
		}
		t.Logf("%d workers still in a call %v after the target was reached: ending the run's context; their stacks:\n%s",
			len(stuck), stragglerGrace, strings.Join(stuck, "\n\n"))
		cancel()
		<-finished
		return
	}
}
