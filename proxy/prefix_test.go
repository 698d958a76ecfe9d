package proxy

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/test/check"
)

// TestKeyPrefix: a proxy with a key prefix writes every client key under
// it — SET NX PX, the release and extend scripts, multi-key commands —, so
// tenants behind different prefixes share masters without colliding; the
// prefix cannot be used to reach the fencing counter.
func TestKeyPrefix(t *testing.T) {
	e := startEnv(t, 3, func(c *Config) { c.KeyPrefix = "t1:" })
	c := e.client(t)
	ctx := context.Background()
	if err := c.Do(ctx, "SET", "job", "tok", "NX", "PX", "5000").Err(); err != nil {
		t.Fatal(err)
	}
	e.waitHolding(t, "t1:job", "tok", 3)
	if n := e.holding(t, "job", "tok"); n != 0 {
		t.Fatalf("the bare key is on %d masters", n)
	}
	if v, err := c.Get(ctx, "job").Result(); err != nil || v != "tok" {
		t.Fatalf("GET job through the prefixed proxy = %q, %v", v, err)
	}
	if n, err := c.Exists(ctx, "job", "other").Result(); err != nil || n != 1 {
		t.Fatalf("EXISTS job other = %d, %v", n, err)
	}
	ext := `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("pexpire",KEYS[1],ARGV[2]) else return 0 end`
	if n, err := c.Eval(ctx, ext, []string{"job"}, "tok", 9000).Int(); err != nil || n != 1 {
		t.Fatalf("extend script = %d, %v", n, err)
	}
	// The extension answers at a quorum; master 0's may follow.
	check.Eventually(t, 5*time.Second, "t1:job's PTTL on master 0 at 6 s or more after the extend", func() bool {
		return e.masters[0].PTTL(ctx, "t1:job").Val().Milliseconds() >= 6000
	})
	// Another tenant's proxy on the same masters: the same key is free.
	other := startEnvOn(t, e.set, func(c *Config) { c.KeyPrefix = "t2:" })
	if err := other.client(t).Do(ctx, "SET", "job", "tok2", "NX", "PX", "5000").Err(); err != nil {
		t.Fatalf("tenant 2: %v", err)
	}
	e.waitHolding(t, "t2:job", "tok2", 3)
	rel := `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`
	if n, err := c.Eval(ctx, rel, []string{"job"}, "tok").Int(); err != nil || n != 1 {
		t.Fatalf("release script = %d, %v", n, err)
	}
	e.waitHolding(t, "t1:job", "tok", 0)
	e.waitHolding(t, "t2:job", "tok2", 3)
	// A prefix plus a key that spell the fencing counter is refused.
	fence := startEnvOn(t, e.set, func(c *Config) { c.KeyPrefix = "redlock:" })
	err := fence.client(t).Do(ctx, "SET", "fence", "x", "NX", "PX", "5000").Err()
	if err == nil || !strings.Contains(err.Error(), "fencing counter") {
		t.Fatalf("prefix+key = the fencing counter: %v", err)
	}
	// So is a per-key counter (FenceKey{tag}, with Redis Cluster members).
	err = fence.client(t).Do(ctx, "SET", "fence{job}", "x", "NX", "PX", "5000").Err()
	if err == nil || !strings.Contains(err.Error(), "fencing counter") {
		t.Fatalf("prefix+key = a per-key fencing counter: %v", err)
	}
	// The engine's own prefix is refused: the proxy prefixes.
	if _, err := New(Config{EngineConfig: engine.Config{FreshMasters: true, Addrs: e.set.Addrs(), KeyPrefix: "x:"}}); err == nil {
		t.Fatal("New accepted an engine KeyPrefix")
	}
}

// TestKeyPrefixCharged: the prefixed copies of a command's keys are
// charged to MaxClientMemory like the request, and given back with it. A
// 600 KiB key fits a 1 MiB budget once, not twice.
func TestKeyPrefixCharged(t *testing.T) {
	e := startEnv(t, 3, func(c *Config) { c.KeyPrefix = "tenant:"; c.MaxClientMemory = 1 << 20 })
	c := e.client(t)
	ctx := context.Background()
	small := strings.Repeat("k", 300<<10)
	if err := c.Get(ctx, small).Err(); err == nil || !strings.Contains(err.Error(), "nil") {
		t.Fatalf("GET of a 300 KiB key: %v (want a nil reply)", err)
	}
	big := strings.Repeat("k", 600<<10)
	err := c.Get(ctx, big).Err()
	if err == nil || !strings.Contains(err.Error(), "max-client-memory") {
		t.Fatalf("GET of a 600 KiB key under a 1 MiB budget with its prefixed copy: %v", err)
	}
	if err := c.Get(ctx, "job").Err(); err == nil || !strings.Contains(err.Error(), "nil") {
		t.Fatalf("a small GET after the refusal: %v", err)
	}
	info, err := c.Info(ctx, "clients").Result()
	if err != nil || !strings.Contains(info, "client_memory_bytes:0\r\n") {
		t.Fatalf("after the replies, INFO clients = %q, %v (want nothing charged)", info, err)
	}

	// A prefix that spells the fencing counter with the key: the refusal
	// gives the charge back too (it once kept it: six such requests wedged
	// the connection).
	fence := startEnvOn(t, e.set, func(c *Config) { c.KeyPrefix = "redlock:"; c.MaxClientMemory = 1 << 20 })
	fc := fence.client(t)
	for range 8 {
		if err := fc.Get(ctx, "fence{"+strings.Repeat("x", 200<<10)+"}").Err(); err == nil || !strings.Contains(err.Error(), "fencing counter") {
			t.Fatalf("GET of a per-key fencing counter: %v", err)
		}
	}
	info, err = fc.Info(ctx, "clients").Result()
	if err != nil || !strings.Contains(info, "client_memory_bytes:0\r\n") {
		t.Fatalf("after refused fence-key requests, INFO clients = %q, %v (want nothing charged)", info, err)
	}
}
