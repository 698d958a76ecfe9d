package proxy

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/test/check"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
)

// Property (i) for Redisson's unlocks, after the first reply: Redisson
// 3.24+ (and node-redisson) DEL the unlock's latch as soon as the first
// reply arrives, while another copy of the same request may still be on
// its way — queued in another proxy, or its read held on the wire to the
// masters. A proxy that did that DEL let the copy find count 1 and no
// latch and decrement the hold again: a count-2 hold freed by one unlock,
// another owner granted (found by the review of issue #46). The latch now
// lives to its TTL, and the TTL is the client's up to ten minutes.

// latchKinds are the Redisson kinds whose unlock carries a latch.
type latchKind struct {
	name   string
	take   func(k, owner string) []string
	unlock func(k, owner, latch string) []string
}

func latchKinds(t *testing.T, lease string) []latchKind {
	writeTry, writeUnlock := rSHA(t, "redisson-3.20.0-rwWriteTryLock"), rSHA(t, "redisson-3.44.0-rwWriteUnlock")
	rlockTry, rlockUnlock := rSHA(t, "redisson-3.19.0-tryLock"), rSHA(t, "redisson-3.24.0-unlock")
	fairTry, fairUnlock := rSHA(t, "redisson-3.31.0-fairTryLock"), rSHA(t, "redisson-3.31.0-fairUnlock")
	now := func() string { return strconv.FormatInt(time.Now().UnixMilli(), 10) }
	fairKeys := func(k string) []string {
		return []string{k, "redisson_lock_queue:{" + k + "}", "redisson_lock_timeout:{" + k + "}"}
	}
	evalsha := func(sha string, keys []string, argv ...string) []string {
		return append(append([]string{"EVALSHA", sha, strconv.Itoa(len(keys))}, keys...), argv...)
	}
	return []latchKind{
		{name: "RLock",
			take: func(k, o string) []string { return evalsha(rlockTry, []string{k}, lease, o) },
			unlock: func(k, o, l string) []string {
				return evalsha(rlockUnlock, []string{k, "redisson_lock__channel:{" + k + "}", l}, "0", lease, o, "publish", "10000")
			}},
		{name: "RReadWriteLock write",
			take: func(k, o string) []string { return evalsha(writeTry, []string{k}, lease, o+":write") },
			unlock: func(k, o, l string) []string {
				return evalsha(writeUnlock, []string{k, "redisson_rwlock:{" + k + "}", l}, "1", lease, o+":write", "publish", "10000")
			}},
		{name: "RFairLock",
			take: func(k, o string) []string { return evalsha(fairTry, fairKeys(k), lease, o, now(), "300000") },
			unlock: func(k, o, l string) []string {
				return evalsha(fairUnlock, append(fairKeys(k), "redisson_lock__channel:{"+k+"}", l), "0", lease, o, now(), "publish", "10000")
			}},
	}
}

// TestLatchOutlivesClientDEL: a count-2 hold; one unlock request answered
// through proxy 1, Redisson's DEL of its latch, then another copy of the
// request through proxy 0 (sent late): it answers the first reply, and
// another owner is still refused.
func TestLatchOutlivesClientDEL(t *testing.T) {
	x := startRuleRun(t, "", nil)
	const owner, other = "owner-0123456789:7", "other-0123456789:1"
	for i, kd := range latchKinds(t, "9000") {
		t.Run(kd.name, func(t *testing.T) {
			x.t = t
			k := fmt.Sprintf("latchdel-%d", i) // braceless, as most names: Redisson braces it in the latch's name
			for range 2 {
				if r := x.cmd(t, 0, kd.take(k, owner)...); r != "$-1\r\n" {
					t.Fatalf("taking %s: %q", k, r)
				}
			}
			latch := "redisson_unlock_latch:{" + k + "}:0123456789abcdef0123456789abcdef"
			req := kd.unlock(k, owner, latch)
			if r := x.cmd(t, 1, req...); r != ":0\r\n" {
				t.Fatalf("the unlock's first run: %q, want :0 (one level released)", r)
			}
			if r := x.cmd(t, 1, "DEL", latch); r != ":1\r\n" {
				t.Fatalf("DEL of the latch: %q, want :1 (the latch some master has)", r)
			}
			if r := x.cmd(t, 0, req...); r != ":0\r\n" {
				t.Errorf("the same request again, after the DEL: %q, want the first reply :0", r)
			}
			if r := x.cmd(t, 0, kd.take(k, other)...); r == "$-1\r\n" {
				t.Fatalf("one unlock request sent twice freed a count-2 hold: another owner was granted")
			}
		})
	}
}

