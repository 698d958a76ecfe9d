package proxy

// From the second adversarial review of the proxy's RReadWriteLock: a
// stress of every read-write command through two proxies over relays whose
// delays change (changes that land partially, reverts, timeouts), and a
// write re-entry through a proxy with a shorter --max-ttl, which lowered
// the TTL (it failed before the re-entry raised only).

import (
	"context"
	"errors"
	mrand "math/rand/v2"
	"sort"
	"strconv"
	"strings"
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

// TestRedissonRWReentryNeverLowers: two proxies of the same masters whose
// --max-ttl differ (a rolling configuration change). W takes the write
// lock through P1 with a 6 s lease; its re-entry through P2 (max-ttl
// 1.5 s) with a 1 s lease set the TTL "exact" to min(pttl+lease, P2's
// MaxTTL) = 1.5 s, lowering it, and a second writer was granted while W's
// first hold still had ~4 s of its lease. Now a re-entry only raises.
func TestRedissonRWReentryNeverLowers(t *testing.T) {
	set := startEnv(t, 3, nil).set
	p1 := startEnvOn(t, set, func(c *Config) { c.EngineConfig.MaxTTL = 30 * time.Second })
	p2 := startEnvOn(t, set, func(c *Config) { c.EngineConfig.MaxTTL = 1500 * time.Millisecond })
	prof := redissonwire.RWProfiles[0]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w1 := dialAs(t, p1.addr, "", prof)
	w1b := dialAs(t, p2.addr, w1.ID, prof)
	w2 := dialAs(t, p1.addr, "", prof)
	name := "rwreview2-reentry-cap"
	t0 := time.Now()
	const lease = 6 * time.Second
	if ok, _, err := w1.WriteTryLock(ctx, name, 1, lease); !ok || err != nil {
		t.Fatalf("W's write tryLock: %v %v", ok, err)
	}
	if ok, _, err := w1b.WriteTryLock(ctx, name, 1, time.Second); !ok || err != nil {
		t.Fatalf("W's re-entry through P2: %v %v", ok, err)
	}
	pttl, _ := w1.TTL(ctx, name)
	t.Logf("PTTL after the re-entry: %d ms", pttl)
	time.Sleep(1700 * time.Millisecond)
	ok, _, err := w2.WriteTryLock(ctx, name, 1, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if left := lease - time.Since(t0); ok && left > time.Second {
		t.Fatalf("a second writer was granted while W's write hold (lease %v, through P1) still had %v left: the re-entry through P2 lowered the TTL to P2's max-ttl", lease, left.Round(time.Millisecond))
	}
}

// TestRedissonRWBounds: a read-write lock's value is bounded (owners, and
// their bytes: long owner names are refused before 256 of them fit), and
// a batched read renewal names at most 512 owners (each is searched for
// in its lock's value on every master).
func TestRedissonRWBounds(t *testing.T) {
	e := startEnv(t, 3, nil)
	c := dialRaw(t, e.addr)
	read := rSHA(t, "redisson-3.20.0-rwReadTryLock")
	long := strings.Repeat("o", 200)
	refused := 0
	for i := range 120 {
		o := long + strconv.Itoa(i)
		r := c.cmd("EVALSHA", read, "2", "bounded", "{bounded}:"+o+":rwlock_timeout", "30000", o, o+":write")
		switch {
		case r == "$-1\r\n":
		case strings.Contains(r, "KiB"):
			refused++
		default:
			t.Fatalf("reader %d: %q", i, r)
		}
	}
	if refused == 0 {
		t.Fatal("120 readers with 200-byte names all joined: the value is not bounded")
	}
	if v := e.masters[0].Get(context.Background(), "bounded").Val(); len(v) > maxRWValue {
		t.Fatalf("a value of %d bytes", len(v))
	}
	task := rSHA(t, "redisson-4.4.0-rwReadLockTask")
	renewal := func(counts ...int) []string {
		keys, argv := []string{}, []string{"30000"}
		for l, n := range counts {
			k := "lock" + strconv.Itoa(l)
			keys = append(keys, k, "{"+k+"}")
			argv = append(argv, strconv.Itoa(n))
			for i := range n {
				argv = append(argv, "o:"+strconv.Itoa(i))
			}
		}
		return append(append([]string{"EVALSHA", task, strconv.Itoa(len(keys))}, keys...), argv...)
	}
	if r := c.cmd(renewal(200, 200, 112)...); strings.Contains(r, "shape") {
		t.Fatalf("a renewal naming 512 owners: %q", r)
	}
	if r := c.cmd(renewal(200, 200, 113)...); !strings.Contains(r, "shape") {
		t.Fatalf("a renewal naming 513 owners: %q", r)
	}
}
