package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/test/mastertest"
)

// TestClockJumpUndoneUnseen pins a residual window of the clock check
// (docs/safety.md, "What it cannot see"; found by the review of #32):
// masters 0-2's clocks jump 9 s ahead (their keys' TTLs are cut: the
// holder's keys are gone) and are stepped back 9 s before the contender's
// next reading (an NTP step and its correction, both between two
// readings). The contender's next TIME shows an honest elapsed time: no
// jump is seen, the three masters vote, and the key is granted while the
// holder's 8 s lock is valid — two holders, fencing's case. If the check
// ever sees this, this test fails: update safety.md then.
func TestClockJumpUndoneUnseen(t *testing.T) {
	set := mastertest.Start(t, 5)
	mastertest.RequireReal(t, set)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	holder, contender, fronts := jumpEngines(t, ctx, set, false)
	start := time.Now()
	l, err := holder.TryLock(ctx, "undone:k", 8*time.Second)
	if l == nil {
		t.Fatalf("holder: %v", err)
	}
	// A grant answers at a quorum: the other masters' writes may still be
	// on their way, and a write after the jump would not be expired by it.
	waitAnswered(t, holder)
	for _, f := range fronts {
		if err := f.Jump(ctx, 9*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := f.Jump(ctx, -9*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	l2, err := contender.TryLock(ctx, "undone:k", time.Second)
	t.Logf("contender: granted %v err %v; holder valid %v (%v left); contender ClockJumpsAhead %d back %d",
		l2 != nil, err, l.Valid(), 8*time.Second-time.Since(start), contender.Stats().ClockJumpsAhead, contender.Stats().ClockJumpsBack)
	if l2 == nil || !l.Valid() {
		t.Errorf("the window safety.md states is gone (contender granted %v, holder valid %v): update the residual windows", l2 != nil, l.Valid())
	}
}
