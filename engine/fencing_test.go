package engine_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/localmaster/mastertest"
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
	if err := e2.WaitReady(ctx); err != nil {
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
