package proxy

// Redisson's RReadWriteLock under changing master delays: every read-write
// command through two proxies over relays whose delays change (changes
// that land partially, reverts, timeouts).

import (
	"context"
	"errors"
	mrand "math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/test/redissonwire"
)

type rwStressHold struct {
	thread     int
	write      bool
	start, end time.Time
	how        string
}

// TestRedissonRWStress: readers and writers through two proxies over relays
// with changing delays (timeouts, partial changes, reverts); no write
// hold overlaps another thread's hold.
//
// From the second adversarial review of the proxy's RReadWriteLock.
func TestRedissonRWStress(t *testing.T) {
	set := startEnv(t, 3, nil).set
	relays, raddrs := startRelays(t, set.Addrs())
	mod := func(c *Config) {
		c.EngineConfig.Addrs = raddrs
		c.EngineConfig.MasterTimeout = 40 * time.Millisecond
	}
	e1 := startEnvOn(t, set, mod)
	e2 := startEnvOn(t, set, mod)
	addrs := []string{e1.addr, e2.addr}
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Second)
	defer cancel()
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				for _, r := range relays {
					r.SetDelay(0)
				}
				return
			case <-time.After(30 * time.Millisecond):
			}
			for _, r := range relays {
				if mrand.IntN(3) == 0 {
					r.SetDelay(time.Duration(mrand.IntN(60)) * time.Millisecond)
				} else {
					r.SetDelay(0)
				}
			}
		}
	}()
	name := "rwreview2-stress"
	var mu sync.Mutex
	var holds []rwStressHold
	var wg sync.WaitGroup
	deadline := time.Now().Add(3 * time.Second)
	const lease = 250 * time.Millisecond
	for th := range 8 {
		wg.Go(func() {
			prof := redissonwire.RWProfiles[th%len(redissonwire.RWProfiles)]
			cs := []*redissonwire.Client{dialAs(t, addrs[0], "", prof), dialAs(t, addrs[1], "", prof)}
			cs[1].ID = cs[0].ID
			for time.Now().Before(deadline) {
				c := cs[mrand.IntN(2)]
				write := th%2 == 0
				t0 := time.Now()
				var ok bool
				var err error
				if write {
					ok, _, err = c.WriteTryLock(ctx, name, 1, lease)
				} else {
					ok, _, err = c.ReadTryLock(ctx, name, 1, lease)
				}
				t1 := time.Now()
				if err != nil || !ok {
					time.Sleep(time.Duration(mrand.IntN(5)) * time.Millisecond)
					continue
				}
				type g struct{ t0, t1 time.Time }
				grants := []g{{t0, t1}}
				nested := 0
				ownRead := false
				if write && mrand.IntN(2) == 0 {
					c2 := cs[mrand.IntN(2)]
					s0 := time.Now()
					if ok, _, err := c2.WriteTryLock(ctx, name, 1, lease/2); ok && err == nil {
						grants = append(grants, g{s0, time.Now()})
						nested++
					}
				}
				if write && mrand.IntN(2) == 0 {
					c2 := cs[mrand.IntN(2)]
					if ok, _, err := c2.ReadTryLock(ctx, name, 1, lease); ok && err == nil {
						ownRead = true
					}
				}
				time.Sleep(time.Duration(mrand.IntN(30)) * time.Millisecond)
				if ownRead {
					cs[mrand.IntN(2)].ReadUnlock(ctx, name, 1)
				}
				for range nested {
					s0 := time.Now()
					n, err := cs[mrand.IntN(2)].WriteUnlock(ctx, name, 1, lease)
					if err == nil && n == 0 {
						grants = append(grants, g{s0, time.Now()})
					}
				}
				c = cs[mrand.IntN(2)]
				t2 := time.Now()
				for _, gr := range grants[1:] {
					end := gr.t0.Add(lease / 2)
					if t2.Before(end) {
						end = t2
					}
					mu.Lock()
					holds = append(holds, rwStressHold{thread: th, write: write, start: gr.t1, end: end})
					mu.Unlock()
				}
				end := t0.Add(lease)
				if t2.Before(end) {
					end = t2
				}
				mu.Lock()
				holds = append(holds, rwStressHold{thread: th, write: write, start: t1, end: end})
				mu.Unlock()
				if write {
					_, err = c.WriteUnlock(ctx, name, 1, lease)
				} else {
					_, err = c.ReadUnlock(ctx, name, 1)
				}
				if err != nil && !errors.Is(err, redissonwire.ErrNotOwner) {
					// unlock failed: the hold ends at its lease
					time.Sleep(lease)
				}
				time.Sleep(time.Duration(10+mrand.IntN(40)) * time.Millisecond)
			}
		})
	}
	wg.Wait()
	close(stop)
	sort.Slice(holds, func(i, j int) bool { return holds[i].start.Before(holds[j].start) })
	nw := 0
	for i, a := range holds {
		if a.write {
			nw++
		}
		for _, b := range holds[i+1:] {
			if !b.start.Before(a.end) {
				break
			}
			if a.thread != b.thread && (a.write || b.write) {
				t.Errorf("overlap: thread %d write=%v [%v, %v] and thread %d write=%v [%v, %v]", a.thread, a.write, a.start.Format("05.000"), a.end.Format("05.000"), b.thread, b.write, b.start.Format("05.000"), b.end.Format("05.000"))
			}
		}
	}
	t.Logf("%d holds, %d writes", len(holds), nw)
}
