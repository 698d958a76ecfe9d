package proxy

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/test/redissonwire"
	"github.com/redlock-dev/redlock/proxy/internal/redisson"
)

func dialRedisson(t *testing.T, e *env, prof redissonwire.Profile) *redissonwire.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := redissonwire.Dial(ctx, e.addr, prof)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestRedissonRLock replays each recognised Redisson release's RLock
// traffic through the proxy over 5 real masters: tryLock, re-entry,
// isLocked/isHeldByThread/getHoldCount/remainTimeToLive, another client
// refused with the holder's TTL, unlock to zero (0, then 1, then "not
// locked by current thread"), the watchdog's renewal, forceUnlock.
func TestRedissonRLock(t *testing.T) {
	// forceUnlock releases whatever owner holds the lock: a tokenless
	// write, served with --allow-tokenless-writes only.
	e := startEnv(t, 5, func(c *Config) { c.AllowTokenlessWrites = true })
	for _, prof := range redissonwire.Profiles {
		t.Run(prof.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			a, b := dialRedisson(t, e, prof), dialRedisson(t, e, prof)
			if err := a.LoadScripts(ctx); err != nil {
				t.Fatal(err)
			}
			name := "orders-" + strings.ReplaceAll(prof.Name, " ", "")
			if ok, _, err := a.TryLock(ctx, name, 1, 30*time.Second); !ok || err != nil {
				t.Fatalf("tryLock: %v, %v", ok, err)
			}
			// The masters hold a plain lock key, the owner in its value.
			held := 0
			for _, m := range e.masters {
				if v, _ := m.Get(ctx, name).Result(); strings.HasPrefix(v, a.Owner(1)+"|R|1|") {
					held++
				}
			}
			if held < e.quorum() {
				t.Fatalf("%d masters hold the owner's token", held)
			}
			if ok, _, err := a.TryLock(ctx, name, 1, 30*time.Second); !ok || err != nil {
				t.Fatalf("re-entry: %v, %v", ok, err)
			}
			if n, err := a.HoldCount(ctx, name, 1); n != 2 || err != nil {
				t.Fatalf("getHoldCount: %d, %v", n, err)
			}
			if ok, err := a.HeldByThread(ctx, name, 1); !ok || err != nil {
				t.Fatalf("isHeldByThread: %v, %v", ok, err)
			}
			if ok, _ := a.HeldByThread(ctx, name, 2); ok {
				t.Fatal("isHeldByThread for another thread")
			}
			if ok, err := b.IsLocked(ctx, name); !ok || err != nil {
				t.Fatalf("isLocked: %v, %v", ok, err)
			}
			ok, ttl, err := b.TryLock(ctx, name, 1, 30*time.Second)
			if ok || err != nil || ttl <= 25000 || ttl > 30000 {
				t.Fatalf("another client: acquired %v, ttl %d, %v; want refused with the holder's TTL", ok, ttl, err)
			}
			if _, err := b.Unlock(ctx, name, 1); !errors.Is(err, redissonwire.ErrNotOwner) {
				t.Fatalf("unlock by another client: %v; want not locked by current thread", err)
			}
			// The watchdog: one renewal to 10 s.
			if r, err := a.Renew(ctx, 10*time.Second, []string{name}, []int64{1}); err != nil || len(r) != 1 || r[0] != 1 {
				t.Fatalf("renewal: %v, %v", r, err)
			}
			if ttl, _ := a.TTL(ctx, name); ttl <= 8000 || ttl > 10000 {
				t.Fatalf("PTTL after renewing to 10s: %d", ttl)
			}
			if r, _ := a.Renew(ctx, 10*time.Second, []string{name}, []int64{2}); r[0] != 0 {
				t.Fatalf("renewal by a thread that holds nothing: %v", r)
			}
			if n, err := a.Unlock(ctx, name, 1); n != 0 || err != nil {
				t.Fatalf("first unlock: %d, %v; want 0 (still held)", n, err)
			}
			if ok, _, _ := b.TryLock(ctx, name, 1, time.Second); ok {
				t.Fatal("another client got the lock at hold count 1")
			}
			if n, err := a.Unlock(ctx, name, 1); n != 1 || err != nil {
				t.Fatalf("second unlock: %d, %v; want 1 (released)", n, err)
			}
			// Released at a quorum; the last masters follow.
			for deadline := time.Now().Add(time.Second); ; time.Sleep(5 * time.Millisecond) {
				n := 0
				for _, m := range e.masters {
					if x, _ := m.Exists(ctx, name).Result(); x != 0 {
						n++
					}
				}
				if n == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d masters still hold the key a second after the release", n)
				}
			}
			if _, err := a.Unlock(ctx, name, 1); !errors.Is(err, redissonwire.ErrNotOwner) {
				t.Fatalf("third unlock: %v; want not locked by current thread", err)
			}
			// forceUnlock of a lock the proxy granted to someone else.
			if ok, _, _ := b.TryLock(ctx, name, 7, 30*time.Second); !ok {
				t.Fatal("b could not lock after the release")
			}
			if ok, err := a.ForceUnlock(ctx, name); !ok || err != nil {
				t.Fatalf("forceUnlock: %v, %v", ok, err)
			}
			if ok, _ := a.ForceUnlock(ctx, name); ok {
				t.Fatal("forceUnlock of a free lock answered true")
			}
			if ok, _, _ := a.TryLock(ctx, name, 1, time.Second); !ok {
				t.Fatal("no lock after forceUnlock")
			}
			a.Unlock(ctx, name, 1)
		})
	}
}

