package engine_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/test/check"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/internal/test/relay"
)

// lateObs reports the engine's events to the test: an optional hook at the
// first successful acquisition, each lost lock, each watchdog extension's
// decision.
type lateObs struct {
	engine.NopObserver
	onAcquire atomic.Pointer[func()]
	lost      chan error
	extDone   chan bool // each watchdog extension's decision: succeeded
}

func (o *lateObs) Acquire(ev engine.AcquireEvent) {
	if ev.Result == engine.AcquireGranted {
		if f := o.onAcquire.Swap(nil); f != nil {
			(*f)()
		}
	}
}

func (o *lateObs) Lost(err error) {
	select {
	case o.lost <- err:
	default:
	}
}

func (o *lateObs) Extend(ok, watchdog bool) {
	if watchdog {
		select {
		case o.extDone <- ok:
		default:
		}
	}
}

// lateRelayed starts three real masters behind relays and an engine over the
// relays: TTL 1s elections, a per-master timeout longer than the TTL (as the
// tests' functional config), drift 10% (a wider window, same logic).
func lateRelayed(t *testing.T) (*engine.Engine, []*relay.Relay, *lateObs) {
	set := mastertest.Start(t, 3)
	mastertest.RequireReal(t, set)
	addrs := set.Addrs()
	var rs []*relay.Relay
	for i := range addrs {
		r, err := relay.Start(addrs[i])
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		rs = append(rs, r)
		addrs[i] = r.Addr()
	}
	obs := &lateObs{lost: make(chan error, 16), extDone: make(chan bool, 16)}
	e, err := engine.New(engine.Config{FreshMasters: true, Addrs: addrs, MasterTimeout: 3 * time.Second, DriftFactor: 0.1, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := e.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return e, rs, obs
}

func lateWait[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
	var zero T
	return zero
}

// TestCampaignNotReturnedEnded: property (c). The watchdog's extension is
// held on the wire with the leader record; the engine ends the lock by the
// clock (Done closes, Err: lost); then the extension is answered late,
// and the record completes. Campaign must not return the leadership:
// before, the late success raised Until again, Valid (which ignored the
// lock's end) passed the last check, and Campaign returned a leadership
// already ended (found by the review of issue #46). The precondition: a
// per-master timeout longer than about half the TTL (the watchdog's
// answers can then come after the deadline).
func TestCampaignNotReturnedEnded(t *testing.T) {
	e, rs, obs := lateRelayed(t)
	ctx := context.Background()
	{ // load the scripts on the masters (a first EVALSHA followed by another request of its key fails NOSCRIPT)
		wel, err := e.NewElection(keyName(t, "warm"), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		wld, err := wel.Campaign(ctx, "warm")
		if err != nil {
			t.Fatal(err)
		}
		if err := wld.Lock().Extend(ctx, time.Second); err != nil {
			t.Fatal(err)
		}
		if err := wld.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		for len(obs.lost) > 0 {
			<-obs.lost
		}
		for len(obs.extDone) > 0 {
			<-obs.extDone
		}
	}
	hold := func() {
		for _, r := range rs {
			r.Hold() // the leader record and the watchdog's extension wait
		}
	}
	obs.onAcquire.Store(&hold)
	el, err := e.NewElection(keyName(t), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	type res struct {
		ld  *engine.Leadership
		err error
	}
	out := make(chan res, 1)
	go func() {
		ld, err := el.Campaign(ctx, "zz-value")
		out <- res{ld, err}
	}()
	lostErr := lateWait(t, obs.lost, "the keeper to end the lock by the clock")
	t.Logf("lock ended: %v", lostErr)
	rs[0].Release()
	rs[1].Release()
	if ok := lateWait(t, obs.extDone, "the held watchdog extension's late decision"); ok {
		t.Errorf("the watchdog's extension, answered after the lock ended, counted as a success")
	}
	rs[2].Release()
	r := lateWait(t, out, "Campaign")
	if r.err == nil {
		defer r.ld.Resign(ctx)
		t.Fatalf("Campaign returned a leadership that had already ended: Err = %v, Lock().Valid() = %v (Remaining %v)",
			r.ld.Err(), r.ld.Lock().Valid(), r.ld.Lock().Remaining())
	}
}

// TestProclaimAfterEndIsLoss: property (h). A Proclaim in flight when the
// leadership's validity ends (the engine ends it by the clock: Done
// closes, Err: lost) reports the loss once the held record reaches the
// masters, not nil; and the watchdog's extension, answered after the end,
// does not raise Until again (Valid stays false: no resurrection). Both
// failed before (found by the review of issue #46).
func TestProclaimAfterEndIsLoss(t *testing.T) {
	e, rs, obs := lateRelayed(t)
	el, err := e.NewElection(keyName(t), 3*time.Second) // the late extension leaves 3 s: its release must come well before
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ld, err := el.Campaign(ctx, "first")
	if err != nil {
		t.Fatal(err)
	}
	defer ld.Resign(ctx)
	for _, r := range rs {
		r.Hold()
	}
	out := make(chan error, 1)
	go func() { out <- ld.Proclaim(ctx, "zz-second") }()
	lostErr := lateWait(t, obs.lost, "the keeper to end the leadership by the clock")
	for time.Now().Before(ld.Lock().Until()) { // past the deadline, by the clock
		time.Sleep(time.Millisecond)
	}
	ended := ld.Err()
	t.Logf("leadership ended: %v (Err %v)", lostErr, ended)
	for _, r := range rs {
		r.Release()
	}
	perr := lateWait(t, out, "Proclaim")
	if perr == nil {
		t.Errorf("Proclaim returned nil though the leadership's validity had ended before it returned (Err = %v)", ld.Err())
	}
	if ok := lateWait(t, obs.extDone, "the held watchdog extension's late decision"); ok {
		t.Errorf("the watchdog's extension, answered after the lock ended, counted as a success")
	}
	if ld.Lock().Valid() {
		t.Errorf("resurrection: after the lock ended (Err = %v) the late extension raised Until: Valid() = true, Remaining = %v",
			ld.Err(), ld.Lock().Remaining())
	}
	// The masters that confirmed the late extension hold the key under a
	// token nobody holds: the engine releases it there.
	for i, r := range rs {
		c, err := conn.Dial(ctx, r.Addr(), conn.Config{})
		if err != nil {
			t.Fatal(err)
		}
		check.Eventually(t, time.Second, fmt.Sprintf("master %d released after the late extension (its TTL: 3 s)", i), func() bool {
			n, err := c.Exec(ctx, "EXISTS", ld.Lock().Key())
			return err == nil && n.Int == 0
		})
		c.Close()
	}
}
