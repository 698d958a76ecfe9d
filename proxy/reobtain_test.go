package proxy

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"

	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/proxy/internal/lockcmds"
)

// TestReobtainFailureKeepsLock: a bsm/redislock client re-obtains its own
// lock (Options.Token: the obtain script overwrites a value with the same
// token) while 3 of 5 masters are stopped: no quorum, so the proxy cleans
// up — and must remove only what the attempt created (docs/safety.md, the
// grant rule's (d)). Before, the cleanup deleted the token on every
// master, including those where the obtain had overwritten the caller's
// valid lock; when the masters resumed no master held it and a second
// client obtained the key inside the first client's lock.
func TestReobtainFailureKeepsLock(t *testing.T) {
	e := startEnv(t, 5, nil)
	mastertest.RequireReal(t, e.set)
	ctx := context.Background()
	c := e.client(t)
	const tok = "tok-0123456789abcdefgh" // 22 bytes, as bsm's

	obtainers := []struct {
		name   string
		obtain func(key, token string) error
	}{
		{"bsm v0.9.4 (the library)", func(key, token string) error {
			_, err := redislock.New(c).Obtain(ctx, key, 10*time.Second, &redislock.Options{Token: token})
			return err
		}},
		{"bsm v0.10 (its obtain script)", func(key, token string) error {
			err := redis.NewScript(scripts.Lib("bsm-redislock-v0.10.0-obtain")).Run(ctx, c, []string{key}, token, len(token), "10000").Err()
			if errors.Is(err, redis.Nil) {
				return redislock.ErrNotObtained
			}
			return err
		}},
	}
	for _, o := range obtainers {
		t.Run(o.name, func(t *testing.T) {
			key := "ro:" + o.name
			if err := o.obtain(key, tok); err != nil {
				t.Fatalf("obtain: %v", err)
			}
			ms := e.set.Masters()
			for _, i := range []int{0, 1, 2} {
				if err := ms[i].Pause(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { ms[i].Resume() })
			}
			if err := o.obtain(key, tok); err == nil || errors.Is(err, redislock.ErrNotObtained) {
				t.Fatalf("re-obtain with 3 of 5 masters stopped: %v; want the unavailable error", err)
			}
			for _, i := range []int{0, 1, 2} {
				if err := ms[i].Resume(); err != nil {
					t.Fatal(err)
				}
			}
			// A quorum read on the key's connections follows whatever
			// was queued for the stopped masters (a cleanup included).
			if err := c.Get(ctx, key).Err(); err != nil {
				t.Fatalf("GET: %v", err)
			}
			if n := e.holding(t, key, tok); n != 5 {
				t.Fatalf("after the failed re-obtain %d of 5 masters hold the first client's lock; want 5", n)
			}
			if err := o.obtain(key, "other-0123456789abcdef"); !errors.Is(err, redislock.ErrNotObtained) {
				t.Fatalf("a second client while the first lock is valid: %v; want ErrNotObtained", err)
			}
		})
	}

	// Where the attempt did create the key, its cleanup removes it.
	t.Run("created keys removed", func(t *testing.T) {
		key := "ro:created"
		for _, m := range e.masters[2:] {
			if err := m.Set(ctx, key, "someone-else-0123456789", 10*time.Second).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := redislock.New(c).Obtain(ctx, key, 10*time.Second, &redislock.Options{Token: tok}); !errors.Is(err, redislock.ErrNotObtained) {
			t.Fatalf("obtain of a key held on 3 of 5 masters: %v; want ErrNotObtained", err)
		}
		e.waitHolding(t, key, tok, 0)
		e.waitHolding(t, key, "someone-else-0123456789", 3)
	})
}

// TestCloseThenRetryElsewhere: a proxy closed while a bsm obtain is in
// flight, its client retrying the same value through another proxy once
// its connection closes (a load balancer, go-redis's retry). Found by the
// review of issue #30: the closed proxy's cleanup ran after every master
// answered, deleted the value where its attempt had created it — by then
// the retry's overwritten grant — and a third client obtained the key
// inside the retry's lock. Now a grant the client never saw is left to
// its TTL, and Close keeps the connection open until a failed attempt's
// cleanup ran.
func TestCloseThenRetryElsewhere(t *testing.T) {
	var sha string
	for _, ls := range lockcmds.LibTable {
		if ls.Name == "bsm/redislock v0.9.4 obtain" {
			sha = ls.SHA
		}
	}
	for _, tc := range []struct {
		name   string
		paused []int // masters stopped while the first attempt runs
	}{
		{"the first attempt granted", []int{4}},
		{"the first attempt failed", []int{2, 3, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := mastertest.Start(t, 5)
			mastertest.RequireReal(t, set)
			p0, p1 := startEnvOn(t, set, nil), startEnvOn(t, set, nil)
			const key, val = "close:{k}", "tokA-0123456789abcdefXYZ-meta"
			ms := set.Masters()
			for _, i := range tc.paused {
				if err := ms[i].Pause(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { ms[i].Resume() })
			}
			a := dialRaw(t, p0.addr)
			a.sendCmd("EVALSHA", sha, "1", key, val, "22", "10000")
			time.Sleep(50 * time.Millisecond) // the unpaused masters ran it
			go p0.srv.Close()
			for a.read() != "" { // its reply (an error), then EOF
			}
			for _, i := range tc.paused {
				ms[i].Resume()
			}
			b := dialRaw(t, p1.addr)
			rB := b.cmd("EVALSHA", sha, "1", key, val, "22", "10000")
			if rB != "+OK\r\n" {
				t.Fatalf("the retry through the other proxy: %q", rB)
			}
			time.Sleep(400 * time.Millisecond) // anything left of the closed proxy's attempt runs
			c := dialRaw(t, p1.addr)
			if rC := c.cmd("EVALSHA", sha, "1", key, "tokC-0123456789abcdefXYZ-meta", "22", "10000"); rC != "$-1\r\n" {
				t.Fatalf("a third client inside the retry's 10 s lock: %q; want nil (held)", rC)
			}
		})
	}
}

// TestLateDecisionLeavesKeys: a proxy whose answers come back after the
// attempt's validity (here: its masters behind relays adding 600 ms each
// way, a 2 s per-master timeout, a 1 s TTL; in production a proxy paused
// between the answers and its decision) must not clean up by the
// client's value: the client gave up meanwhile and took the same value
// again through another proxy — bsm/redislock re-obtaining its lock, or
// redsync releasing its value and setting it again — and the late
// deletion removed that grant; a third client was granted inside it.
// Found by the review of issue #30.
func TestLateDecisionLeavesKeys(t *testing.T) {
	obtain := redis.NewScript(scripts.Lib("bsm-redislock-v0.10.0-obtain"))
	release := redis.NewScript(scripts.Lib("redis.io-compare-and-delete"))
	for _, tc := range []struct {
		name  string
		first func(ctx context.Context, c *redis.Client, key, v string) error
		again func(ctx context.Context, c *redis.Client, key, v string) error
	}{
		{"bsm re-obtain", func(ctx context.Context, c *redis.Client, key, v string) error {
			return obtain.Run(ctx, c, []string{key}, v, len(v), "1000").Err()
		}, func(ctx context.Context, c *redis.Client, key, v string) error {
			return obtain.Run(ctx, c, []string{key}, v, len(v), "1000").Err()
		}},
		{"SET NX PX, released and set again", func(ctx context.Context, c *redis.Client, key, v string) error {
			return c.SetNX(ctx, key, v, time.Second).Err()
		}, func(ctx context.Context, c *redis.Client, key, v string) error {
			release.Run(ctx, c, []string{key}, v)
			if ok, err := c.SetNX(ctx, key, v, time.Second).Result(); !ok {
				return fmt.Errorf("not granted: %v", err)
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := mastertest.Start(t, 5)
			mastertest.RequireReal(t, set)
			relays, addrs := startRelays(t, set.Addrs())
			p1 := startEnvOn(t, set, func(c *Config) { c.EngineConfig.Addrs, c.EngineConfig.MasterTimeout = addrs, 2*time.Second })
			p2 := startEnvOn(t, set, nil)
			ctx := context.Background()
			c1 := redis.NewClient(&redis.Options{Addr: p1.addr, MaxRetries: -1, ReadTimeout: 5 * time.Second})
			c2 := redis.NewClient(&redis.Options{Addr: p2.addr, MaxRetries: -1})
			t.Cleanup(func() { c1.Close(); c2.Close() })
			if err := c1.Ping(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			obtain.Load(ctx, c1)
			const key, v = "late:{k}", "tokenA-0123456789abcdef"
			for _, r := range relays {
				r.SetDelay(600 * time.Millisecond) // lands at 600 ms, answers at 1200 ms
			}
			first := make(chan error, 1)
			go func() { first <- tc.first(ctx, c1, key, v) }()
			time.Sleep(650 * time.Millisecond)
			for _, r := range relays {
				r.SetDelay(0) // a cleanup would travel at once
			}
			// The client gave up on the first attempt: the same value
			// again, through the other proxy.
			if err := tc.again(ctx, c2, key, v); err != nil {
				t.Fatalf("the same value through the other proxy: %v", err)
			}
			granted := time.Now()
			<-first
			time.Sleep(50 * time.Millisecond)
			if ok, err := c2.SetNX(ctx, key, "other-0123456789abcdef", time.Second).Result(); ok && time.Since(granted) < 900*time.Millisecond {
				t.Fatalf("a third client granted %v into the second grant's 1 s lock (%v)", time.Since(granted), err)
			}
		})
	}
}
