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
	"github.com/redis/go-redis/v9"
)

// What the lock libraries' own test suites meet through the proxy
// (docs/proxy.md, "What the libraries' own tests meet"): each refusal by
// design, shown here with the real client where there is one, and the
// messages a client gets for TTLs and databases (issue #44).

// TestLibrarySuiteRefusals: the commands the libraries' suites send that
// the proxy refuses by design, each with the message a user sees.
func TestLibrarySuiteRefusals(t *testing.T) {
	e := startEnv(t, 3, nil)
	c := redis.NewClient(&redis.Options{Addr: e.addr, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name string
		do   func() error
		want string
	}{
		// redis-py's and node-redlock's fixtures clean the database.
		{"FLUSHALL (fixtures)", func() error { return c.FlushAll(ctx).Err() }, "unknown or unsupported command 'FLUSHALL'"},
		{"FLUSHDB (fixtures)", func() error { return c.FlushDB(ctx).Err() }, "unknown or unsupported command 'FLUSHDB'"},
		// Suites fake another owner with a plain SET.
		{"plain SET (another owner faked)", func() error { return c.Set(ctx, "suite:k", "other", 0).Err() }, "only SET key value NX PX"},
		// redis-py Lock(timeout=None), bsm's tests of a lock without a TTL.
		{"SET NX without a TTL", func() error { return c.Do(ctx, "SET", "suite:k", "v", "NX").Err() }, "a lock without a TTL would never be released"},
		{"SETNX", func() error { return c.SetNX(ctx, "suite:k", "v", 0).Err() }, "a lock without a TTL would never be released"},
		// Tokenless writes (a test expiring or deleting a lock under its holder).
		{"DEL", func() error { return c.Del(ctx, "suite:k").Err() }, "--allow-tokenless-writes"},
		{"PEXPIRE", func() error { return c.PExpire(ctx, "suite:k", time.Second).Err() }, "--allow-tokenless-writes"},
		// A client configured with another database.
		{"SELECT 9", func() error { return c.Do(ctx, "SELECT", "9").Err() }, "the redlock proxy has only DB 0"},
		// TTLs: over --max-ttl whatever the size; Redis's own message only
		// where Redis refuses the value too.
		{"SET PX 9000000000000", func() error { return c.Do(ctx, "SET", "suite:k", "v", "NX", "PX", "9000000000000").Err() }, "redlock proxy: invalid argument: ttl 9000000000000 ms is longer than the maximum TTL"},
		{"SET PX over MaxTTL", func() error { return c.Do(ctx, "SET", "suite:k", "v", "NX", "PX", "61000").Err() }, "redlock proxy: invalid argument: ttl 1m1s is longer than the maximum TTL"},
		{"SET PX 2^63-1 (Redis refuses it too)", func() error {
			return c.Do(ctx, "SET", "suite:k", "v", "NX", "PX", "9223372036854775807").Err()
		}, "invalid expire time in 'set' command"},
		{"SET EX 0", func() error { return c.Do(ctx, "SET", "suite:k", "v", "NX", "EX", "0").Err() }, "invalid expire time in 'set' command"},
		{"REDLOCK.LOCK huge", func() error { return c.Do(ctx, "REDLOCK.LOCK", "suite:k", "v", "9000000000000").Err() }, "longer than the maximum TTL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do()
			if err == nil || !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(tc.want)) {
				t.Fatalf("%v; want an error containing %q", err, tc.want)
			}
		})
	}
	// TTL (redis-py's test_timeout) is served: PTTL's answer in seconds.
	if ok, err := c.SetNX(ctx, "suite:ttl", "tok-0123456789abcdef", 9500*time.Millisecond).Result(); !ok || err != nil {
		t.Fatalf("SetNX: %v %v", ok, err)
	}
	if d, err := c.TTL(ctx, "suite:ttl").Result(); err != nil || d < 9*time.Second || d > 10*time.Second {
		t.Fatalf("TTL = %v, %v; want about 10 s (9.5 s rounded as Redis does)", d, err)
	}
	if d, err := c.TTL(ctx, "suite:none").Result(); err != nil || d != -2 {
		t.Fatalf("TTL of no key = %v, %v; want -2", d, err)
	}
}

