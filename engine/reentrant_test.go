package engine_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
)

// evalshaCalls returns how many EVALSHA calls master i has served.
func (v *env) evalshaCalls(i int) int {
	v.tb.Helper()
	info := v.mustExec(i, "INFO", "commandstats").Text()
	for _, line := range strings.Split(info, "\r\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:calls="); ok {
			n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			return n
		}
	}
	return 0
}

func TestReentrant(t *testing.T) {
	v := newEnv(t, 5, functional)
	ctx := context.Background()
	r, err := v.e.NewReentrant("re:key", "worker-7")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.TryLock(ctx, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	l := r.Held()
	if !strings.HasPrefix(l.Token(), "worker-7:") || r.Count() != 1 {
		t.Fatalf("token %q count %d; want the owner's prefix, count 1", l.Token(), r.Count())
	}
	v.waitHeld("re:key", l.Token())

	// A re-acquisition: one EVALSHA per master, no SET; the TTL raised.
	before := make([]int, 5)
	for i := range before {
		before[i] = v.evalshaCalls(i)
	}
	if err := r.Lock(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if r.Count() != 2 || r.Held() != l {
		t.Fatalf("count %d, same hold %v; want 2, true", r.Count(), r.Held() == l)
	}
	v.waitPTTL("re:key", 3000, 5000)
	for i := range before {
		// INFO itself is not an EVALSHA; the stragglers of the quorum
		// decision answered within waitPTTL.
		if d := v.evalshaCalls(i) - before[i]; d != 1 {
			t.Fatalf("master %d served %d EVALSHA for one re-acquisition; want 1", i, d)
		}
	}
	if l.Remaining() < 3*time.Second {
		t.Fatalf("validity %v after re-acquiring for 5s", l.Remaining())
	}

	// A shorter re-acquisition never lowers the TTL nor the validity.
	if err := r.TryLock(ctx, 500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	v.waitPTTL("re:key", 3000, 5000)
	if l.Remaining() < 3*time.Second || r.Count() != 3 {
		t.Fatalf("validity %v count %d after a 500ms re-acquisition; want > 3s, 3", l.Remaining(), r.Count())
	}

	// Another owner is refused while the count is above zero.
	other, _ := v.e.NewReentrant("re:key", "other")
	if err := other.TryLock(ctx, time.Second); !errors.Is(err, engine.ErrNotAcquired) {
		t.Fatalf("another owner: %v; want ErrNotAcquired", err)
	}
	for want := 2; want >= 1; want-- {
		if err := r.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if r.Count() != want {
			t.Fatalf("count %d; want %d", r.Count(), want)
		}
		v.waitHeld("re:key", l.Token()) // still held on every master
	}
	if err := r.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	v.waitGone("re:key", 5*time.Second)
	if r.Count() != 0 || r.Held() != nil || !errors.Is(r.Err(), engine.ErrUnlocked) {
		t.Fatalf("after the last Unlock: count %d, held %v, err %v", r.Count(), r.Held(), r.Err())
	}
	if err := r.Unlock(ctx); !errors.Is(err, engine.ErrUnlocked) {
		t.Fatalf("Unlock at count 0: %v; want ErrUnlocked", err)
	}
	if err := other.TryLock(ctx, time.Second); err != nil {
		t.Fatalf("the other owner after the release: %v", err)
	}
}

// TestReentrantFailures: a re-acquisition too few masters answer leaves
// the hold and its count as they were; one that a quorum refuses (the key
// no longer holds the token) ends the hold.
func TestReentrantFailures(t *testing.T) {
	v := newEnv(t, 5, engine.Config{FreshMasters: true, MasterTimeout: 50 * time.Millisecond})
	ctx := context.Background()
	r, _ := v.e.NewReentrant("re:fail", "")
	if err := r.TryLock(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	l := r.Held()
	until := l.Until()
	v.pause(0, 1, 2)
	if err := r.TryLock(ctx, 10*time.Second); !errors.Is(err, engine.ErrUnavailable) {
		t.Fatalf("re-acquisition with 3 of 5 masters stopped: %v; want ErrUnavailable", err)
	}
	if r.Count() != 1 || l.Err() != nil || !l.Until().Equal(until) {
		t.Fatalf("after an unavailable re-acquisition: count %d, err %v, until moved %v", r.Count(), l.Err(), l.Until().Sub(until))
	}
	v.resume(0, 1, 2)
	v.waitConnected()
	for i := range 5 {
		v.mustExec(i, "DEL", "re:fail")
	}
	err := r.TryLock(ctx, 5*time.Second)
	if !errors.Is(err, engine.ErrLockLost) || errors.Is(err, engine.ErrUnavailable) {
		t.Fatalf("re-acquisition of a deleted key: %v; want ErrLockLost", err)
	}
	select {
	case <-r.Done():
	default:
		t.Fatal("Done not closed after the hold was lost")
	}
	// The lost hold's frame is still open: a Lock returns the loss,
	// uncounted, until the frame is unlocked; its Unlock reports the loss.
	if err := r.TryLock(ctx, time.Second); !errors.Is(err, engine.ErrLockLost) || r.Count() != 1 {
		t.Fatalf("a Lock while the lost hold's frame is open: %v, count %d; want ErrLockLost, 1", err, r.Count())
	}
	if err := r.Unlock(ctx); !errors.Is(err, engine.ErrLockLost) || r.Count() != 0 {
		t.Fatalf("the lost hold's Unlock: %v, count %d; want ErrLockLost, 0", err, r.Count())
	}
	// The next Lock is an acquisition from zero.
	if err := r.TryLock(ctx, time.Second); err != nil || r.Count() != 1 || r.Held() == l {
		t.Fatalf("acquisition after the loss: %v, count %d, new hold %v", err, r.Count(), r.Held() != l)
	}
}

func TestReentrantBadArguments(t *testing.T) {
	v := newEnv(t, 3, functional)
	for _, c := range []struct{ key, owner string }{{"", "o"}, {"k", strings.Repeat("o", 257)}} {
		if _, err := v.e.NewReentrant(c.key, c.owner); !errors.Is(err, engine.ErrBadArgument) {
			t.Fatalf("NewReentrant(%q, %.10q): %v; want ErrBadArgument", c.key, c.owner, err)
		}
	}
	r, _ := v.e.NewReentrant("k", "o")
	if err := r.TryLock(context.Background(), time.Second, engine.WithToken("t")); !errors.Is(err, engine.ErrBadArgument) {
		t.Fatalf("WithToken: %v; want ErrBadArgument", err)
	}
	if err := r.TryLock(context.Background(), 0); !errors.Is(err, engine.ErrBadArgument) {
		t.Fatalf("ttl 0: %v; want ErrBadArgument", err)
	}
}