// TestRedissonWakeup: lock() of a held lock subscribes to the lock's
// channel through the proxy and is woken by the holder's unlock — long
// before the holder's 30 s lease would have let it retry.
func TestRedissonWakeup(t *testing.T) {
	e := startEnv(t, 5, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	prof := redissonwire.Profiles[0]
	a, b := dialRedisson(t, e, prof), dialRedisson(t, e, prof)
	if ok, _, err := a.TryLock(ctx, "wake", 1, 30*time.Second); !ok || err != nil {
		t.Fatal(ok, err)
	}
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- b.Lock(ctx, "wake", 1, 30*time.Second) }()
	for e.srv.rs.Publish(redissonwire.Channel("wake"), "1") == 0 { // "1" wakes nobody: it is not the unlock message
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("lock() returned while the lock was held: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	if n, err := a.Unlock(ctx, "wake", 1); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Fatalf("lock() waited %v: woken by the TTL, not by the unlock", waited)
	}
	if n, _ := b.HoldCount(ctx, "wake", 1); n != 1 {
		t.Fatalf("the woken client's hold count: %d", n)
	}
	if sent, _ := e.srv.rs.Wakeups(); sent == 0 {
		t.Fatal("no wake-up message counted")
	}
}

// TestRedissonUnlockLatch: an unlock retried with the same latch key (its
// reply was lost) answers the first unlock's result, not "not locked by
// current thread"; Redisson's DEL of the latch then finds it.
func TestRedissonUnlockLatch(t *testing.T) {
	e := startEnv(t, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a := dialRedisson(t, e, redissonwire.Profiles[0])
	if ok, _, err := a.TryLock(ctx, "latch", 1, 30*time.Second); !ok || err != nil {
		t.Fatal(ok, err)
	}
	first, retry, err := a.UnlockRetry(ctx, "latch", 1)
	if err != nil || first.Int != 1 || retry.Int != 1 || retry.IsNull() {
		t.Fatalf("unlock %v, retried %v, %v; want 1 twice", first, retry, err)
	}
}

// TestRedissonFencedLock: RFencedLock's token is the engine's fencing
// token: above every earlier holder's, and getToken reads it.
func TestRedissonFencedLock(t *testing.T) {
	e := startEnv(t, 5, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	prof := redissonwire.Profiles[0]
	a, b := dialRedisson(t, e, prof), dialRedisson(t, e, prof)
	last := int64(0)
	for round := range 3 {
		tok, ttl, err := a.FencedLock(ctx, "fenced", 1, 30*time.Second)
		if err != nil || ttl != -1 || tok <= last {
			t.Fatalf("round %d: token %d (last %d), ttl %d, %v", round, tok, last, ttl, err)
		}
		if got, ok, err := a.Token(ctx, "fenced"); !ok || got != tok || err != nil {
			t.Fatalf("getToken: %d, %v, %v; want %d", got, ok, err, tok)
		}
		if tok2, ttl2, err := b.FencedLock(ctx, "fenced", 1, 30*time.Second); err != nil || tok2 != -1 || ttl2 <= 0 {
			t.Fatalf("another client: token %d ttl %d, %v; want refused", tok2, ttl2, err)
		}
		if n, err := a.Unlock(ctx, "fenced", 1); n != 1 || err != nil {
			t.Fatal(n, err)
		}
		last = tok
	}
}

// TestRedissonProbes: what Redisson sends besides its scripts — WAIT and
// WAITAOF probes, INFO's replica count and AOF state, the start-up EVAL
// probe (an error, not CROSSSLOT) — and a script in a shape Redisson
// never sends is refused.
func TestRedissonProbes(t *testing.T) {
	e := startEnv(t, 3, nil)
	c := dialRaw(t, e.addr)
	checkReply(t, c.cmd("WAIT", "0", "0"), ":0\r\n")
	checkReply(t, c.cmd("WAITAOF", "0", "0", "0"), "*2\r\n:0\r\n:0\r\n")
	checkReply(t, c.cmd("WAITAOF", "1", "0", "0"), "-ERR WAITAOF cannot be used*")
	info := c.cmd("INFO", "ALL")
	for _, want := range []string{"connected_slaves:0", "aof_enabled:0"} {
		if !strings.Contains(info, want) {
			t.Fatalf("INFO ALL lacks %s", want)
		}
	}
	probe := c.cmd("EVAL", redissonwire.Script("redisson-4.0.0-detectClusterProbe"), "2", "test1", "test2")
	if !strings.HasPrefix(probe, "-") || strings.HasPrefix(probe, "-CROSSSLOT") {
		t.Fatalf("start-up probe: %q", probe)
	}
	sha := redisson.Table[0].SHA
	checkReply(t, c.cmd("EVALSHA", sha, "1", "k", "30000"), "-ERR redlock proxy: Redisson tryLock (3.19.0+) called in a shape*")
	// Without --allow-tokenless-writes, forceUnlock (no owner, no token)
	// is refused like DEL.
	force := redisson.BySHA["605e338249a7a1d40df83b04f7658354f883b41b"]
	checkReply(t, c.cmd("EVALSHA", force.SHA, "2", "k", "redisson_lock__channel:{k}", "0", "publish"), "-ERR redlock proxy: Redisson's forceUnlock changes a lock without checking its token*")
	// Keys besides the lock must be the names Redisson derives from it:
	// no publishing on another lock's channel, no other lock's token key.
	unlock := redisson.BySHA["778cea8aada230ae060b432fc333adaec85f2f4c"]
	checkReply(t, c.cmd("EVALSHA", unlock.SHA, "2", "k", "redisson_lock__channel:{other}", "0", "30000", "o:1", "publish"), "-ERR redlock proxy: Redisson unlock (3.22.0-3.23.5) called in a shape*")
	fenced := redisson.BySHA["49babb5a1e6a0c5f188c2ae62b93b51cdfd63e45"]
	checkReply(t, c.cmd("EVALSHA", fenced.SHA, "2", "k", "redisson_lock_token:{other}", "30000", "o:1"), "-ERR redlock proxy: Redisson RFencedLock tryLockAndGetToken (3.19.0+) called in a shape*")
	checkReply(t, c.cmd("EVALSHA", fenced.SHA, "2", "{k}", "redisson_lock_token:{k}", "30000", "o:1"), "*2\r\n:-1\r\n:*") // a braced name: as Redisson derives it
	checkReply(t, c.cmd("EVALSHA", sha, "1", "k", "0", "owner:1"), "-ERR redlock proxy: Redisson tryLock*")
	checkReply(t, c.cmd("SCRIPT", "LOAD", redissonwire.Script("redisson-3.24.0-unlock")), "$40\r\n"+redisson.BySHA[sha].SHA[:0]+"*")
}

// TestNodeRedisson drives npm node-redisson 1.0.4 (a Node port of
// Redisson's RLock with Pub/Sub wake-ups, its own script texts) through
// the proxy: lock with a lease, re-entry, another client refused while
// the count is above zero, lock() woken by the unlock, forceUnlock.
func TestNodeRedisson(t *testing.T) {
	dir, _ := filepath.Abs("testdata/node")
	_, err := os.Stat(filepath.Join(dir, "node_modules", "node-redisson"))
	requirePeer(t, "node and testdata/node/node_modules (npm ci --prefix proxy/testdata/node)", haveCmd("node") && err == nil)
	e := startEnv(t, 5, func(c *Config) { c.AllowTokenlessWrites = true }) // forceUnlock
	ctx := context.Background()
	held := func() int {
		n := 0
		for _, m := range e.masters {
			if v, _ := m.Get(ctx, "nr:lock").Result(); v != "" {
				n++
			}
		}
		return n
	}
	gone := func(step string) {
		t.Helper()
		deadline := time.Now().Add(time.Second)
		for held() != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("after %s: %d masters still hold nr:lock", step, held())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	p := startPeer(t, exec.Command("node", filepath.Join(dir, "redisson.js"), port(e.addr)))
	p.step("LOCKED")
	if n := held(); n < e.quorum() {
		t.Fatalf("after lock and re-entry: %d masters hold the key", n)
	}
	p.next()
	if f := p.step("REFUSED"); f[1] != "false" {
		t.Fatalf("another client's tryLock: %v", f)
	}
	p.next()
	if f := p.step("STILL"); f[1] != "false" {
		t.Fatalf("tryLock at hold count 1: %v", f)
	}
	p.next()
	f := p.step("WOKEN")
	if ms, _ := strconv.Atoi(f[1]); ms <= 0 || ms > 5000 {
		t.Fatalf("lock() waited %s ms: not woken by the unlock (the lease is 10 s)", f[1])
	}
	p.next()
	p.step("RELEASED")
	gone("the release")
	p.next()
	if f := p.step("FORCED"); f[1] != "true" {
		t.Fatalf("forceUnlock: %v", f)
	}
	gone("forceUnlock")
	p.next()
	p.step("DONE")
}

// TestRedissonKindsRefused: Redisson's semaphore scripts — sent by text (EVAL), by SHA1 (EVALSHA) or loaded
// (SCRIPT LOAD) — are refused with an error naming what the proxy serves;
// every SHA1 of the refusal list is refused.
func TestRedissonKindsRefused(t *testing.T) {
	e := startEnv(t, 3, nil)
	c := dialRaw(t, e.addr)
	files, _ := filepath.Glob("testdata/redisson-refused/*.lua")
	if len(files) == 0 {
		t.Fatal("no test scripts")
	}
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sha := sha1Hex(text)
		if redisson.Refused[sha] == "" {
			t.Fatalf("%s (sha1 %s) is not in redisson_refused.tsv", f, sha)
		}
		for _, got := range []string{
			c.cmd("EVAL", string(text), "1", "rw:k", "30000", "owner:1"),
			c.cmd("EVALSHA", sha, "1", "rw:k", "30000", "owner:1"),
			c.cmd("SCRIPT", "LOAD", string(text)),
		} {
			if !strings.Contains(got, "is not supported") || !strings.Contains(got, "RLock, RFencedLock, RReadWriteLock or RFairLock") {
				t.Fatalf("%s: %q", filepath.Base(f), got)
			}
			if strings.Contains(f, "Semaphore") && !strings.Contains(got, "without a TTL") {
				t.Fatalf("%s: the refusal does not say why: %q", filepath.Base(f), got)
			}
		}
	}
	for sha := range redisson.Refused {
		if got := c.cmd("EVALSHA", sha, "1", "k", "1"); !strings.Contains(got, "is not supported") {
			t.Fatalf("EVALSHA %s: %q", sha, got)
		}
	}
	if len(redisson.Refused) < 40 {
		t.Fatalf("%d refused scripts; the list has 41", len(redisson.Refused))
	}
	// The read-write and fair locks' scripts are served, not refused.
	for _, f := range []string{"redisson-3.20.0-rwReadTryLock", "redisson-3.44.0-rwWriteUnlock", "redisson-4.4.0-rwReadLockTask", "redisson-3.45.0-fairTryLockWait", "redisson-3.20.0-fairAcquireFailed"} {
		if sha := rSHA(t, f); redisson.Refused[sha] != "" {
			t.Errorf("%s is refused", f)
		}
	}
}
