package proxy

import (
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/proxy/internal/redisson"
)

func rSHA(t *testing.T, file string) string {
	t.Helper()
	for i := range redisson.Table {
		if redisson.Table[i].File == file {
			return redisson.Table[i].SHA
		}
	}
	t.Fatalf("no script %s", file)
	return ""
}

// TestRedissonLatchShape: a latch key must be the lock's latch name plus
// a request id of at most 64 bytes (found by review: client-sized keys
// were kept).
func TestRedissonLatchShape(t *testing.T) {
	e := startEnv(t, 3, nil)
	c := dialRaw(t, e.addr)
	unlock := rSHA(t, "redisson-3.24.0-unlock")
	latch := "redisson_unlock_latch:{L}:" + strings.Repeat("x", 65)
	if got := c.cmd("EVALSHA", unlock, "3", "L", "redisson_lock__channel:{L}", latch, "0", "30000", "o:1", "publish", "1"); !strings.Contains(got, "shape") {
		t.Fatalf("a latch id over 64 bytes: %q", got)
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
	if n := e.srv.rs.Stats().PanicsRecovered; n > 0 {
		t.Errorf("%d panics recovered", n)
	}
}