// TestBsmShortToken: bsm/redislock with an Options.Token under 16 bytes
// (its own tests set short ones) is refused saying why and what to set.
func TestBsmShortToken(t *testing.T) {
	e := startEnv(t, 3, nil)
	c := redis.NewClient(&redis.Options{Addr: e.addr, Protocol: 2, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := redislock.New(c).Obtain(ctx, "bsm:short", time.Second, &redislock.Options{Token: "abc"})
	if err == nil || errors.Is(err, redislock.ErrNotObtained) || !strings.Contains(err.Error(), "Options.Token") || !strings.Contains(err.Error(), "at least 16 bytes") {
		t.Fatalf("Obtain with a 3-byte token: %v; want the refusal naming Options.Token and the fix", err)
	}
	l, err := redislock.New(c).Obtain(ctx, "bsm:short", time.Second, &redislock.Options{Token: "0123456789abcdef"})
	if err != nil {
		t.Fatalf("Obtain with a 16-byte token: %v", err)
	}
	l.Release(ctx)
}

// TestRedisPyLockWithoutTimeout: redis-py's Lock with no timeout (its
// default) is refused with the knob to set.
func TestRedisPyLockWithoutTimeout(t *testing.T) {
	py := "/usr/bin/python3"
	ok := exec.Command(py, "-c", "import redis.lock").Run() == nil
	requirePeer(t, "system python3 with python3-redis (apt-get install python3-redis)", ok)
	e := startEnv(t, 3, nil)
	out, _ := exec.Command(py, "-c", `
import sys, redis
r = redis.Redis(host="127.0.0.1", port=int(sys.argv[1]))
try:
    r.lock("py:notimeout").acquire(blocking=False)
    print("ACQUIRED")
except redis.exceptions.ResponseError as e:
    print("REFUSED", e)
`, port(e.addr)).CombinedOutput()
	if s := string(out); !strings.HasPrefix(s, "REFUSED") || !strings.Contains(s, "timeout=") {
		t.Fatalf("redis-py Lock without a timeout: %s; want refused naming timeout=", s)
	}
}

// TestNodeRedlockHugeTTL: node-redlock's acquire with a TTL far over
// --max-ttl gets the --max-ttl refusal (it said "TTL argument must be a
// positive integer").
func TestNodeRedlockHugeTTL(t *testing.T) {
	dir, _ := filepath.Abs("testdata/node")
	_, err := os.Stat(filepath.Join(dir, "node_modules", "redlock"))
	requirePeer(t, "node and testdata/node/node_modules (npm ci --prefix proxy/testdata/node)", haveCmd("node") && err == nil)
	e := startEnv(t, 3, nil)
	script := `
const Redis = require("ioredis");
const Redlock = require("redlock").default;
const client = new Redis({ host: "127.0.0.1", port: Number(process.argv[1]), maxRetriesPerRequest: 1 });
const redlock = new Redlock([client], { retryCount: 0 });
redlock.on("error", () => {});
(async () => {
  try {
    await redlock.acquire(["node:huge"], 9000000000000);
    console.log("ACQUIRED");
  } catch (e) {
    const stats = await Promise.all(e.attempts || []);
    console.log("REFUSED", stats.map(s => [...s.votesAgainst.values()].map(String).join(";")).join("|") || String(e));
  }
  process.exit(0);
})();
`
	cmd := exec.Command("node", "-e", script, port(e.addr))
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if s := string(out); err != nil || !strings.HasPrefix(s, "REFUSED") || !strings.Contains(s, "longer than the maximum TTL") {
		t.Fatalf("node-redlock acquire for 9e12 ms: %v %s; want the --max-ttl refusal", err, s)
	}
}
