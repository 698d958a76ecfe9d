package engine_test

// An election's leader record (redlock:leader:{NAME}:NAME, deleted by
// Resign) is apart from the key space of locks and elections: neither
// blocks the other.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
)

// The leader record was NAME:leader, in the key space of locks and
// elections, and never deleted: once election "a" had a leader, "a:leader"
// could never be locked (SET NX failed on the hash) and its Leader read
// WRONGTYPE. The record is now redlock:leader:{NAME}:NAME, deleted by Resign.
//
// Found by the adversarial review of engine.Election (issue #34): it
// failed on the first version.
func TestElectionRecordKeyCollision(t *testing.T) {
	v := newEnv(t, 3, functional)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	base := keyName(t, "a")
	ld, err := newElection(t, v.e, base, time.Second).Campaign(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if err := ld.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	// Resign deleted the record.
	for i := range 3 {
		if n := v.mustExec(i, "EXISTS", "redlock:leader:{"+base+"}:"+base).Int; n != 0 {
			t.Errorf("master %d: the record outlived Resign", i)
		}
	}
	// A different election whose name is "a:leader": nobody leads it.
	other := newElection(t, v.e, base+":leader", time.Second)
	if _, err := other.Leader(ctx); !errors.Is(err, engine.ErrNoLeader) {
		t.Errorf("Leader of election %q (nobody campaigned): %v; want ErrNoLeader", base+":leader", err)
	}
	if ld, err := other.TryCampaign(ctx, "y"); err != nil {
		t.Errorf("TryCampaign of election %q (nobody leads it): %v; want a leadership", base+":leader", err)
	} else if err := ld.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	// A plain lock of that name.
	if _, err := v.e.TryLock(ctx, base+":leader", time.Second); err != nil {
		t.Errorf("TryLock(%q) long after election %q's leader resigned: %v; want granted", base+":leader", base, err)
	}
}

// The other direction: a lock held on NAME:leader made election NAME's
// campaigns fail (WRONGTYPE on HSET) although nobody led it.
//
// Found by the adversarial review of engine.Election (issue #34): it
// failed on the first version.
func TestElectionRecordKeyTakenByLock(t *testing.T) {
	v := newEnv(t, 3, functional)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	base := keyName(t, "b")
	l, err := v.e.TryLock(ctx, base+":leader", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	if ld, err := newElection(t, v.e, base, time.Second).TryCampaign(ctx, "x"); err != nil {
		t.Errorf("TryCampaign of free election %q while an unrelated lock %q is held: %v", base, base+":leader", err)
	} else {
		ld.Resign(ctx)
	}
	// The failed campaign gave its lock back (claim 6 holds here).
	if h, err := v.e.Holder(ctx, base); err != nil || h.Token != "" {
		t.Errorf("after the failed campaign, Holder(%q) = %+v, %v; want free", base, h, err)
	}
}
