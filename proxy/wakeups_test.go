package proxy

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/test/redissonwire"
)

// TestRedissonWakeupAcrossProxies: a Redisson lock() waiting through one
// proxy is woken by an unlock through another (proxies behind a load
// balancer): the proxy that ends the hold publishes on the masters' wake
// channel and the other wakes its subscribers. With LocalWakeups the
// waiter sleeps until the holder's TTL (20 s here), which is what every
// waiter on another proxy did before.
func TestRedissonWakeupAcrossProxies(t *testing.T) {
	for _, local := range []bool{false, true} {
		name := "relayed"
		if local {
			name = "LocalWakeups"
		}
		t.Run(name, func(t *testing.T) {
			mod := func(c *Config) { c.LocalWakeups = local }
			e1 := startEnv(t, 5, mod)
			e2 := startEnvOn(t, e1.set, mod)
			prof := redissonwire.Profiles[0]
			holder, waiter := dialRedisson(t, e1, prof), dialRedisson(t, e2, prof)
			ctx := context.Background()
			const key = "wake:across"
			if ok, _, err := holder.TryLock(ctx, key, 1, 20*time.Second); !ok || err != nil {
				t.Fatalf("holder's tryLock: %v %v", ok, err)
			}
			got := make(chan error, 1)
			wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			go func() { got <- waiter.Lock(wctx, key, 2, 20*time.Second) }()
			time.Sleep(300 * time.Millisecond) // the waiter subscribed and tried again
			start := time.Now()
			if n, err := holder.Unlock(ctx, key, 1); n != 1 || err != nil {
				t.Fatalf("holder's unlock: %d %v", n, err)
			}
			err := <-got
			switch {
			case !local && err != nil:
				t.Fatalf("the waiter through the other proxy: %v; want it woken and granted", err)
			case !local:
				t.Logf("woken and granted %v after the unlock", time.Since(start).Round(time.Millisecond))
			case !errors.Is(err, context.DeadlineExceeded):
				t.Fatalf("with LocalWakeups the waiter through the other proxy got %v; want it still waiting for the TTL", err)
			}
		})
	}
}

// TestWakeMessages: what the wake channel carries is a hint from anyone
// with PUBLISH on the masters: a message wakes this proxy's subscribers
// of a Redisson lock channel of its own tenant, each id once, and
// anything else is dropped.
func TestWakeMessages(t *testing.T) {
	s := &Server{cfg: Config{KeyPrefix: "t1:", MaxClientMemory: 1 << 20}}
	w := &wakeRelay{s: s, seen: map[string]struct{}{}}
	c := &client{s: s}
	q := &msgQueue{ch: make(chan []byte, 16)}
	c.msgs.Store(q)
	const ch = "redisson_lock__channel:{a}"
	s.hub.Add(ch, c, false)
	id := func(n int) string { return "00000000000000" + string(rune('a'+n/26)) + string(rune('a'+n%26)) }
	long := "t1:" + wakePrefix + string(make([]byte, maxChannelLen))
	cases := []struct {
		name    string
		payload string
		woken   bool
	}{
		{"the lock's channel", id(0) + " t1:" + ch, true},
		{"the same id again", id(0) + " t1:" + ch, false},
		{"another id", id(1) + " t1:" + ch, true},
		{"another tenant", id(2) + " t2:" + ch, false},
		{"no prefix", id(3) + " " + ch, false},
		{"not a wake channel", id(4) + " t1:__keyspace@0__:x", false},
		{"a channel too long", id(5) + " " + long, false},
		{"a short id", "abc t1:" + ch, false},
		{"no separator", id(6), false},
		{"empty", "", false},
	}
	for _, tc := range cases {
		w.received([]byte(tc.payload))
		select {
		case <-q.ch:
			if !tc.woken {
				t.Errorf("%s: woke a subscriber", tc.name)
			}
		default:
			if tc.woken {
				t.Errorf("%s: no wake-up", tc.name)
			}
		}
	}
}

// FuzzWakeMessage: no message of the wake channel panics the proxy or
// wakes a subscriber of a channel that is not a Redisson lock's.
func FuzzWakeMessage(f *testing.F) {
	f.Add([]byte("0123456789abcdef redisson_lock__channel:{a}"))
	f.Add([]byte("0123456789abcdef:1 redisson_rwlock:{a}"))
	f.Add([]byte("0123456789abcdef:2 redisson_rwlock:{a}"))
	f.Add([]byte("0123456789abcdef "))
	f.Add([]byte(" "))
	f.Fuzz(func(t *testing.T, payload []byte) {
		s := &Server{cfg: Config{MaxClientMemory: 1 << 20}}
		w := &wakeRelay{s: s, seen: map[string]struct{}{}}
		// A subscriber of whatever channel the message names.
		_, ch, _ := strings.Cut(string(payload), " ")
		c := &client{s: s}
		q := &msgQueue{ch: make(chan []byte, 1)}
		c.msgs.Store(q)
		s.hub.Add(ch, c, false)
		w.received(payload)
		if len(q.ch) > 0 && (!wakeChannel(ch) || len(ch) > maxChannelLen) {
			t.Fatalf("woke a subscriber of %q", ch)
		}
		if len(q.ch) > 0 {
			// The message is Redisson's 0 or 1, whatever the payload.
			if m := <-q.ch; !strings.HasSuffix(string(m), "$1\r\n0\r\n") && !strings.HasSuffix(string(m), "$1\r\n1\r\n") {
				t.Fatalf("published %q", m)
			}
		}
	})
}
