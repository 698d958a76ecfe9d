package proxy

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/test/redissonwire"
)

func TestZZDbgRefused(t *testing.T) {
	e := startEnv(t, 3, nil)
	prof := redissonwire.Profiles[0]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	name := "zzrw-dbg"
	base := dialAs(t, e.addr, "", prof)
	base.ReadTryLock(ctx, name, 99, 30*time.Second)
	var wg sync.WaitGroup
	var once sync.Once
	stop := time.Now().Add(2 * time.Second)
	for g := range 8 {
		c := dialAs(t, e.addr, "", prof)
		wg.Go(func() {
			for time.Now().Before(stop) {
				ok, ttl, err := c.ReadTryLock(ctx, name, int64(g), 30*time.Second)
				if !ok && err == nil {
					vals := []string{}
					for _, m := range e.masters { vals = append(vals, m.Get(ctx, name).Val()) }
					once.Do(func() { t.Logf("refused ttl=%d masters now: %q", ttl, vals) })
					continue
				}
				c.ReadUnlock(ctx, name, int64(g))
			}
		})
	}
	wg.Wait()
}
