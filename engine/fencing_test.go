package engine_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/enginex"
	"github.com/redlock-dev/redlock/internal/localmaster"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/internal/test/relay"
)

// fencingEngines starts 5 real masters and two engines over them: two
// processes taking turns, so the in-process floor of one engine cannot be
// what keeps the tokens increasing.
func fencingEngines(t *testing.T, ttl time.Duration) (*env, *engine.Engine) {
	t.Helper()
	cfg := engine.Config{FreshMasters: true, MasterTimeout: 500 * time.Millisecond, QuarantineFor: ttl,
		Conn: conn.Config{ReconnectMin: time.Millisecond, ReconnectMax: 20 * time.Millisecond}}
	v := newEnv(t, 5, cfg)
	mastertest.RequireReal(t, v.set)
	cfg.Addrs = v.set.Addrs()
	e2, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e2.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := e2.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return v, e2
}

// fencedLock takes key with a fencing token, waiting through quarantines
// and down masters.
func fencedLock(t *testing.T, e *engine.Engine, key string, ttl time.Duration) *engine.Lock {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	l, err := e.Lock(ctx, key, ttl, engine.WithFencing(), engine.WithRetryDelay(10*time.Millisecond))
	if err != nil {
		t.Fatalf("fenced Lock(%s): %v", key, err)
	}
	if l.FencingToken() <= 0 {
		t.Fatalf("fenced lock has token %d", l.FencingToken())
	}
	return l
}

// counters returns the fencing counter on every master (-1: unreachable or
// absent).
func (v *env) counters() []int64 {
	out := make([]int64, len(v.direct))
	for i := range v.direct {
		out[i] = -1
		r, err := v.exec(i, "GET", engine.DefaultFenceKey)
		if err == nil && !r.IsNull() {
			out[i], _ = strconv.ParseInt(string(r.Str), 10, 64)
		}
	}
	return out
}

// TestFencingWriteBack: successive holders win different quorums. A
// master's counter runs ahead of the others (its clock is ahead, or it
// granted more); the holder that got that master's number writes it back
// to a quorum before Lock returns, so the next holder — another process,
// on a quorum without that master — still counts above it. Without the
// write-back the second token is lower than the first.
func TestFencingWriteBack(t *testing.T) {
	const ttl = 300 * time.Millisecond
	v, e2 := fencingEngines(t, ttl)
	ctx := context.Background()
	key := keyName(t)
	ms := v.set.Masters()
	ahead := time.Now().UnixMicro() + 1e12 // ~11 days ahead
	v.mustExec(0, "SET", engine.DefaultFenceKey, strconv.FormatInt(ahead, 10))

	// Masters 3 and 4 down: the first holder's quorum is {0, 1, 2}.
	for _, i := range []int{3, 4} {
		if err := ms[i].Kill(); err != nil {
			t.Fatal(err)
		}
	}
	l1 := fencedLock(t, v.e, key, ttl)
	f1 := l1.FencingToken()
	if f1 <= ahead {
		t.Fatalf("first token %d is not above master 0's counter %d", f1, ahead)
	}
	c := v.counters()
	if c[0] < f1 || c[1] < f1 || c[2] < f1 {
		t.Fatalf("after Lock returned, counters are %v; want ≥ %d on the quorum {0, 1, 2}", c, f1)
	}
	if err := l1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	// 3 and 4 come back empty (quarantined for a while), the master that
	// was ahead dies: the second holder, another engine, gets a quorum of
	// {1, 2, 3, 4}, which shares 1 or 2 with the first.
	restartEmpty(t, v.set, 3, 4)
	if err := ms[0].Kill(); err != nil {
		t.Fatal(err)
	}
	l2 := fencedLock(t, e2, key, ttl)
	f2 := l2.FencingToken()
	if f2 <= f1 {
		t.Fatalf("second holder (another engine, quorum without master 0) got %d ≤ first %d", f2, f1)
	}
	if err := l2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	// Once 3 and 4 carry the second number, 1 and 2 restart empty: they
	// vote again after their quarantine with counters started from their
	// clocks, and 3 or 4 is in every quorum.
	// The write-back beyond the quorum is best effort: on a starved machine
	// the raise to a just-restarted master can time out. Another holder's
	// write-back then carries a higher number there.
	deadline := time.Now().Add(5 * time.Second)
	for c, tries := v.counters(), 0; c[3] < f2 || c[4] < f2; c, tries = v.counters(), tries+1 {
		if time.Now().After(deadline) {
			t.Fatalf("the write-back of %d never reached masters 3 and 4: %v", f2, c)
		}
		if tries%50 == 49 {
			l := fencedLock(t, e2, key, ttl)
			f2 = l.FencingToken()
			l.Unlock(ctx)
		}
		time.Sleep(10 * time.Millisecond)
	}
	restartEmpty(t, v.set, 1, 2)
	l3 := fencedLock(t, v.e, key, ttl)
	if f3 := l3.FencingToken(); f3 <= f2 {
		t.Fatalf("third holder after masters 1, 2 restarted empty got %d ≤ %d", f3, f2)
	}
}

