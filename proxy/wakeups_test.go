package proxy

import (
	"context"
	"errors"
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
