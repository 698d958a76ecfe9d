package proxy

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"

	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
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
	for _, ls := range libTable {
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
