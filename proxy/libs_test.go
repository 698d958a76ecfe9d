package proxy

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/proxy/internal/lockcmds"
	"github.com/redlock-dev/redlock/proxy/internal/redisson"
)

func TestRedislockV094(t *testing.T) {
	e := startEnv(t, 5, nil)
	ctx := context.Background()
	lc := redislock.New(e.client(t))
	l, err := lc.Obtain(ctx, "rl:a", 10*time.Second, &redislock.Options{Metadata: "meta"})
	if err != nil {
		t.Fatal(err)
	}
	if n := e.holding(t, "rl:a", l.Token()+"meta"); n < e.quorum() {
		t.Fatalf("after obtain %d masters hold it", n)
	}
	if _, err := lc.Obtain(ctx, "rl:a", 10*time.Second, nil); !errors.Is(err, redislock.ErrNotObtained) {
		t.Fatalf("second obtain: %v", err)
	}
	if ttl, err := l.TTL(ctx); err != nil || ttl <= 0 || ttl > 10*time.Second {
		t.Fatalf("TTL: %v %v", ttl, err)
	}
	if err := l.Refresh(ctx, 20*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	if ttl, _ := l.TTL(ctx); ttl <= 10*time.Second {
		t.Fatalf("TTL after refresh: %v", ttl)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitHolding(t, "rl:a", l.Token()+"meta", 0) // released at a quorum; the others follow
	if err := l.Release(ctx); !errors.Is(err, redislock.ErrLockNotHeld) {
		t.Fatalf("second release: %v", err)
	}
	if err := l.Refresh(ctx, time.Second, nil); !errors.Is(err, redislock.ErrNotObtained) {
		t.Fatalf("refresh after release: %v", err)
	}
	if ttl, err := l.TTL(ctx); err != nil || ttl != 0 {
		t.Fatalf("TTL after release: %v %v", ttl, err)
	}
}

// TestRedislockV010 drives the bsm/redislock v0.10.0 scripts (vendored in
// scripts_src.go, checked against the module by TestLibrarySources) with
// go-redis exactly as v0.10's Obtain/Refresh/TTL/Release do: bsm v0.10
// has the same import path as v0.9.4, which the tests also use.
func TestRedislockV010(t *testing.T) {
	e := startEnv(t, 5, nil)
	ctx := context.Background()
	c := e.client(t)
	obtain := redis.NewScript(scripts.Lib("bsm-redislock-v0.10.0-obtain"))
	refresh := redis.NewScript(scripts.Lib("bsm-redislock-v0.10.0-refresh"))
	pttl := redis.NewScript(scripts.Lib("bsm-redislock-v0.10.0-pttl"))
	release := redis.NewScript(scripts.Lib("bsm-redislock-v0.10.0-release"))
	keys := []string{"v10:a", "v10:b", "v10:c"}
	token := "tokentokentokentokent"
	if err := obtain.Run(ctx, c, keys, token, len(token), "10000").Err(); err != nil {
		t.Fatalf("obtain: %v", err)
	}
	for _, k := range keys {
		if n := e.holding(t, k, token); n < e.quorum() {
			t.Fatalf("after obtain %s on %d masters", k, n)
		}
	}
	// Another owner on an overlapping set gets nothing, and leaves nothing.
	if err := obtain.Run(ctx, c, []string{"v10:z", "v10:c"}, "other-token-other-token", 23, "10000").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("overlapping obtain: %v", err)
	}
	e.waitHolding(t, "v10:z", "other-token-other-token", 0) // released at a quorum; the others follow
	if v, err := pttl.Run(ctx, c, keys, token).Int64(); err != nil || v <= 0 || v > 10000 {
		t.Fatalf("pttl: %v %v", v, err)
	}
	if err := refresh.Run(ctx, c, keys, token, "30000").Err(); err != nil {
		t.Fatalf("refresh: %v", err)
	}
	if v, _ := pttl.Run(ctx, c, keys, token).Int64(); v <= 10000 {
		t.Fatalf("pttl after refresh: %v", v)
	}
	if err := release.Run(ctx, c, keys, token).Err(); err != nil {
		t.Fatalf("release: %v", err)
	}
	for _, k := range keys {
		e.waitHolding(t, k, token, 0) // released at a quorum; the others follow
	}
	if err := release.Run(ctx, c, keys, token).Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("second release: %v", err)
	}
	if err := refresh.Run(ctx, c, keys, token, "30000").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("refresh after release: %v", err)
	}
}

func TestRedsync(t *testing.T) {
	e := startEnv(t, 5, nil)
	ctx := context.Background()
	rs := redsync.New(goredis.NewPool(e.client(t)))
	for _, setNX := range []bool{false, true} {
		name := "plain"
		if setNX {
			name = "setnx-on-extend"
		}
		t.Run(name, func(t *testing.T) {
			key := "rs:" + name
			m := rs.NewMutex(key, redsync.WithExpiry(8*time.Second), redsync.WithTries(1), redsync.WithSetNXOnExtend())
			if !setNX {
				m = rs.NewMutex(key, redsync.WithExpiry(8*time.Second), redsync.WithTries(1))
			}
			if err := m.LockContext(ctx); err != nil {
				t.Fatal(err)
			}
			if n := e.holding(t, key, m.Value()); n < e.quorum() {
				t.Fatalf("after lock %d masters", n)
			}
			m2 := rs.NewMutex(key, redsync.WithTries(1))
			if err := m2.LockContext(ctx); err == nil {
				t.Fatal("second mutex locked a held key")
			}
			if ok, err := m.ExtendContext(ctx); !ok || err != nil {
				t.Fatalf("extend: %v %v", ok, err)
			}
			if ok, err := m.UnlockContext(ctx); !ok || err != nil {
				t.Fatalf("unlock: %v %v", ok, err)
			}
			e.waitHolding(t, key, m.Value(), 0) // released at a quorum; the others follow
			ok, err := m.UnlockContext(ctx)
			var taken *redsync.ErrTaken
			if ok || err == nil || errors.As(err, &taken) {
				t.Fatalf("second unlock: %v %v (want the already-expired error)", ok, err)
			}
		})
	}
}

