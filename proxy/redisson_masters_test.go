package proxy

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/localmaster"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/internal/test/proctest"
	"github.com/redlock-dev/redlock/internal/test/redissonwire"
)

// The tests in this file check that a Redisson hold lives on the masters
// (docs/safety.md, "Redisson"): any proxy on the same masters serves any
// command of any client, and a proxy restart loses nothing.

// dialAs dials addr as the Redisson client id (a new one when id is "").
func dialAs(t *testing.T, addr, id string, prof redissonwire.Profile) *redissonwire.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := redissonwire.Dial(ctx, addr, prof)
	if err != nil {
		t.Fatal(err)
	}
	if id != "" {
		c.ID = id
	}
	t.Cleanup(c.Close)
	return c
}

// redissonAcrossProxies drives one Redisson client (a) and another (b),
// each with connections to two proxies on the same masters, through a
// hold: tryLock through P1, renewal and re-entry through P2, the hold
// count read through either, b refused through either, P1 restarted
// mid-hold (renewal and hold count through the new P1), unlock through
// P2 (0) then P1 (1), and b's lock() through P1 woken by that unlock.
// p1 returns P1's current address; restart restarts P1.
func redissonAcrossProxies(t *testing.T, prof redissonwire.Profile, name string, p1 func() string, p2 string, restart func()) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a1 := dialAs(t, p1(), "", prof)
	a2 := dialAs(t, p2, a1.ID, prof)
	b1 := dialAs(t, p1(), "", prof)
	b2 := dialAs(t, p2, b1.ID, prof)

	if ok, _, err := a1.TryLock(ctx, name, 1, 30*time.Second); !ok || err != nil {
		t.Fatalf("tryLock through P1: %v, %v", ok, err)
	}
	if r, err := a2.Renew(ctx, 30*time.Second, []string{name}, []int64{1}); err != nil || len(r) != 1 || r[0] != 1 {
		t.Fatalf("renewal through P2 of a lock taken through P1: %v, %v; want [1]", r, err)
	}
	if ok, _, err := a2.TryLock(ctx, name, 1, 30*time.Second); !ok || err != nil {
		t.Fatalf("re-entry through P2: %v, %v; want acquired (the same owner)", ok, err)
	}
	for i, c := range []*redissonwire.Client{a1, a2} {
		if n, err := c.HoldCount(ctx, name, 1); n != 2 || err != nil {
			t.Fatalf("getHoldCount through P%d: %d, %v; want 2", i+1, n, err)
		}
	}
	if ok, err := a2.HeldByThread(ctx, name, 1); !ok || err != nil {
		t.Fatalf("isHeldByThread through P2: %v, %v", ok, err)
	}
	for i, b := range []*redissonwire.Client{b1, b2} {
		ok, ttl, err := b.TryLock(ctx, name, 1, 30*time.Second)
		if ok || err != nil || ttl <= 0 || ttl > 30000 {
			t.Fatalf("another owner's tryLock through P%d: %v, ttl %d, %v; want refused with the holder's TTL", i+1, ok, ttl, err)
		}
		if _, err := b.Unlock(ctx, name, 1); !errors.Is(err, redissonwire.ErrNotOwner) {
			t.Fatalf("another owner's unlock through P%d: %v; want not locked by current thread", i+1, err)
		}
	}

	restart()
	a1 = dialAs(t, p1(), a1.ID, prof)
	b1 = dialAs(t, p1(), b1.ID, prof)
	if r, err := a1.Renew(ctx, 30*time.Second, []string{name}, []int64{1}); err != nil || len(r) != 1 || r[0] != 1 {
		t.Fatalf("renewal through P1 after its restart: %v, %v; want [1]", r, err)
	}
	if n, err := a1.HoldCount(ctx, name, 1); n != 2 || err != nil {
		t.Fatalf("getHoldCount through P1 after its restart: %d, %v; want 2", n, err)
	}

	done := make(chan error, 1)
	go func() { done <- b1.Lock(ctx, name, 1, 30*time.Second) }()
	if n, err := a2.Unlock(ctx, name, 1); n != 0 || err != nil {
		t.Fatalf("first unlock through P2: %d, %v; want 0 (still held)", n, err)
	}
	select {
	case err := <-done:
		t.Fatalf("b's lock() returned at hold count 1: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	start := time.Now()
	if n, err := a1.Unlock(ctx, name, 1); n != 1 || err != nil {
		t.Fatalf("second unlock through P1: %d, %v; want 1 (released)", n, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Fatalf("b's lock() waited %v after the release: not woken by the unlock's wake-up", waited)
	}
	if n, err := b2.HoldCount(ctx, name, 1); n != 1 || err != nil {
		t.Fatalf("b's hold count through P2: %d, %v; want 1", n, err)
	}
	if _, err := a2.Unlock(ctx, name, 1); !errors.Is(err, redissonwire.ErrNotOwner) {
		t.Fatalf("a's third unlock: %v; want not locked by current thread", err)
	}
	if n, err := b2.Unlock(ctx, name, 1); n != 1 || err != nil {
		t.Fatalf("b's unlock through P2: %d, %v", n, err)
	}
}

// TestRedissonTwoProxies: two proxy servers on the same five masters
// serve one Redisson client's commands whichever proxy each reaches, for
// every recognised Redisson release, and a restart of either proxy
// mid-hold loses nothing. Before the holds moved to the masters, the
// renewal through P2 answered 0 (Redisson stops renewing; at the lease end
// a second client is granted the lock while the first works).
func TestRedissonTwoProxies(t *testing.T) {
	e1 := startEnv(t, 5, nil)
	e2 := startEnvOn(t, e1.set, nil)
	top := t
	for i, prof := range redissonwire.Profiles {
		t.Run(prof.Name, func(t *testing.T) {
			// Either proxy restarted: the first one in turn.
			first, second := &e1, &e2
			if i%2 == 1 {
				first, second = second, first
			}
			redissonAcrossProxies(t, prof, "two-"+strings.ReplaceAll(prof.Name, " ", ""), func() string { return (*first).addr }, (*second).addr, func() {
				(*first).srv.Close()
				*first = startEnvOn(top, e1.set, nil) // lives on after this subtest
			})
		})
	}
}

// TestRedissonTwoProxyProcesses is TestRedissonTwoProxies with two real
// `redlock proxy` processes; the first is stopped mid-hold and a new
// process started in its place.
func TestRedissonTwoProxyProcesses(t *testing.T) {
	set := startEnv(t, 5, nil).set
	p1 := startProxyProc(t, nil, set.Addrs())
	p2 := startProxyProc(t, nil, set.Addrs())
	prof := redissonwire.Profiles[0]
	redissonAcrossProxies(t, prof, "procs", func() string { return p1.Addr }, p2.Addr, func() {
		p1.Cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p1.Exited:
		case <-time.After(15 * time.Second):
			t.Fatal("the first proxy did not stop")
		}
		p1 = &proxyProc{Proxy: proctest.StartProxy(t, nil, set.Addrs()), t: t}
	})
}

// TestRedissonLatchAcrossProxies: an unlock retried with the same latch
// key through another proxy (its first reply was lost) answers the first
// one's result and does not decrement again: the latch is on the masters.
func TestRedissonLatchAcrossProxies(t *testing.T) {
	e1 := startEnv(t, 5, nil)
	e2 := startEnvOn(t, e1.set, nil)
	ctx := context.Background()
	prof := redissonwire.Profiles[0]
	a1 := dialAs(t, e1.addr, "", prof)
	a2 := dialAs(t, e2.addr, a1.ID, prof)
	for range 2 {
		if ok, _, err := a1.TryLock(ctx, "latched", 1, 30*time.Second); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	sha := rSHA(t, "redisson-3.24.0-unlock")
	unlock := []string{"EVALSHA", sha, "3", "latched", "redisson_lock__channel:{latched}", "redisson_unlock_latch:{latched}:0123456789abcdef", "0", "30000", a1.Owner(1), "publish", "5000"}
	if got := dialRaw(t, e1.addr).cmd(unlock...); got != ":0\r\n" {
		t.Fatalf("unlock through P1: %q", got)
	}
	if got := dialRaw(t, e2.addr).cmd(unlock...); got != ":0\r\n" {
		t.Fatalf("the same unlock retried through P2: %q; want :0 (the first one's answer)", got)
	}
	if n, err := a2.HoldCount(ctx, "latched", 1); n != 1 || err != nil {
		t.Fatalf("hold count after an unlock and its retry: %d, %v; want 1 (one decrement)", n, err)
	}
	if got := dialRaw(t, e2.addr).cmd("DEL", "redisson_unlock_latch:{latched}:0123456789abcdef"); got != ":1\r\n" {
		t.Fatalf("DEL of the latch: %q", got)
	}
}

// TestRedissonFencedAcrossProxies: RFencedLock's token is read back
// through another proxy and after a restart; re-entry through another
// proxy answers the same token; each later holder's token is higher,
// whichever proxy granted it; mixing RLock and RFencedLock on one name by
// the same owner is an error, not token 0.
func TestRedissonFencedAcrossProxies(t *testing.T) {
	e1 := startEnv(t, 5, nil)
	e2 := startEnvOn(t, e1.set, nil)
	ctx := context.Background()
	prof := redissonwire.Profiles[0]
	last := int64(0)
	for round := range 4 {
		pa, pb := e1.addr, e2.addr
		if round%2 == 1 {
			pa, pb = pb, pa
		}
		a := dialAs(t, pa, "", prof)
		b := dialAs(t, pb, a.ID, prof)
		tok, ttl, err := a.FencedLock(ctx, "fenced2", 1, 30*time.Second)
		if err != nil || ttl != -1 || tok <= last {
			t.Fatalf("round %d: token %d (last %d), ttl %d, %v", round, tok, last, ttl, err)
		}
		if got, ok, err := b.Token(ctx, "fenced2"); !ok || got != tok || err != nil {
			t.Fatalf("round %d: getToken through the other proxy: %d, %v, %v; want %d", round, got, ok, err, tok)
		}
		if tok2, _, err := b.FencedLock(ctx, "fenced2", 1, 30*time.Second); tok2 != tok || err != nil {
			t.Fatalf("round %d: re-entry through the other proxy: token %d, %v; want %d", round, tok2, err, tok)
		}
		if ok, _, err := b.TryLock(ctx, "fenced2", 1, 30*time.Second); ok || err == nil || !strings.Contains(err.Error(), "one lock name, one kind") {
			t.Fatalf("round %d: RLock tryLock by the RFencedLock's owner: %v, %v; want the kind error", round, ok, err)
		}
		for range 2 {
			if _, err := b.Unlock(ctx, "fenced2", 1); err != nil {
				t.Fatal(err)
			}
		}
		last = tok
	}
}

// TestRedissonUnlockAfterLease: a lock held twice whose lease ran out
// answers nil (not locked by current thread) to the next unlock, as Redis
// does (before, the proxy answered 0: "still held").
func TestRedissonUnlockAfterLease(t *testing.T) {
	e := startEnv(t, 3, nil)
	ctx := context.Background()
	a := dialAs(t, e.addr, "", redissonwire.Profiles[0])
	for range 2 {
		if ok, _, err := a.TryLock(ctx, "short", 1, 300*time.Millisecond); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	time.Sleep(500 * time.Millisecond)
	if n, err := a.Unlock(ctx, "short", 1); !errors.Is(err, redissonwire.ErrNotOwner) {
		t.Fatalf("unlock after the lease ran out: %d, %v; want not locked by current thread", n, err)
	}
}

// TestRedissonCountNeverUnder: the hold count survives masters that
// disagree. Two of five masters are paused during two re-entries (count
// 3 on the other three); then two of those three are paused and the two
// stale ones resumed, so that every quorum includes the stale masters.
// No unlock may release early: each answers 0 or the unavailable error
// until the third successful one, and another owner is refused until
// then. Against real redis-server (SIGSTOP/SIGCONT).
func TestRedissonCountNeverUnder(t *testing.T) {
	e := startEnv(t, 5, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	prof := redissonwire.Profiles[0]
	a := dialAs(t, e.addr, "", prof)
	b := dialAs(t, e.addr, "", prof)
	countNeverUnder(t, e,
		func() (bool, error) { ok, _, err := a.TryLock(ctx, "counted", 1, 30*time.Second); return ok, err },
		func() (int64, error) { return a.Unlock(ctx, "counted", 1) },
		func() (bool, error) { ok, _, err := b.TryLock(ctx, "counted", 1, 30*time.Second); return ok, err })
}

// countNeverUnder takes a hold (take), re-enters it twice with masters 3
// and 4 paused, then pauses 0 and 1 and resumes 3 and 4, and unlocks
// until released: exactly two unlocks answer 0 before the one that
// answers 1 (others answer the unavailable error), and another owner
// (other) is refused until then.
func countNeverUnder(t *testing.T, e *env, take func() (bool, error), unlock func() (int64, error), other func() (bool, error)) {
	t.Helper()
	ms := e.set.Masters()
	set := func(pause bool, idx ...int) {
		t.Helper()
		for _, i := range idx {
			f := ms[i].Resume
			if pause {
				f = ms[i].Pause
			}
			if err := f(); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(func() { set(false, 0, 1, 2, 3, 4) })
	if ok, err := take(); !ok || err != nil {
		t.Fatal(ok, err)
	}
	set(true, 3, 4)
	for i := range 2 {
		if ok, err := take(); !ok || err != nil {
			t.Fatalf("re-entry %d with 2 of 5 masters paused: %v, %v", i+1, ok, err)
		}
	}
	set(true, 0, 1)
	set(false, 3, 4)
	released, zeros, errs := false, 0, 0
	for step := 0; !released; step++ {
		if step == 3 {
			set(false, 0, 1)
		}
		if step > 40 {
			t.Fatalf("no release after %d unlocks (%d answered 0, %d errors)", step, zeros, errs)
		}
		n, err := unlock()
		switch {
		case err != nil && strings.Contains(err.Error(), "unavailable"):
			errs++
			time.Sleep(50 * time.Millisecond)
			continue
		case err != nil:
			t.Fatalf("unlock %d: %v", step, err)
		case n == 1:
			released = true
			if zeros != 2 {
				t.Fatalf("released by the unlock after %d that answered 0; the count was 3: released early", zeros)
			}
		default:
			zeros++
			if ok, err := other(); ok || (err != nil && !strings.Contains(err.Error(), "unavailable")) {
				t.Fatalf("another owner after %d unlocks of 3 holds: acquired %v, %v", zeros, ok, err)
			}
		}
	}
	if ok, err := other(); !ok || err != nil {
		t.Fatalf("another owner after the last unlock: %v, %v", ok, err)
	}
	t.Logf("3 holds released by 2 unlocks answering 0 and one answering 1, %d unavailable errors on the way", errs)
}

// TestRedissonNestedUnlockResetsLease: Redisson's unlock that leaves the
// count above zero resets the lock's TTL to the lease (pexpire) and
// answers 0, as one Redis does: with a 2 s lease taken twice and the
// inner unlock 1.5 s later, another owner is still refused 1 s after it.
// Through the proxy the decrement kept the old TTL and the other owner
// was granted (found by the review of issue #30); it is an extension now,
// through the grant rule (a row of the table).
func TestRedissonNestedUnlockResetsLease(t *testing.T) {
	prof := redissonwire.Profiles[0]
	run := func(addr string) bool {
		ctx := context.Background()
		dial := func() *redissonwire.Client {
			c, err := redissonwire.Dial(ctx, addr, prof)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close)
			return c
		}
		a, b := dial(), dial()
		const name, lease = "nested:{lease}", 2 * time.Second
		for range 2 {
			if ok, _, err := a.TryLock(ctx, name, 1, lease); !ok || err != nil {
				t.Fatalf("tryLock: %v %v", ok, err)
			}
		}
		time.Sleep(1500 * time.Millisecond)
		if n, err := a.UnlockLease(ctx, name, 1, lease); n != 0 || err != nil {
			t.Fatalf("the inner unlock: %d %v; want 0 (still held)", n, err)
		}
		time.Sleep(time.Second)
		ok, _, err := b.TryLock(ctx, name, 2, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	one := mastertest.Start(t, 1)
	if run(one.Addrs()[0]) {
		t.Fatal("one redis-server granted the other owner: the test's premise is wrong")
	}
	e := startEnv(t, 5, nil)
	if run(e.addr) {
		t.Error("through the proxy another owner was granted 1 s after the inner unlock reset the 2 s lease: two holders in Redisson's model")
	}
}

// TestRedissonLatchOnCluster: on a cluster member the unlock latch lives
// in the lock's slot; a lock whose hash tag contains a brace ("{}x":
// the whole name) cannot have one there, and its 3.24+ unlock says so
// instead of answering unavailable with CROSSSLOT until the lease ends
// (found by the review of issue #30). A plain name unlocks.
func TestRedissonLatchOnCluster(t *testing.T) {
	ctx := context.Background()
	lc := mastertest.StartCluster(t, localmaster.ClusterOptions{Shards: 3})
	e := startEnvOn(t, lc.Set, func(c *Config) {
		c.EngineConfig.Addrs, c.EngineConfig.Clusters = nil, []engine.ClusterMember{{Seeds: lc.Addrs()[:2]}}
	})
	a, err := redissonwire.Dial(ctx, e.addr, redissonwire.Profiles[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	if ok, _, err := a.TryLock(ctx, "plain", 1, 30*time.Second); !ok || err != nil {
		t.Fatalf("tryLock plain: %v %v", ok, err)
	}
	if n, err := a.Unlock(ctx, "plain", 1); n != 1 || err != nil {
		t.Fatalf("unlock plain: %d %v", n, err)
	}
	if ok, _, err := a.TryLock(ctx, "{}x", 1, 30*time.Second); !ok || err != nil {
		t.Fatalf("tryLock {}x: %v %v", ok, err)
	}
	if _, err := a.Unlock(ctx, "{}x", 1); err == nil || !strings.Contains(err.Error(), "cannot keep its unlock latch") {
		t.Fatalf("unlock {}x: %v; want the latch refusal", err)
	}
}
