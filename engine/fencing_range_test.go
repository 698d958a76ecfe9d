package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/scripts"
)

// TestFencingCounterAt2To53: the masters' Lua numbers are doubles, exact
// up to 2^53. A master whose clock once read past the year 2255 leaves its
// counter there (emulated by writing it, as TestFencingDelayedSet writes a
// fast clock's); past 2^53, one more was the same number and a token
// written back was read as a smaller one: later holders, in another
// process, took a lower token than earlier ones (found by the review of
// issue #46). Now that master's fenced grants fail with an error, and the
// tokens of holders taking turns through two engines still increase,
// below scripts.MaxFence; with every master there, a fenced acquisition
// fails as unavailable and issues no token.
func TestFencingCounterAt2To53(t *testing.T) {
	const ttl = 2 * time.Second
	v, e2 := fencingEngines(t, ttl)
	ctx := context.Background()
	key := keyName(t)
	v.mustExec(0, "SET", engine.DefaultFenceKey, "9007199254740992")
	var prev int64
	for i, e := range []*engine.Engine{v.e, e2, v.e, e2, v.e, e2} {
		l := fencedLock(t, e, key, ttl)
		f := l.FencingToken()
		if err := l.Unlock(ctx); err != nil && !errors.Is(err, engine.ErrLockLost) {
			t.Fatal(err)
		}
		if f <= prev || f > scripts.MaxFence {
			t.Fatalf("holder %d: token %d after %d (counters %v); want more, at most 2^53 − 1", i, f, prev, v.counters())
		}
		prev = f
	}
	if c := v.counters()[0]; c != 1<<53 {
		t.Fatalf("master 0's counter %d: a fenced grant there wrote it", c)
	}

	for i := range 5 {
		v.mustExec(i, "SET", engine.DefaultFenceKey, "9007199254740991")
	}
	_, err := v.e.TryLock(ctx, key+":all", ttl, engine.WithFencing())
	if !errors.Is(err, engine.ErrUnavailable) || !strings.Contains(err.Error(), "2^53") {
		t.Fatalf("every counter at 2^53 − 1: %v; want unavailable, naming 2^53", err)
	}
	if n, _ := v.exec(0, "EXISTS", key+":all"); n.Int != 0 {
		t.Fatal("the refused fenced acquisition left its key on master 0")
	}
}
