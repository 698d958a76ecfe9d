package engine_test

// An election's calls honour their context: a Proclaim whose context had
// ended does not leave a value it reports as not proclaimed, a Proclaim
// waiting for an earlier one gives up at its context's end, and Leader
// decides within its context's deadline with a master stopped.

import (
	"context"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
)

// Proclaim with a context that had already ended returned the context's
// error, but wrote the value on every master (broadcast sends before it
// looks at ctx): Leader and Observe then reported a value the leader was
// told was not proclaimed.
//
// Found by the adversarial review of engine.Election (issue #34): it
// failed on the first version.
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
//
// Found by the adversarial review of engine.Election (issue #34): it
// failed on the first version.
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
//
// Found by the adversarial review of engine.Election (issue #34): it
// failed on the first version.
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