// TestLatchOutlivesClientDELInFlight: the first copy of the request is
// inside proxy 1, its read held on the wire to every master, while the
// other copy is answered through proxy 0 and Redisson deletes the latch;
// then the wire lets the first copy's read through.
func TestLatchOutlivesClientDELInFlight(t *testing.T) {
	set := mastertest.Start(t, 5)
	relays, raddrs := startRelays(t, set.Addrs())
	x := startRuleRunOn(t, set, "", func(i int, c *Config) {
		if i == 1 {
			c.EngineConfig.Addrs = raddrs
			c.EngineConfig.MasterTimeout = 5 * time.Second // the hold below is the test's, not a slow master
		}
	})
	const owner, other = "owner-0123456789:7", "other-0123456789:1"
	kd := latchKinds(t, "9000")[0]
	for trial := range 3 {
		k := fmt.Sprintf("latchinflight-%d", trial)
		for range 2 {
			if r := x.cmd(t, 0, kd.take(k, owner)...); r != "$-1\r\n" {
				t.Fatalf("taking %s: %q", k, r)
			}
		}
		x.cmd(t, 1, "HGET", k, owner) // proxy 1's connections are up
		latch := "redisson_unlock_latch:{" + k + "}:" + fmt.Sprintf("%032x", trial+1)
		req := kd.unlock(k, owner, latch)
		for _, r := range relays {
			r.Hold()
		}
		first := make(chan string, 1)
		go func() { first <- sendOnce(x.p[1].addr, req...) }()
		check.Eventually(t, 10*time.Second, "the first copy's read held on the wire to every master", func() bool {
			for _, r := range relays {
				if !r.Holding([]byte(k)) {
					return false
				}
			}
			return true
		})
		r0 := x.cmd(t, 0, req...)
		x.cmd(t, 0, "DEL", latch)
		for _, r := range relays {
			r.Release()
		}
		r1 := <-first
		if r0 != ":0\r\n" || r1 != ":0\r\n" {
			t.Errorf("trial %d: the two copies answered %q (proxy 0) and %q (proxy 1), want :0 both", trial, r0, r1)
		}
		if r := x.cmd(t, 0, kd.take(k, other)...); r == "$-1\r\n" {
			t.Fatalf("trial %d: one unlock request sent twice freed a count-2 hold: another owner was granted", trial)
		}
	}
}

// TestLatchKeepsClientTTL: the latch lives as long as the client asks —
// Redisson's (timeout + retryInterval) × retryAttempts, 94.5 s for a 30 s
// timeout — on every master, where a one-minute cap let its last resend
// find no latch; and no longer than ten minutes.
func TestLatchKeepsClientTTL(t *testing.T) {
	x := startRuleRun(t, "", nil)
	rlockTry, rlockUnlock := rSHA(t, "redisson-3.19.0-tryLock"), rSHA(t, "redisson-3.24.0-unlock")
	const owner = "owner-0123456789:7"
	for _, c := range []struct {
		ask       string
		low, high time.Duration
	}{{"94500", 90 * time.Second, 94500 * time.Millisecond}, {"3600000", 9 * time.Minute, 10 * time.Minute}} {
		k := "latchttl-" + c.ask
		for range 2 {
			if r := x.cmd(t, 0, "EVALSHA", rlockTry, "1", k, "9000", owner); r != "$-1\r\n" {
				t.Fatalf("taking %s: %q", k, r)
			}
		}
		id := "0123456789abcdef0123456789abcdef"
		req := []string{"EVALSHA", rlockUnlock, "3", k, "redisson_lock__channel:{" + k + "}", "redisson_unlock_latch:{" + k + "}:" + id, "0", "9000", owner, "publish", c.ask}
		if r := x.cmd(t, 0, req...); r != ":0\r\n" {
			t.Fatalf("unlock: %q", r)
		}
		check.Eventually(t, 5*time.Second, "the latch on every master (the unlock answered at a quorum)", func() bool {
			for _, m := range x.masters {
				if n, _ := m.Exists(context.Background(), "redlock:rlatch:{"+k+"}:"+id).Result(); n != 1 {
					return false
				}
			}
			return true
		})
		for i, m := range x.masters {
			pttl, err := m.PTTL(context.Background(), "redlock:rlatch:{"+k+"}:"+id).Result()
			if err != nil || pttl < c.low || pttl > c.high {
				t.Errorf("latch asked for %s ms: PTTL %v on master %d (%v), want %v–%v", c.ask, pttl, i, err, c.low, c.high)
			}
		}
	}
}
