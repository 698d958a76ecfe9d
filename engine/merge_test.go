package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/enginex"
	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/internal/test/netgate"
	"github.com/redlock-dev/redlock/resp"
)

// mergeEnv is an env whose engine writes through a netgate.Gate.
func mergeEnv(t *testing.T, n int) (*env, *netgate.Gate) {
	return mergeEnvWith(t, n, functional)
}

func mergeEnvWith(t *testing.T, n int, cfg engine.Config) (*env, *netgate.Gate) {
	g := netgate.New()
	cfg.Conn.Dialer = g.Dialer()
	return newEnv(t, n, cfg), g
}

// batched runs ops (Unlocks or Extends) so that, on every master, they
// are queued behind a write in progress: the engine must merge them into
// one call per master. first is an operation that occupies the writers;
// before releases the gate it may change the masters (kill one).
func (v *env) batched(g *netgate.Gate, first func() error, ops []func() error, before func()) (firstErr error, errs []error) {
	v.tb.Helper()
	release := g.Hold()
	firstDone := make(chan error, 1)
	go func() { firstDone <- first() }()
	g.WaitInside(len(v.direct)) // every master's writer is inside first's write
	errs = make([]error, len(ops))
	var wg sync.WaitGroup
	// The ops start together: members whose deadlines (start + per-master
	// timeout) lie more than 2 ms apart are not merged with each other
	// (conn.Merge), and goroutines started one by one on a loaded machine
	// can spread that far (once in CI: two calls per master).
	start := make(chan struct{})
	for i, op := range ops {
		wg.Go(func() { <-start; errs[i] = op() })
	}
	close(start)
	// Wait until every op is queued on every master.
	deadline := time.Now().Add(10 * time.Second)
	for i := range len(v.direct) {
		for enginex.Open(v.e).Conns(i)[0].Stats().Pending < len(ops)+1 {
			if time.Now().After(deadline) {
				v.tb.Fatalf("master %d: %d requests queued, want %d", i, enginex.Open(v.e).Conns(i)[0].Stats().Pending, len(ops)+1)
			}
			time.Sleep(time.Millisecond)
		}
	}
	if before != nil {
		before()
	}
	release()
	wg.Wait()
	firstErr = <-firstDone
	// The ops returned at a quorum: let the slowest masters answer too
	// before the test looks at them.
	for i := range len(v.direct) {
		for enginex.Open(v.e).Conns(i)[0].Stats().Pending > 0 {
			if time.Now().After(deadline) {
				v.tb.Fatalf("master %d: requests still in flight", i)
			}
			time.Sleep(time.Millisecond)
		}
	}
	return firstErr, errs
}

// lockMany takes n locks (keys keyName(t, i)), waits until every master
// holds each, and calls prep (if set) on each.
func (v *env) lockMany(t *testing.T, n int, ttl time.Duration, prep func(i int, l *engine.Lock)) []*engine.Lock {
	locks := make([]*engine.Lock, n)
	for i := range locks {
		l := v.mustLock(keyName(t, i), ttl)
		v.waitHeld(l.Key(), l.Token())
		if prep != nil {
			prep(i, l)
		}
		locks[i] = l
	}
	return locks
}

// unlocks returns one Unlock per lock.
func unlocks(ctx context.Context, locks []*engine.Lock) []func() error {
	ops := make([]func() error, len(locks))
	for i, l := range locks {
		ops[i] = func() error { return l.Unlock(ctx) }
	}
	return ops
}

// checkMerged checks that ops requests were merged on each of masters:
// at least one merged call per master, two members a call on average.
// Not exactly one per master: members whose deadlines lie more than 2 ms
// apart are not merged (conn.Merge), and goroutines started together on
// a loaded machine, under the race detector, can spread that far (in CI:
// two calls per master).
func checkMerged(t *testing.T, what string, got, masters, ops int) {
	t.Helper()
	if got < masters || got > masters*ops/2 {
		t.Errorf("%d merged %s calls for %d requests on %d masters, want %d to %d", got, what, ops, masters, masters, masters*ops/2)
	}
}

// mergedCalls counts the recorded writes that hold a call of script.
func mergedCalls(g *netgate.Gate, sha string) int {
	n := 0
	for _, w := range g.Writes() {
		n += strings.Count(string(w), sha)
	}
	return n
}