// TestFencingTokens: tokens strictly increase from holder to holder while
// masters are killed and restarted empty between acquisitions, holders
// alternating between two engines (processes). Seeded; the seed is printed.
func TestFencingTokens(t *testing.T) {
	const ttl = 200 * time.Millisecond
	v, e2 := fencingEngines(t, ttl)
	seed := uint64(time.Now().UnixNano())
	if s, err := strconv.ParseUint(os.Getenv("REDLOCK_FAULT_SEED"), 10, 64); err == nil {
		seed = s
	}
	t.Logf("seed %d (REDLOCK_FAULT_SEED=%d reproduces the fault sequence)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	ctx := context.Background()
	engines := []*engine.Engine{v.e, e2}
	key := keyName(t)
	var prev int64
	var down []int // killed masters, restarted empty next round
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for round := range 24 {
		for _, i := range down {
			if err := v.set.Masters()[i].Restart(rctx); err != nil {
				t.Fatal(err)
			}
		}
		down = down[:0]
		var action string
		switch rng.IntN(3) {
		case 0:
			action = "none"
		case 1: // restart 1-2 masters empty
			a, b := rng.IntN(5), rng.IntN(5)
			restartEmpty(t, v.set, a)
			if b != a {
				restartEmpty(t, v.set, b)
			}
			action = fmt.Sprintf("restarted %d,%d empty", a, b)
		case 2: // kill 2 masters for this round
			a := rng.IntN(5)
			b := (a + 1 + rng.IntN(4)) % 5
			for _, i := range []int{a, b} {
				if err := v.set.Masters()[i].Kill(); err != nil {
					t.Fatal(err)
				}
			}
			down = append(down, a, b)
			action = fmt.Sprintf("killed %d,%d", a, b)
		}
		e := engines[rng.IntN(2)]
		l := fencedLock(t, e, key, ttl)
		f := l.FencingToken()
		if f <= prev {
			t.Fatalf("round %d (%s): token %d ≤ previous %d", round, action, f, prev)
		}
		prev = f
		if err := l.Unlock(ctx); err != nil && !errors.Is(err, engine.ErrLockLost) {
			t.Fatalf("round %d: Unlock: %v", round, err)
		}
	}
}

// TestFencingCounterBroken: when the fencing counter cannot be used (here
// another writer made it a list on two of three masters), the fenced
// acquisition fails with their errors and leaves no lock behind.
func TestFencingCounterBroken(t *testing.T) {
	v := newEnv(t, 3, engine.Config{FreshMasters: true, MasterTimeout: 300 * time.Millisecond})
	ctx := context.Background()
	key := keyName(t)
	for _, i := range []int{1, 2} {
		v.mustExec(i, "RPUSH", engine.DefaultFenceKey, "x")
	}
	_, err := v.e.TryLock(ctx, key, 5*time.Second, engine.WithFencing())
	if err == nil {
		t.Fatal("fenced TryLock succeeded although two of three masters cannot count")
	}
	if !errors.Is(err, engine.ErrNotAcquired) && !errors.Is(err, engine.ErrUnavailable) {
		t.Fatalf("error %v matches neither ErrNotAcquired nor ErrUnavailable", err)
	}
	l, err := v.e.TryLock(ctx, key, 5*time.Second)
	if err != nil {
		t.Fatalf("the failed fenced acquisition left the key behind: %v", err)
	}
	l.Unlock(ctx)
}

// relays starts a relay to each master of set in idx, closed when the test
// ends (released first, so nothing waits in them).
func relays(t *testing.T, set *localmaster.Set, idx ...int) []*relay.Relay {
	t.Helper()
	out := make([]*relay.Relay, len(idx))
	for j, i := range idx {
		r, err := relay.Start(set.Addrs()[i])
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Release(); r.Close() })
		out[j] = r
	}
	return out
}

