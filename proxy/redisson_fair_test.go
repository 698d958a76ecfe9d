package proxy

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/test/redissonwire"
)

// TestRedissonFairLock replays Redisson's RFairLock traffic, for every
// release whose texts differ (3.20.0 to 4.7, but 3.31.0's waiting
// tryLock), through two proxies on the same five masters, the first
// restarted mid-hold: tryLock() and re-entry, a refused tryLock() that
// does not queue, three waiters arriving one after another through either
// proxy served in that order (each woken on its own channel),
// forceUnlock, an unlock of the free lock; and, once per waiting tryLock
// text, a tryLock(wait) that gives up and leaves the queue and a waiter
// that dies queued and blocks the next one only until its place expires.
func TestRedissonFairLock(t *testing.T) {
	eachAcrossProxies(t, "fair-", redissonFairAcrossProxies)
}

func redissonFairAcrossProxies(t *testing.T, prof redissonwire.Profile, name string, p1 func() string, p2 string, restart func(), e *env) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lease := 30 * time.Second
	a1 := dialAs(t, p1(), "", prof)
	a2 := dialAs(t, p2, a1.ID, prof)
	b2 := dialAs(t, p2, "", prof)

	if ok, err := a1.FairTryLock(ctx, name, 1, lease); !ok || err != nil {
		t.Fatalf("tryLock() of a free fair lock through P1: %v, %v", ok, err)
	}
	held := 0
	for _, m := range e.masters {
		if v, _ := m.Get(ctx, name).Result(); strings.HasPrefix(v, a1.Owner(1)+"|R|1|") {
			held++
		}
	}
	if held < e.quorum() {
		t.Fatalf("%d masters hold the owner's hold", held)
	}
	if ok, _, err := a2.FairTryLockWait(ctx, name, 1, lease, time.Minute); !ok || err != nil {
		t.Fatalf("re-entry through P2: %v, %v", ok, err)
	}
	if n, err := a2.HoldCount(ctx, name, 1); n != 2 || err != nil {
		t.Fatalf("getHoldCount: %d, %v; want 2", n, err)
	}
	if ok, err := b2.FairTryLock(ctx, name, 1, lease); ok || err != nil {
		t.Fatalf("another thread's tryLock(): %v, %v; want refused", ok, err)
	}

	restart()
	a1 = dialAs(t, p1(), a1.ID, prof)
	if r, err := a1.Renew(ctx, lease, []string{name}, []int64{1}); err != nil || len(r) != 1 || r[0] != 1 {
		t.Fatalf("the watchdog's renewal through P1 after its restart: %v, %v", r, err)
	}

	// Three waiters arrive one after another, through either proxy.
	type got struct {
		who int
		err error
	}
	order := make(chan got, 3)
	var wg sync.WaitGroup
	waiters := make([]*redissonwire.Client, 3)
	for i := range waiters {
		addr := p1()
		if i == 1 {
			addr = p2
		}
		w := dialAs(t, addr, "", prof)
		waiters[i] = w
		wg.Go(func() {
			_, err := w.FairLockAt(ctx, name, 1, lease, 0)
			order <- got{i, err}
			if err == nil {
				time.Sleep(20 * time.Millisecond)
				if n, err := w.FairUnlock(ctx, name, 1, lease); n != 1 || err != nil {
					t.Errorf("waiter %d's unlock: %d, %v", i, n, err)
				}
			}
		})
		time.Sleep(150 * time.Millisecond) // queued before the next arrives
	}
	if n, err := a2.FairUnlock(ctx, name, 1, lease); n != 0 || err != nil {
		t.Fatalf("the nested unlock: %d, %v; want 0", n, err)
	}
	start := time.Now()
	if n, err := a1.FairUnlock(ctx, name, 1, lease); n != 1 || err != nil {
		t.Fatalf("the unlock: %d, %v; want 1", n, err)
	}
	for want := range 3 {
		g := <-order
		if g.err != nil || g.who != want {
			t.Fatalf("acquisition %d: waiter %d (%v); want waiter %d: arrival order", want, g.who, g.err, want)
		}
	}
	wg.Wait()
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("three waiters took %v after the release: not woken on their channels", d)
	}

	// forceUnlock ends whatever hold; then unlocking the free lock answers
	// 1 (every release).
	if ok, err := a1.FairTryLock(ctx, name, 1, lease); !ok || err != nil {
		t.Fatalf("tryLock(): %v, %v", ok, err)
	}
	if ok, err := a2.FairForceUnlock(ctx, name); !ok || err != nil {
		t.Fatalf("forceUnlock: %v, %v", ok, err)
	}
	if ok, err := a2.IsLocked(ctx, name); ok || err != nil {
		t.Fatalf("locked after forceUnlock: %v, %v", ok, err)
	}
	if n, err := a1.FairUnlock(ctx, name, 1, lease); n != 1 || err != nil {
		t.Fatalf("unlock of a free fair lock: %d, %v; want 1", n, err)
	}

	if i := slices.IndexFunc(redissonwire.RWProfiles, func(p redissonwire.Profile) bool { return p.FairWait == prof.FairWait }); redissonwire.RWProfiles[i].Name != prof.Name {
		return // the rest once per waiting tryLock text (each takes seconds)
	}
	// A tryLock(wait) that gives up leaves the queue; a waiter that dies
	// queued blocks the next only until its place (its wait) expires.
	if ok, err := a1.FairTryLock(ctx, name, 1, lease); !ok || err != nil {
		t.Fatalf("tryLock(): %v, %v", ok, err)
	}
	if _, err := b2.FairLockAt(ctx, name, 1, lease, 300*time.Millisecond); !errors.Is(err, redissonwire.ErrGaveUp) {
		t.Fatalf("tryLock(300ms) while held: %v; want it to give up", err)
	}
	dead := dialAs(t, p2, "", prof)
	if ok, _, err := dead.FairTryLockWait(ctx, name, 1, lease, time.Second); ok || err != nil {
		t.Fatalf("the doomed waiter's try: %v, %v", ok, err)
	}
	dead.Close() // never tries again, never sends acquireFailed
	next := dialAs(t, p1(), "", prof)
	done := make(chan error, 1)
	go func() {
		_, err := next.FairLockAt(ctx, name, 1, lease, 0)
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	if n, err := a1.FairUnlock(ctx, name, 1, lease); n != 1 || err != nil {
		t.Fatalf("unlock: %d, %v", n, err)
	}
	start = time.Now()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("the waiter behind a dead one (place 1 s) waited %v", d)
	}
	if n, err := next.FairUnlock(ctx, name, 1, lease); n != 1 || err != nil {
		t.Fatalf("the last waiter's unlock: %d, %v", n, err)
	}
}