// TestMergedReleases: releases merged into one script call per master
// still give each lock its own answer: held ones are released, one whose
// token was replaced everywhere is lost (ErrLockLost), one whose key is of
// another type on three masters fails with those masters' errors alone.
func TestMergedReleases(t *testing.T) {
	v, g := mergeEnv(t, 5)
	ctx := context.Background()
	first := v.mustLock(keyName(t, "first"), time.Minute)
	const n = 12
	locks := v.lockMany(t, n, time.Minute, func(i int, l *engine.Lock) {
		switch i % 3 {
		case 1: // another holder everywhere
			for m := range 5 {
				v.mustExec(m, "SET", l.Key(), "someone-else")
			}
		case 2: // a hash on masters 0-2: WRONGTYPE there
			for m := range 3 {
				v.mustExec(m, "DEL", l.Key())
				v.mustExec(m, "HSET", l.Key(), "f", "v")
			}
		}
	})
	ops := unlocks(ctx, locks)
	firstErr, errs := v.batched(g, func() error { return first.Unlock(ctx) }, ops, nil)
	if firstErr != nil {
		t.Errorf("first Unlock: %v", firstErr)
	}
	checkMerged(t, "release", mergedCalls(g, scripts.ReleaseMulti.SHA()), 5, len(ops))
	for i, err := range errs {
		key := locks[i].Key()
		switch i % 3 {
		case 0:
			if err != nil {
				t.Errorf("lock %d: %v, want released", i, err)
			}
			for m, val := range v.values(key) {
				if val != nilValue {
					t.Errorf("lock %d: master %d still holds %q", i, m, val)
				}
			}
		case 1:
			if !errors.Is(err, engine.ErrLockLost) {
				t.Errorf("lock %d (taken over): %v, want ErrLockLost", i, err)
			}
			for m, val := range v.values(key) {
				if val != "someone-else" {
					t.Errorf("lock %d: master %d holds %q, the other holder's value was touched", i, m, val)
				}
			}
		case 2:
			me := masterErrors(err)
			for m := range 5 {
				var re *resp.Error
				bad := m < 3
				if got := me[m] != nil && errors.As(me[m].Err, &re) && strings.HasPrefix(re.Msg, "WRONGTYPE"); got != bad {
					t.Errorf("lock %d master %d: error %v, want WRONGTYPE: %v", i, m, me[m], bad)
				}
			}
			for m := 3; m < 5; m++ {
				if r := v.mustExec(m, "EXISTS", key); r.Int != 0 {
					t.Errorf("lock %d: master %d still holds it", i, m)
				}
			}
		}
	}
}

