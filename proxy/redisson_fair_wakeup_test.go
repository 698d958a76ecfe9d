package proxy

// The wake-ups of a Redisson RFairLock's queue after an unlock: one follow
// chain per lock, however many unlocks are sent; the head woken with a
// master slow, or behind places that ran out.

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/internal/test/redissonwire"
)

// TestRedissonFairOneChainPerLock: every unlock of a free fair lock with
// a queued head starts its own follow chain (a quorum read, a wake-up, a
// time.AfterFunc for the head's whole remaining life, up to fairFollow
// times). Any client can send unlocks of a free lock (answered 1): the
// proxy's pending timers grow with them, unbounded, and when the dead
// head's place runs out every chain fires at once and wakes the next
// waiter — one wake-up per unlock sent.
//
// Found by the adversarial review of the proxy's RFairLock: it failed
// before its fix.
func TestRedissonFairOneChainPerLock(t *testing.T) {
	e := startEnv(t, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	prof := redissonwire.RWProfiles[0]
	name := "fairreview-chains"
	a := dialAs(t, e.addr, "", prof)
	d1 := dialAs(t, e.addr, "", prof)
	d2 := dialAs(t, e.addr, "", prof)
	x := dialAs(t, e.addr, "", prof)
	if ok, err := a.FairTryLock(ctx, name, 1, 30*time.Second); !ok || err != nil {
		t.Fatalf("a's tryLock(): %v %v", ok, err)
	}
	// d1 is the dead head: its place lasts place from here. The unlocks
	// below must all be answered before it runs out (an unlock of the free
	// lock after that wakes d2 itself, as it should).
	const place = 4 * time.Second
	placed := time.Now()
	if ok, _, err := d1.FairTryLockWait(ctx, name, 1, 30*time.Second, place); ok || err != nil {
		t.Fatalf("d1 queues: %v %v", ok, err)
	}
	if ok, _, err := d2.FairTryLockWait(ctx, name, 1, 30*time.Second, 10*time.Second); ok || err != nil {
		t.Fatalf("d2 queues: %v %v", ok, err)
	}
	sub := redis.NewClient(&redis.Options{Addr: e.addr, Protocol: 2, DisableIndentity: true, MaxRetries: -1})
	defer sub.Close()
	ps := sub.Subscribe(ctx, d2.FairChannel(name, 1))
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	var got atomic.Int64
	go func() {
		for range ps.Channel() {
			got.Add(1)
		}
	}()
	if n, err := a.FairUnlock(ctx, name, 1, 30*time.Second); n != 1 || err != nil {
		t.Fatalf("a's unlock: %d %v", n, err)
	}
	const k = 200
	for i := range k {
		if n, err := x.FairUnlock(ctx, name, int64(i), 30*time.Second); n != 1 || err != nil {
			t.Fatalf("unlock %d of the free lock: %d %v", i, n, err)
		}
	}
	if el := time.Since(placed); el > place-200*time.Millisecond {
		t.Skipf("the %d unlocks were answered %v after the dead head queued, too close to the end of its place (%v): this machine is too slow for the scenario", k, el, place)
	}
	time.Sleep(time.Until(placed.Add(place + time.Second))) // d1's place runs out
	if n := got.Load(); n > 4 {
		t.Fatalf("the next waiter got %d wake-ups when the dead head's place ran out (%d unlocks of the free lock were sent): one follow chain (a timer for the head's life) per unlock, unbounded", n, k)
	}
}

// TestRedissonFairWakeWithSlowMaster: the wake-up after an unlock is sent
// only after rFairFollow's quorum read, whose context lasts exactly one
// per-master timeout — the same as the broadcast's own deadline, which
// starts later. With one master of five slow (here: not answering), the
// context ends first, the read fails, and no waiter is woken: the head
// sleeps to the TTL it was last answered (here 5 s; with lock() and the
// watchdog's 30 s lease, up to 30 s).
//
// Found by the adversarial review of the proxy's RFairLock: it failed
// before its fix.
func TestRedissonFairWakeWithSlowMaster(t *testing.T) {
	set := mastertest.Start(t, 5)
	relays, raddrs := startRelays(t, set.Addrs())
	e := startEnvOn(t, set, func(c *Config) {
		c.EngineConfig.Addrs = raddrs
		c.EngineConfig.MasterTimeout = 0 // the default: TTL/100 within 5-50 ms
	})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	prof := redissonwire.RWProfiles[0]
	name := "fairreview-wake"
	a := dialAs(t, e.addr, "", prof)
	w := dialAs(t, e.addr, "", prof)
	if ok, err := a.FairTryLock(ctx, name, 1, 30*time.Second); !ok || err != nil {
		t.Fatalf("a's tryLock(): %v %v", ok, err)
	}
	got := make(chan error, 1)
	var at atomic.Int64
	go func() {
		_, err := w.FairLockAt(ctx, name, 1, 30*time.Second, 10*time.Second)
		at.Store(time.Now().UnixNano())
		got <- err
	}()
	time.Sleep(500 * time.Millisecond) // queued and subscribed
	relays[4].Hold()
	defer relays[4].Release()
	t0 := time.Now()
	if n, err := a.FairUnlock(ctx, name, 1, 30*time.Second); n != 1 || err != nil {
		t.Fatalf("a's unlock: %d %v", n, err)
	}
	if err := <-got; err != nil {
		t.Fatalf("w's lock: %v", err)
	}
	if d := time.Duration(at.Load() - t0.UnixNano()); d > time.Second {
		t.Fatalf("the queue's head took the lock %v after the unlock (one master of five not answering): its wake-up was never sent", d)
	}
}

// TestRedissonFairWakeBehindExpiredPlaces: expired places are purged only
// by fair_acquire, which does not run while the lock is held; the read
// looks at the first 64 entries only. After 70 waiters whose places ran
// out (tryLock(wait) of 1 ms, or processes that died), the live waiter
// behind them is never woken by the unlock (no head agreed: no wake-up)
// and sleeps to the TTL it was answered.
//
// Found by the adversarial review of the proxy's RFairLock: it failed
// before its fix.
func TestRedissonFairWakeBehindExpiredPlaces(t *testing.T) {
	e := startEnv(t, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	prof := redissonwire.RWProfiles[0]
	name := "fairreview-expired"
	a := dialAs(t, e.addr, "", prof)
	if ok, err := a.FairTryLock(ctx, name, 1, 30*time.Second); !ok || err != nil {
		t.Fatalf("a's tryLock(): %v %v", ok, err)
	}
	x := dialAs(t, e.addr, "", prof)
	for i := range 70 {
		if ok, _, err := x.FairTryLockWait(ctx, name, int64(100+i), 30*time.Second, time.Millisecond); ok || err != nil {
			t.Fatalf("short waiter %d: %v %v", i, ok, err)
		}
	}
	// w queues right behind them (its place keeps the queue's keys).
	w := dialAs(t, e.addr, "", prof)
	if ok, _, err := w.FairTryLockWait(ctx, name, 1, 30*time.Second, 10*time.Second); ok || err != nil {
		t.Fatalf("w queues: %v %v", ok, err)
	}
	time.Sleep(50 * time.Millisecond) // the short places (10 ms) ran out
	got := make(chan error, 1)
	var at atomic.Int64
	go func() {
		_, err := w.FairLockAt(ctx, name, 1, 30*time.Second, 10*time.Second)
		at.Store(time.Now().UnixNano())
		got <- err
	}()
	time.Sleep(300 * time.Millisecond)
	t0 := time.Now()
	if n, err := a.FairUnlock(ctx, name, 1, 30*time.Second); n != 1 || err != nil {
		t.Fatalf("a's unlock: %d %v", n, err)
	}
	if err := <-got; err != nil {
		t.Fatalf("w's lock: %v", err)
	}
	if d := time.Duration(at.Load() - t0.UnixNano()); d > time.Second {
		t.Fatalf("the only live waiter took the lock %v after the unlock: not woken (70 expired places ahead of it)", d)
	}
}
