package proxy

import (
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func rSHA(t *testing.T, file string) string {
	t.Helper()
	for i := range rTable {
		if rTable[i].File == file {
			return rTable[i].SHA
		}
	}
	t.Fatalf("no script %s", file)
	return ""
}

// TestRedissonHoldsSwept: holds whose lease ran out without an unlock are
// charged to MaxClientMemory while kept and swept when the table reaches
// the sweep threshold (found by review: they were kept until 2^20 of
// them, then every new Redisson lock was refused, and none was charged).
func TestRedissonHoldsSwept(t *testing.T) {
	e := startEnv(t, 3, nil)
	c := dialRaw(t, e.addr)
	sha := rSHA(t, "redisson-3.19.0-fencedTryLock")
	lock := func(k, lease string) {
		t.Helper()
		if got := c.cmd("EVALSHA", sha, "2", k, "redisson_lock_token:{"+k+"}", lease, "owner:1"); got != "$-1\r\n" {
			t.Fatalf("fenced tryLock %s: %q", k, got)
		}
	}
	for i := range 600 {
		lock("short"+strconv.Itoa(i), "100")
	}
	time.Sleep(300 * time.Millisecond) // every lease over
	ended := func() (n int, cost int64) {
		e.srv.rl.mu.Lock()
		defer e.srv.rl.mu.Unlock()
		for _, h := range e.srv.rl.holds {
			cost += h.cost
			if h.ended() {
				n++
			}
		}
		return n, cost
	}
	if n, _ := ended(); n < 500 {
		t.Fatalf("%d ended holds before the sweep", n)
	}
	swept := false
	for i := 0; i < 1100 && !swept; i++ {
		before := e.srv.rl.count()
		lock("long"+strconv.Itoa(i), "30000")
		swept = e.srv.rl.count() < before
	}
	n, cost := ended()
	if !swept || n != 0 {
		t.Fatalf("swept %v; %d ended holds kept", swept, n)
	}
	if m := e.srv.mem.Load(); m != cost || cost == 0 {
		t.Errorf("%d bytes charged for holds costing %d", m, cost)
	}
}

// TestRedissonLatchesSwept: unlock latches past their TTL are swept and
// their charge given back; a latch key must be the lock's latch name plus
// a request id of at most 64 bytes (found by review: client-sized keys
// kept, uncharged).
func TestRedissonLatchesSwept(t *testing.T) {
	e := startEnv(t, 3, nil)
	c := dialRaw(t, e.addr)
	try, unlock := rSHA(t, "redisson-3.19.0-tryLock"), rSHA(t, "redisson-3.24.0-unlock")
	latch := func(i int) string { return "redisson_unlock_latch:{L}:" + strconv.Itoa(i) }
	if got := c.cmd("EVALSHA", unlock, "3", "L", "redisson_lock__channel:{L}", latch(0)+strings.Repeat("x", 65), "0", "30000", "o:1", "publish", "1"); !strings.Contains(got, "shape") {
		t.Fatalf("a latch id over 64 bytes: %q", got)
	}
	const n = 1100
	for i := range n {
		if got := c.cmd("EVALSHA", try, "1", "L", "30000", "o:1"); got != "$-1\r\n" {
			t.Fatalf("tryLock %d: %q", i, got)
		}
		if got := c.cmd("EVALSHA", unlock, "3", "L", "redisson_lock__channel:{L}", latch(i), "0", "30000", "o:1", "publish", "1"); got != ":1\r\n" {
			t.Fatalf("unlock %d: %q", i, got)
		}
	}
	time.Sleep(20 * time.Millisecond) // every latch (1 ms) expired
	c.cmd("EVALSHA", try, "1", "L", "30000", "o:1")
	c.cmd("EVALSHA", unlock, "3", "L", "redisson_lock__channel:{L}", latch(n), "0", "30000", "o:1", "publish", "1")
	e.srv.rl.mu.Lock()
	m := len(e.srv.rl.latches)
	e.srv.rl.mu.Unlock()
	if m > 100 {
		t.Errorf("%d latches kept after they expired and the map was swept", m)
	}
	if mem := e.srv.mem.Load(); mem > int64(m)*1024 {
		t.Errorf("%d bytes charged for %d latches", mem, m)
	}
}

// TestRedissonTokenKeyOwn: a fenced tryLock on the client's own lock that
// names another lock's token key is refused; the other holder's getToken
// is unchanged (found by review: it replaced the victim's entry).
func TestRedissonTokenKeyOwn(t *testing.T) {
	e := startEnv(t, 3, nil)
	v, a := dialRaw(t, e.addr), dialRaw(t, e.addr)
	sha := rSHA(t, "redisson-3.19.0-fencedTryLockAndGetToken")
	tk := "redisson_lock_token:{v}"
	if got := v.cmd("EVALSHA", sha, "2", "v", tk, "30000", "victim:1"); !strings.HasPrefix(got, "*2\r\n:-1\r\n:") {
		t.Fatalf("victim: %q", got)
	}
	want := v.cmd("GET", tk)
	if got := a.cmd("EVALSHA", sha, "2", "a", tk, "30000", "attacker:1"); !strings.Contains(got, "shape") {
		t.Fatalf("another lock's token key: %q", got)
	}
	if got := v.cmd("GET", tk); got != want || want == "$-1\r\n" {
		t.Errorf("victim's getToken: %q; want %q", got, want)
	}
}

// TestRedissonFencedTokenRace: a fenced tryLockAndGetToken racing a
// forceUnlock of the same lock never panics (found by review: the token
// was read from a hold the forceUnlock had just ended).
func TestRedissonFencedTokenRace(t *testing.T) {
	e := startEnv(t, 3, func(c *Config) {
		c.AllowTokenlessWrites = true
		c.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	})
	get := rSHA(t, "redisson-3.19.0-fencedTryLockAndGetToken")
	force := rSHA(t, "redisson-3.22.0-forceUnlock")
	var wg sync.WaitGroup
	stop := time.Now().Add(2 * time.Second)
	for range 4 {
		wg.Go(func() {
			c := dialRaw(t, e.addr)
			for time.Now().Before(stop) && c.cmd("EVALSHA", get, "2", "K", "redisson_lock_token:{K}", "30000", "o:1") != "" {
			}
		})
		wg.Go(func() {
			c := dialRaw(t, e.addr)
			for time.Now().Before(stop) {
				c.cmd("EVALSHA", force, "2", "K", "redisson_lock__channel:{K}", "0", "publish")
			}
		})
	}
	wg.Wait()
	if n := e.srv.panics.Load(); n > 0 {
		t.Errorf("%d panics recovered", n)
	}
}
