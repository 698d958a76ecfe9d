package proxy

import (
	"context"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/internal/test/redissonwire"
	"github.com/redlock-dev/redlock/proxy/internal/redisson"
)

// TestFairWaiterLeftStaysGone: a Redisson fair-lock waiter's try through
// proxy A (slow to the masters: 80 ms each way) keeps its place in the
// queue; the waiter then gives up (acquireFailed) through proxy B. The
// place was kept by a write sent after A's answer, which landed after the
// leave and put the waiter back at the head of the queue: the lock, once
// free, was refused to every other client until the entry expired (its
// wait, up to --max-ttl), where one Redis grants it (property e: state in
// one process — a pending write — decided later grants; found by the
// review of the proxy's in-memory state). Now the place is kept before
// the answer.
func TestFairWaiterLeftStaysGone(t *testing.T) {
	set := mastertest.Start(t, 3)
	relays, addrs := startRelays(t, set.Addrs())
	pa := startEnvOn(t, set, func(c *Config) { c.EngineConfig.Addrs = addrs })
	pb := startEnvOn(t, set, nil)
	prof := redissonwire.RWProfiles[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const name = "fair-left"
	lease := 10 * time.Second

	h := dialAs(t, pb.addr, "", prof)
	if ok, err := h.FairTryLock(ctx, name, 1, lease); !ok || err != nil {
		t.Fatalf("holder's tryLock(): %v %v", ok, err)
	}
	w := dialAs(t, pa.addr, "", prof)    // waiter, through proxy A
	wb := dialAs(t, pb.addr, w.ID, prof) // the same Redisson client's connection to proxy B

	// A's path to the masters is slow (80 ms each way; its timeout is 300 ms).
	for _, r := range relays {
		r.SetDelay(80 * time.Millisecond)
	}
	ok, ttl, err := w.FairTryLockWait(ctx, name, 7, lease, 20*time.Second)
	if ok || err != nil {
		t.Fatalf("waiter's try: %v %d %v", ok, ttl, err)
	}
	// The waiter gives up at once: acquireFailed through B.
	queue, _ := redisson.FairQueueKeys(name)
	if _, err := wb.Send(ctx, redissonwire.Request{Script: "redisson-3.20.0-fairAcquireFailed",
		Keys: []string{"redisson_lock_queue:{" + name + "}", "redisson_lock_timeout:{" + name + "}"},
		Args: []string{w.Owner(7), "20000"}}); err != nil {
		t.Fatalf("acquireFailed: %v", err)
	}
	for _, r := range relays {
		r.SetDelay(0)
	}
	// A late write from A would land within its 80 ms delay; an absence
	// cannot be waited for, so this waits past it (the negative control:
	// with the write sent after the answer, the entry is back on 3 of 3).
	time.Sleep(300 * time.Millisecond)
	ghosts := 0
	for _, m := range pb.masters {
		if s, _ := m.ZScore(ctx, queue, w.Owner(7)).Result(); s > 0 {
			ghosts++
		}
	}
	t.Logf("masters holding the departed waiter's queue entry: %d/3", ghosts)

	if n, err := h.FairUnlock(ctx, name, 1, lease); n != 1 || err != nil {
		t.Fatalf("holder's unlock: %d %v", n, err)
	}
	other := dialAs(t, pb.addr, "", prof)
	deadline := time.Now().Add(2 * time.Second)
	for {
		ok, err := other.FairTryLock(ctx, name, 1, lease)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a free fair lock whose only waiter left (acquireFailed answered) is refused to tryLock() for 2s+ (ghost entry on %d/3 masters, blocks until its 20 s place expires); one Redis grants it", ghosts)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