// engineVia starts an engine over addrs and waits until it is connected to
// every master.
func engineVia(t *testing.T, addrs []string, cfg engine.Config) *engine.Engine {
	t.Helper()
	cfg.Addrs = addrs
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range addrs {
		for _, c := range enginex.Open(e).Conns(i) {
			if err := c.WaitConnected(ctx); err != nil {
				t.Fatalf("engine connection to master %d: %v", i, err)
			}
		}
	}
	return e
}

// onReply runs do when the engine it observes gets its next reply from
// one master after arm (a relay's Hold: the command that produced the reply
// has run there, the ones the engine sends next wait in the relay).
type onReply struct {
	engine.NopObserver
	master int
	do     func()
	armed  atomic.Bool
}

func (o *onReply) MasterReply(i int, _ time.Duration, _ error) {
	if i == o.master && o.armed.CompareAndSwap(true, false) {
		o.do()
	}
}

// TestFencingDelayedSet is the interleaving of issue #22 item 7: a holder
// whose lock comes after another's must get a higher token even when one
// of its grants ran on a master before the earlier holder's write-back
// reached that master. Masters A..E (0..4), quorum 3; A's counter is ahead
// (a fast clock, or more grants).
//
//  1. Holder 2 (engine 2) sends its fenced SETs: D and E grant at once,
//     those to A, B and C wait in engine 2's relays.
//  2. Holder 1 (engine 1) is granted A, B, C (token F1 from A's counter);
//     D and E refuse (held by holder 2). Its write-back reaches A, B, D,
//     E; the one to C waits in engine 1's relay.
//  3. Holder 1's lock expires; then holder 2's SET reaches C: {C, D, E}
//     is a quorum and holder 2 holds the lock, after holder 1's ended.
//
// With a write-back that counts wherever it ran, holder 1 got F1 (A, B,
// D, E stored it) and holder 2 a token from C, D, E, whose counters never
// saw F1: lower. The write-back counts only where the key still holds the
// holder's token: D and E no longer did, so holder 1 is refused.
func TestFencingDelayedSet(t *testing.T) {
	const (
		a, c = 0, 2
		ttl1 = 500 * time.Millisecond
		ttl2 = 30 * time.Second
	)
	set := mastertest.Start(t, 5)
	mastertest.RequireReal(t, set)
	addrs := set.Addrs()
	via2 := relays(t, set, 0, 1, 2) // engine 2's paths to A, B, C
	via1 := relays(t, set, c)[0]    // engine 1's path to C
	obs := &onReply{master: c, do: via1.Hold}
	cfg := engine.Config{FreshMasters: true, MasterTimeout: time.Second, Observer: obs}
	e1 := engineVia(t, []string{addrs[0], addrs[1], via1.Addr(), addrs[3], addrs[4]}, cfg)
	cfg.Observer = nil
	e2 := engineVia(t, []string{via2[0].Addr(), via2[1].Addr(), via2[2].Addr(), addrs[3], addrs[4]}, cfg)
	v := newEnvOn(t, set, functional) // direct connections to look at the masters
	key := keyName(t)
	ahead := time.Now().UnixMicro() + time.Minute.Microseconds()
	v.mustExec(a, "SET", engine.DefaultFenceKey, strconv.FormatInt(ahead, 10))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// 1. Holder 2's SETs: D and E run them, A, B, C wait.
	for _, r := range via2 {
		r.Hold()
	}
	type result struct {
		l   *engine.Lock
		err error
	}
	second := make(chan result, 1)
	go func() {
		l, err := e2.TryLock(ctx, key, ttl2, engine.WithFencing(), engine.WithMasterTimeout(40*time.Second))
		second <- result{l, err}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for v.mustExec(3, "EXISTS", key).Int != 1 || v.mustExec(4, "EXISTS", key).Int != 1 {
		if time.Now().After(deadline) {
			t.Fatal("holder 2's SET never reached masters 3 and 4")
		}
		time.Sleep(5 * time.Millisecond)
	}

	// 2. Holder 1: granted by A, B, C; its write-back to C waits.
	obs.armed.Store(true)
	l1, err1 := e1.TryLock(ctx, key, ttl1, engine.WithFencing())
	var f1 int64
	if err1 != nil {
		if !errors.Is(err1, engine.ErrNotAcquired) && !errors.Is(err1, engine.ErrUnavailable) {
			t.Fatalf("holder 1: %v", err1)
		}
		t.Logf("holder 1 refused: %v", err1)
	} else {
		f1 = l1.FencingToken()
		t.Logf("holder 1: token %d, counters after its write-back %v", f1, v.counters())
	}

	// 3. Holder 1's lock is over and its key gone from C; then holder 2's
	// SET reaches C.
	deadline = time.Now().Add(10 * time.Second)
	for v.mustExec(c, "EXISTS", key).Int != 0 || (l1 != nil && l1.Valid()) {
		if time.Now().After(deadline) {
			t.Fatal("holder 1's key never expired on master 2")
		}
		time.Sleep(5 * time.Millisecond)
	}
	via2[2].Release()
	var r2 result
	select {
	case r2 = <-second:
	case <-time.After(30 * time.Second):
		t.Fatal("holder 2's TryLock did not return")
	}
	if r2.err != nil {
		t.Fatalf("holder 2 (C, D, E granted): %v", r2.err)
	}
	f2 := r2.l.FencingToken()
	t.Logf("holder 2: token %d", f2)
	if l1 != nil && f2 <= f1 {
		t.Fatalf("holder 2 took the lock after holder 1's had ended but got token %d ≤ holder 1's %d (counters %v)", f2, f1, v.counters())
	}
	for _, r := range append(via2, via1) {
		r.Release()
	}
	if err := r2.l.Unlock(ctx); err != nil {
		t.Errorf("holder 2 Unlock: %v", err)
	}
}

// TestFencingDelayedSetRestart is TestFencingDelayedSet where the master
// that the two holders' quorums share lost holder 2's key in a restart
// before holder 1 was granted there. Masters A..E (0..4), quorum 3, A's
// counter ahead, a quarantine period covering both holders' TTLs.
//
//  1. Holder 2 (engine 2) sends its fenced SETs: C and E grant at once,
//     those to A, B and D wait in engine 2's relays.
//  2. C restarts empty: engine 1 quarantines it.
//  3. Holder 1 (engine 1) is granted A, B and D (token F1 from A's
//     counter), and C (not counted: quarantined); E refuses. Its
//     write-back finds its token on A, B and C; the one to D waits in
//     engine 1's relay.
//  4. Holder 1's lock expires; then holder 2's SET reaches D: {C, E, D} is
//     a quorum, holder 2's token is computed from their counters, none of
//     which saw F1. Its write-back is stored by D, E and, once its SETs
//     reach them, A and B: holder 2 holds the lock after holder 1's ended.
//
// A write-back that counts where the key holds the token, quarantined or
// not, gave holder 1 F1 (A, B, C) and holder 2 a lower token. A
// quarantined master's write-back does not count: holder 1 is refused.
func TestFencingDelayedSetRestart(t *testing.T) {
	const (
		a, c, d, e = 0, 2, 3, 4
		ttl1       = 500 * time.Millisecond
		ttl2       = 30 * time.Second
	)
	set := mastertest.Start(t, 5)
	mastertest.RequireReal(t, set)
	addrs := set.Addrs()
	via2 := relays(t, set, 0, 1, d) // engine 2's paths to A, B, D
	via1 := relays(t, set, d)[0]    // engine 1's path to D
	obs1 := &onReply{master: d, do: via1.Hold}
	decided := make(chan struct{})
	obs2 := &onReply{master: e, do: func() { close(decided) }}
	cfg := engine.Config{FreshMasters: true, MasterTimeout: time.Second, Observer: obs1,
		Conn: conn.Config{ReconnectMin: time.Millisecond, ReconnectMax: 20 * time.Millisecond}}
	e1 := engineVia(t, []string{addrs[0], addrs[1], addrs[2], via1.Addr(), addrs[4]}, cfg)
	cfg.Observer = obs2
	e2 := engineVia(t, []string{via2[0].Addr(), via2[1].Addr(), addrs[2], via2[2].Addr(), addrs[4]}, cfg)
	v := newEnvOn(t, set, functional)
	key := keyName(t)
	ahead := time.Now().UnixMicro() + time.Minute.Microseconds()
	v.mustExec(a, "SET", engine.DefaultFenceKey, strconv.FormatInt(ahead, 10))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The masters were just started for this test (FreshMasters); after
	// a restart a master is quarantined for MaxTTL (60s > ttl2).

	// 1. Holder 2's SETs: C and E run them, A, B, D wait.
	for _, r := range via2 {
		r.Hold()
	}
	type result struct {
		l   *engine.Lock
		err error
	}
	second := make(chan result, 1)
	go func() {
		l, err := e2.TryLock(ctx, key, ttl2, engine.WithFencing(), engine.WithMasterTimeout(40*time.Second))
		second <- result{l, err}
	}()
	waitUntil := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatal(what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitUntil("holder 2's SET never reached masters 2 and 4", func() bool {
		return v.mustExec(c, "EXISTS", key).Int == 1 && v.mustExec(e, "EXISTS", key).Int == 1
	})

	// 2. C restarts empty; engine 1 quarantines it.
	restartEmpty(t, set, c)
	waitUntil("engine 1 never quarantined the restarted master 2", func() bool {
		st := e1.Status()[c]
		return st.Up && st.Quarantined
	})
	v.waitConnected()

	// 3. Holder 1: granted by A, B, D (and C, quarantined); its
	// write-back to D waits.
	obs1.armed.Store(true)
	l1, err1 := e1.TryLock(ctx, key, ttl1, engine.WithFencing())
	var f1 int64
	if err1 != nil {
		if !errors.Is(err1, engine.ErrNotAcquired) && !errors.Is(err1, engine.ErrUnavailable) {
			t.Fatalf("holder 1: %v", err1)
		}
		t.Logf("holder 1 refused: %v", err1)
	} else {
		f1 = l1.FencingToken()
		t.Logf("holder 1: token %d, counters after its write-back %v", f1, v.counters())
	}

	// 4. Holder 1's lock is over and its keys gone; holder 2's SET reaches
	// D, and once holder 2 decided (its write-back answered by E), its
	// SETs and write-backs reach A and B.
	waitUntil("holder 1's key never expired", func() bool {
		return v.mustExec(a, "EXISTS", key).Int == 0 && v.mustExec(d, "EXISTS", key).Int == 0 && (l1 == nil || !l1.Valid())
	})
	obs2.armed.Store(true)
	via2[2].Release()
	select {
	case <-decided:
	case <-time.After(30 * time.Second):
		t.Fatal("holder 2 never wrote its token back to master 4")
	}
	via2[0].Release()
	via2[1].Release()
	var r2 result
	select {
	case r2 = <-second:
	case <-time.After(30 * time.Second):
		t.Fatal("holder 2's TryLock did not return")
	}
	if r2.err != nil {
		t.Fatalf("holder 2 (C, E, D granted): %v", r2.err)
	}
	f2 := r2.l.FencingToken()
	t.Logf("holder 2: token %d", f2)
	if l1 != nil && f2 <= f1 {
		t.Fatalf("holder 2 took the lock after holder 1's had ended but got token %d ≤ holder 1's %d (counters %v)", f2, f1, v.counters())
	}
	via1.Release()
	if err := r2.l.Unlock(ctx); err != nil {
		t.Errorf("holder 2 Unlock: %v", err)
	}
}