// TestLibrarySources re-reads the scripts from the real packages, where
// they are installed, and checks the vendored texts and SHA1s.
func TestLibrarySources(t *testing.T) {
	modcache, _ := exec.Command("go", "env", "GOMODCACHE").Output()
	mc := strings.TrimSpace(string(modcache))
	for _, n := range []string{"obtain", "release", "refresh", "pttl"} {
		t.Run("bsm v0.10.0 "+n, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(mc, "github.com/bsm/redislock@v0.10.0", n+".lua"))
			if err != nil {
				t.Skipf("module not in the cache: %v", err)
			}
			if string(b) != scripts.Lib("bsm-redislock-v0.10.0-"+n) {
				t.Fatal("vendored text differs from the module's")
			}
		})
	}
	for _, ls := range lockcmds.LibTable {
		if lockcmds.LibBySHA[sha1Hex([]byte(ls.Source))] == nil {
			t.Errorf("%s: not indexed", ls.Name)
		}
	}
	if len(lockcmds.LibBySHA) != len(lockcmds.LibTable) {
		t.Errorf("duplicate SHA in the library table: %d entries, %d SHAs", len(lockcmds.LibTable), len(lockcmds.LibBySHA))
	}
}

// TestRedislockOverridePrefix: bsm/redislock's obtain overwrites a lock
// whose value starts with the caller's first tokenLen bytes (its token,
// with other metadata) — kept — but a tokenLen shorter than 16 bytes (0
// matches any value) or longer than the value is refused: it would
// overwrite another client's lock without its token.
func TestRedislockOverridePrefix(t *testing.T) {
	e := startEnv(t, 3, nil)
	ctx := context.Background()
	c := e.client(t)
	for _, src := range []string{scripts.Lib("bsm-redislock-v0.9.4-luaObtain"), scripts.Lib("bsm-redislock-v0.10.0-obtain")} {
		obtain := redis.NewScript(src)
		token := "tok-0123456789abcdefgh" // 22 bytes, as bsm's
		if err := obtain.Run(ctx, c, []string{"ov:1"}, token+"meta-a", len(token), "10000").Err(); err != nil {
			t.Fatalf("obtain: %v", err)
		}
		// The same token with other metadata: bsm's override.
		if err := obtain.Run(ctx, c, []string{"ov:1"}, token+"meta-b", len(token), "10000").Err(); err != nil {
			t.Fatalf("override with the token: %v", err)
		}
		e.waitHolding(t, "ov:1", token+"meta-b", 3)
		for _, n := range []int{0, 1, 15, len(token) + 7} {
			err := obtain.Run(ctx, c, []string{"ov:1"}, "tok-x", n, "10000").Err()
			want := "under 16 bytes may be another client's too"
			if n > 15 {
				want = "a token length over the value's"
			}
			if err == nil || errors.Is(err, redis.Nil) || !strings.Contains(err.Error(), want) {
				t.Fatalf("obtain with tokenLen %d: %v; want the refusal", n, err)
			}
		}
		e.waitHolding(t, "ov:1", token+"meta-b", 3)
		if err := c.Eval(ctx, `return redis.call("get",KEYS[1])`, []string{"ov:1"}).Err(); err == nil {
			t.Fatal("an arbitrary script ran") // (sanity: scripts are off)
		}
		release := `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`
		if err := c.Eval(ctx, release, []string{"ov:1"}, token+"meta-b").Err(); err != nil {
			t.Fatal(err)
		}
		e.waitHolding(t, "ov:1", token+"meta-b", 0)
	}
}

// TestLibraryFilesAllRecognised: every client-library script file under
// internal/scripts/lib is in the proxy's table (a file added without a
// mapping would be dead text), and no two entries share a SHA1.
func TestLibraryFilesAllRecognised(t *testing.T) {
	inTable := map[string]bool{}
	for _, ls := range lockcmds.LibTable {
		inTable[ls.Source] = true
	}
	for _, rs := range redisson.Table {
		inTable[scripts.Lib(rs.File)] = true
		if lockcmds.LibBySHA[rs.SHA] != nil {
			t.Errorf("%s shares its SHA1 with a library script", rs.Name)
		}
	}
	for _, name := range scripts.LibNames() {
		if !inTable[scripts.Lib(name)] {
			t.Errorf("internal/scripts/lib/%s.lua is not in lockcmds.LibTable or rTable", name)
		}
	}
	if len(lockcmds.LibBySHA) != len(lockcmds.LibTable) || len(redisson.BySHA) != len(redisson.Table) {
		t.Errorf("%d SHA1s for %d table entries, %d for %d Redisson scripts", len(lockcmds.LibBySHA), len(lockcmds.LibTable), len(redisson.BySHA), len(redisson.Table))
	}
}
