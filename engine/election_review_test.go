package engine_test

// Found by the adversarial review of engine.Election (issue #34): each
// test failed on the first version.

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

// Proclaim with a context that had already ended returned the context's
// error, but wrote the value on every master (broadcast sends before it
// looks at ctx): Leader and Observe then reported a value the leader was
// told was not proclaimed.
func TestElectionProclaimCancelledContext(t *testing.T) {
	v := newEnv(t, 3, functional)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	el := newElection(t, v.e, keyName(t), 5*time.Second)
	ld, err := el.Campaign(ctx, "first")
	if err != nil {
		t.Fatal(err)
	}
	defer ld.Resign(ctx)
	dead, dcancel := context.WithCancel(ctx)
	dcancel()
	perr := ld.Proclaim(dead, "never")
	time.Sleep(100 * time.Millisecond)
	got, err := el.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Proclaim(cancelled ctx) = %v; Leadership.Value() = %q; Leader().Value = %q", perr, ld.Value(), got.Value)
	if perr != nil && got.Value != ld.Value() {
		t.Errorf("Proclaim with an ended context returned %v, yet Leader() reports its value %q (Leadership.Value() %q)", perr, got.Value, ld.Value())
	}
}

// A Proclaim waited for an earlier one on a mutex without looking at its
// context: with one of five masters stopped each proclamation waits for
// it up to the per-master timeout, and a Proclaim with a 50ms context
// blocked about as long.
func TestElectionProclaimWaitHonoursContext(t *testing.T) {
	ctx, _, ld := ledWithStoppedMaster(t)
	go ld.Proclaim(ctx, "slow") // waits for master 4 until its timeout
	time.Sleep(100 * time.Millisecond)
	sctx, scancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer scancel()
	start := time.Now()
	err := ld.Proclaim(sctx, "quick")
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("Proclaim with a 50ms context returned after %v (%v): it waited on the mutex ignoring its context", d.Round(time.Millisecond), err)
	}
}

// Leader waited for every master, not for a decision: with one of five
// masters stopped and four answering that a leader holds, a Leader call
// whose context is shorter than the per-master timeout got the context's
// error. Its masters' requests now time out within ctx's deadline.
func TestElectionLeaderWithinContext(t *testing.T) {
	ctx, el, ld := ledWithStoppedMaster(t)
	rctx, rcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer rcancel()
	got, err := el.Leader(rctx)
	if err != nil {
		t.Errorf("Leader with 4 of 5 masters answering within 300ms: %v; want the leader (term %d)", err, ld.Term())
	} else if got.Term != ld.Term() {
		t.Errorf("Leader = %+v", got)
	}
}

// Holder, like Leader, decides within ctx's deadline: with one of five
// masters stopped, a read whose ctx is shorter than the per-master
// timeout names the holder instead of returning ctx's error.
func TestHolderWithinContext(t *testing.T) {
	cfg := functional
	cfg.MasterTimeout = 2 * time.Second
	v := newEnv(t, 5, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l := v.mustLock(keyName(t), 10*time.Second)
	v.waitHeld(l.Key(), l.Token())
	v.pause(4)
	rctx, rcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer rcancel()
	if h, err := v.e.Holder(rctx, l.Key()); err != nil || h.Token != l.Token() {
		t.Fatalf("Holder with 4 of 5 masters answering within 300ms: %+v, %v; want the holder", h, err)
	}
}

// ledWithStoppedMaster is a leader of an election over five masters
// (per-master timeout 2s) of which master 4 is then stopped.
func ledWithStoppedMaster(t *testing.T) (context.Context, *engine.Election, *engine.Leadership) {
	cfg := functional
	cfg.MasterTimeout = 2 * time.Second
	v := newEnv(t, 5, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	el := newElection(t, v.e, keyName(t), 10*time.Second)
	ld, err := el.Campaign(ctx, "first")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ld.Resign(ctx) })
	v.pause(4)
	return ctx, el, ld
}