// TestMergedNotifyingReleases: with a ReleaseChannel, merged releases
// publish every key they deleted and answer per lock.
func TestMergedNotifyingReleases(t *testing.T) {
	cfg := functional
	cfg.ReleaseChannel = "redlock:test-released"
	v, g := mergeEnvWith(t, 3, cfg)
	ctx := context.Background()
	first := v.mustLock(keyName(t, "first"), time.Minute)
	const n = 6
	locks := v.lockMany(t, n, time.Minute, func(i int, l *engine.Lock) {
		if i%2 == 1 {
			for m := range 3 {
				v.mustExec(m, "SET", l.Key(), "someone-else")
			}
		}
	})
	ops := unlocks(ctx, locks)
	var mu sync.Mutex
	published := map[string]bool{}
	sub := conn.Subscribe(v.set.Addrs()[0], conn.Config{}, cfg.ReleaseChannel, func(key []byte) {
		mu.Lock()
		published[string(key)] = true
		mu.Unlock()
	})
	defer sub.Close()
	waitSubscribed(t, v, cfg.ReleaseChannel)
	_, errs := v.batched(g, func() error { return first.Unlock(ctx) }, ops, nil)
	checkMerged(t, "notifying release", mergedCalls(g, scripts.ReleaseNotifyMulti.SHA()), 3, len(ops))
	for i, err := range errs {
		if lost := i%2 == 1; lost != errors.Is(err, engine.ErrLockLost) || (!lost && err != nil) {
			t.Errorf("lock %d: %v, want lost: %v", i, err, lost)
		}
	}
	want := []string{first.Key()}
	for i := 0; i < n; i += 2 {
		want = append(want, locks[i].Key())
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		missing := []string{}
		for _, k := range want {
			if !published[k] {
				missing = append(missing, k)
			}
		}
		extra := len(published) - (len(want) - len(missing))
		mu.Unlock()
		if extra > 0 {
			t.Fatalf("keys not released were published: %v", published)
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("released keys never published on master 0: %v", missing)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitSubscribed waits until master 0 counts two subscribers of channel
// (the engine's and the test's).
func waitSubscribed(t *testing.T, v *env, channel string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := v.mustExec(0, "PUBSUB", "NUMSUB", channel)
		if len(r.Elems) == 2 && r.Elems[1].Int >= 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("PUBSUB NUMSUB %s: %v", channel, r)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestMergedReleasesMasterDies: a master killed while a merged release
// call to it is on its way fails that call, which is one answer of each
// lock on that master only: every lock is still released by the others.
func TestMergedReleasesMasterDies(t *testing.T) {
	v, g := mergeEnv(t, 5)
	ctx := context.Background()
	first := v.mustLock(keyName(t, "first"), time.Minute)
	const n = 8
	locks := v.lockMany(t, n, time.Minute, nil)
	ops := unlocks(ctx, locks)
	firstErr, errs := v.batched(g, func() error { return first.Unlock(ctx) }, ops, func() {
		if err := v.set.Masters()[0].Kill(); err != nil {
			t.Fatal(err)
		}
	})
	if firstErr != nil {
		t.Errorf("first Unlock: %v", firstErr)
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("lock %d: %v, want released by masters 1-4", i, err)
		}
		for m := 1; m < 5; m++ {
			if r := v.mustExec(m, "EXISTS", locks[i].Key()); r.Int != 0 {
				t.Errorf("lock %d: master %d still holds it", i, m)
			}
		}
	}
	if got := mergedCalls(g, scripts.ReleaseMulti.SHA()); got < 4 {
		t.Errorf("%d merged release calls, want one per live master", got)
	}
	if st := v.e.Stats(); st.MasterErrors[0] < n || st.MasterErrors[1]+st.MasterErrors[2]+st.MasterErrors[3]+st.MasterErrors[4] != 0 {
		t.Errorf("master errors %v, want ≥ %d on master 0 and none elsewhere", st.MasterErrors, n)
	}
}

// TestMergedExtends: extensions merged into one call per master extend
// the locks still held and report the others lost.
func TestMergedExtends(t *testing.T) {
	v, g := mergeEnv(t, 5)
	ctx := context.Background()
	first := v.mustLock(keyName(t, "first"), 10*time.Second)
	const n = 8
	locks := v.lockMany(t, n, 10*time.Second, func(i int, l *engine.Lock) {
		if i%2 == 1 {
			for m := range 5 {
				v.mustExec(m, "SET", l.Key(), "someone-else", "PX", "10000")
			}
		}
	})
	ops := make([]func() error, n)
	for i, l := range locks {
		ops[i] = func() error { return l.Extend(ctx, time.Minute) }
	}
	firstErr, errs := v.batched(g, func() error { return first.Extend(ctx, time.Minute) }, ops, nil)
	if firstErr != nil {
		t.Errorf("first Extend: %v", firstErr)
	}
	checkMerged(t, "extend", mergedCalls(g, scripts.ExtendMulti.SHA()), 5, len(ops))
	for i, err := range errs {
		ttls := v.pttls(locks[i].Key())
		if i%2 == 0 {
			if err != nil {
				t.Errorf("lock %d: %v", i, err)
			}
			for m, p := range ttls {
				if p < 50_000 {
					t.Errorf("lock %d: master %d PTTL %d ms, want extended to a minute", i, m, p)
				}
			}
			continue
		}
		if !errors.Is(err, engine.ErrLockLost) {
			t.Errorf("lock %d (taken over): %v, want ErrLockLost", i, err)
		}
		for m, p := range ttls {
			if p > 10_000 {
				t.Errorf("lock %d: master %d PTTL %d ms: the other holder's key was extended", i, m, p)
			}
		}
	}
}
