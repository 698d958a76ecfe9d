package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/localmaster"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
)

// TestMisconfiguredStopsWaits: a refusal retrying cannot cure — the ACL
// user lacks a command (inside a script or not) or a key, or the masters
// refuse the credentials — matches ErrMisconfigured, names each master,
// what it refused and the fix, and ends every wait at once, with a
// context that never ends, within one per-master timeout.
func TestMisconfiguredStopsWaits(t *testing.T) {
	const pw = "misconf-pw"
	// Users short of the documented line (docs/operations.md#security).
	base := []string{"on", ">" + pw, "&*", "+set", "+get", "+getrange", "+mget", "+mset", "+msetnx", "+pttl", "+exists", "+del",
		"+pexpire", "+time", "+hget", "+hmget", "+zcard", "+zrange", "+zrangebyscore", "+zrem", "+zremrangebyscore", "+zscore",
		"+eval", "+evalsha", "+script|load", "+command|info", "+command|docs", "+info", "+publish", "+subscribe", "+scan", "+ping"}
	args := append([]string{"--user", "nozadd", "~*"}, base...)                            // no +zadd, +hset
	args = append(append(args, "--user", "nokeys", "~other:*", "+zadd", "+hset"), base...) // keys other:* only
	set := mastertest.StartWith(t, localmaster.Options{N: 3, Password: "admin-pw", ExtraArgs: args})
	const masterTimeout = time.Second
	newEngine := func(t *testing.T, cc conn.Config) *engine.Engine {
		cfg := functional
		cfg.Addrs, cfg.Conn, cfg.MasterTimeout = set.Addrs(), cc, masterTimeout
		e, err := engine.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		e.WaitReady(ctx) // the refused credentials' verdict comes from the waits below
		return e
	}
	nozadd := newEngine(t, conn.Config{Username: "nozadd", Password: pw})
	nokeys := newEngine(t, conn.Config{Username: "nokeys", Password: pw})
	wrongpw := newEngine(t, conn.Config{Username: "nozadd", Password: "wrong"})
	ctx := context.Background() // never ends: only the refusal can end a wait
	for _, tt := range []struct {
		name string
		wait func() error
		want []string // in the error
	}{
		{"FairLock.Lock", func() error {
			f, _ := nozadd.NewFairLock(keyName(t, "fair"), 0)
			_, err := f.Lock(ctx, 10*time.Second)
			return err
		}, []string{"refused ZADD (NOPERM): the masters' ACL user needs +zadd — docs/operations.md#security", "master 0 ("}},
		{"RWLock.RLock", func() error {
			rw, _ := nozadd.NewRWLock(keyName(t, "rw"))
			_, err := rw.RLock(ctx, 10*time.Second)
			return err
		}, []string{"refused ZADD (NOPERM)", "+zadd"}},
		{"Election.Campaign", func() error {
			el, _ := nozadd.NewElection(keyName(t, "el"), 10*time.Second)
			_, err := el.Campaign(ctx, "v")
			return err
		}, []string{"refused HSET (NOPERM): the masters' ACL user needs +hset"}},
		{"Engine.Lock, a key outside the user's patterns", func() error {
			_, err := nokeys.Lock(ctx, keyName(t, "lock"), 10*time.Second)
			return err
		}, []string{"refused a key (NOPERM)", "~"}},
		{"Semaphore.Acquire, a key outside the user's patterns", func() error {
			s, _ := nokeys.NewSemaphore(keyName(t, "sem"), 3)
			_, err := s.Acquire(ctx, 10*time.Second)
			return err
		}, []string{"refused a key (NOPERM)"}},
		{"Engine.Lock, refused credentials", func() error {
			_, err := wrongpw.Lock(ctx, keyName(t, "auth"), 10*time.Second)
			return err
		}, []string{"WRONGPASS"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			done := make(chan error, 1)
			go func() { done <- tt.wait() }()
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * masterTimeout):
				t.Fatalf("still waiting after %v", 10*masterTimeout)
			}
			if d := time.Since(start); d > masterTimeout {
				t.Errorf("returned after %v, want within the per-master timeout %v", d, masterTimeout)
			}
			if !errors.Is(err, engine.ErrMisconfigured) || !errors.Is(err, engine.ErrUnavailable) {
				t.Fatalf("%v; want ErrMisconfigured and ErrUnavailable", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v\nlacks %q", err, w)
				}
			}
		})
	}
	// One master refusing leaves a quorum: not misconfigured, and the
	// lock is granted by the others (masters 1 and 2 take the key).
	t.Run("a quorum without the refusing master", func(t *testing.T) {
		admin := directConns(t, set.Addrs(), conn.Config{Password: "admin-pw"})
		for i, c := range admin {
			keys := "~*"
			if i == 0 {
				keys = "~other:*"
			}
			if _, err := c.Exec(t.Context(), append([]string{"ACL", "SETUSER", "onebad", keys, "+zadd", "+hset"}, base...)...); err != nil {
				t.Fatal(err)
			}
		}
		e := newEngine(t, conn.Config{Username: "onebad", Password: pw})
		l, err := e.Lock(ctx, keyName(t, "k"), 10*time.Second)
		if err != nil {
			t.Fatalf("Lock: %v", err)
		}
		_, err = e.TryLock(ctx, keyName(t, "k"), 10*time.Second)
		if !errors.Is(err, engine.ErrNotAcquired) || errors.Is(err, engine.ErrMisconfigured) || !strings.Contains(err.Error(), "refused a key (NOPERM)") {
			t.Errorf("TryLock of a held key: %v; want ErrNotAcquired naming master 0's refusal, not ErrMisconfigured", err)
		}
		l.Unlock(ctx)
	})
}
