package engine_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
)

func newElection(t testing.TB, e *engine.Engine, name string, ttl time.Duration) *engine.Election {
	t.Helper()
	el, err := e.NewElection(name, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return el
}

// One leader at a time, terms strictly increasing from one leader to the
// next: campaigners in three engines over five masters, each leader
// checked in and out of a shared record around its hold.
func TestElectionOneLeader(t *testing.T) {
	set := mastertest.Start(t, 5)
	var engines []*engine.Engine
	for range 3 {
		v := newEnvOn(t, set, functional)
		engines = append(engines, v.e)
	}
	name := keyName(t)
	const campaigns = 150
	var (
		mu       sync.Mutex
		leader   = -1
		lastTerm int64
		overlaps int
		nonIncr  int
		terms    int
	)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			el := newElection(t, engines[w%3], name, 2*time.Second)
			for i := range campaigns / 6 {
				ld, err := el.Campaign(ctx, fmt.Sprintf("w%d-%d", w, i))
				if err != nil {
					t.Errorf("campaign: %v", err)
					return
				}
				mu.Lock()
				if leader != -1 {
					overlaps++
				}
				if ld.Term() <= lastTerm {
					nonIncr++
				}
				leader, lastTerm = w, ld.Term()
				terms++
				mu.Unlock()
				time.Sleep(time.Millisecond)
				mu.Lock()
				leader = -1
				mu.Unlock()
				if err := ld.Resign(ctx); err != nil {
					t.Errorf("resign: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	if overlaps != 0 || nonIncr != 0 || terms != campaigns {
		t.Fatalf("%d leaderships: %d overlapping another, %d with a term not above the previous leader's (want %d, 0, 0)", terms, overlaps, nonIncr, campaigns)
	}
}

// Leader reads the leader, its term and its value by quorum; Proclaim
// changes the value; Resign frees the election; a later leader's term is
// higher.
func TestElectionLeaderProclaim(t *testing.T) {
	v := newEnv(t, 5, functional)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	el := newElection(t, v.e, keyName(t), 5*time.Second)
	if _, err := el.Leader(ctx); !errors.Is(err, engine.ErrNoLeader) {
		t.Fatalf("Leader before any campaign: %v, want ErrNoLeader", err)
	}
	ld, err := el.Campaign(ctx, "a:1")
	if err != nil {
		t.Fatal(err)
	}
	got, err := el.Leader(ctx)
	if err != nil || got.Term != ld.Term() || got.Value != "a:1" || got.Token != ld.Lock().Token() || got.Remaining <= 0 {
		t.Fatalf("Leader = %+v, %v; want term %d, value a:1, token %s", got, err, ld.Term(), ld.Lock().Token())
	}
	if _, err := el.TryCampaign(ctx, "b"); !errors.Is(err, engine.ErrNotAcquired) {
		t.Fatalf("TryCampaign while led: %v, want ErrNotAcquired", err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	if _, err := el.Campaign(wctx, "b"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Campaign until its context ends while led: %v, want DeadlineExceeded", err)
	}
	wcancel()
	if err := ld.Proclaim(ctx, "a:2"); err != nil || ld.Value() != "a:2" {
		t.Fatalf("Proclaim: %v (value %q)", err, ld.Value())
	}
	if got, err := el.Leader(ctx); err != nil || got.Value != "a:2" || got.Term != ld.Term() {
		t.Fatalf("Leader after Proclaim = %+v, %v", got, err)
	}
	if err := ld.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(ld.Err(), engine.ErrUnlocked) || ld.Proclaim(ctx, "late") == nil {
		t.Fatalf("after Resign: Err %v, and Proclaim must fail", ld.Err())
	}
	if _, err := el.Leader(ctx); !errors.Is(err, engine.ErrNoLeader) {
		t.Fatalf("Leader after Resign: %v, want ErrNoLeader", err)
	}
	ld2, err := el.TryCampaign(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	defer ld2.Resign(ctx)
	if ld2.Term() <= ld.Term() {
		t.Fatalf("second leader's term %d not above the first's %d", ld2.Term(), ld.Term())
	}
	if got, err := el.Leader(ctx); err != nil || got.Value != "b" || got.Term != ld2.Term() {
		t.Fatalf("Leader = %+v, %v; want the second leader", got, err)
	}
	// The record of a leader that is gone is not read as the next one's:
	// a campaign won but not yet published reads as term 0.
	v.mustExec(0, "HSET", "redlock:leader:{"+keyName(t)+"}:"+keyName(t), "token", "x", "term", "1", "seq", "9", "value", "stale")
	if got, err := el.Leader(ctx); err != nil || got.Value != "b" {
		t.Fatalf("Leader with one master's record overwritten = %+v, %v", got, err)
	}
}

// Observe sends every leader that held longer than its polling period,
// in term order, and each new proclamation; it ends with its context and
// with the engine.
func TestElectionObserve(t *testing.T) {
	for _, tc := range []struct {
		name    string
		channel string
	}{{"polling", ""}, {"release channel", "redlock:released"}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := functional
			cfg.ReleaseChannel = tc.channel
			v := newEnv(t, 5, cfg)
			const ttl = time.Second // polled every 100ms
			name := keyName(t)
			watcher := newElection(t, v.e, name, ttl)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			seen := watcher.Observe(ctx)
			// Read as it comes: a receiver that falls behind gets the
			// latest state only.
			got := make(chan string, 64)
			go func() {
				for l := range seen {
					got <- fmt.Sprintf("%d %s", l.Term, l.Value)
				}
				close(got)
			}()
			other := newEnvOn(t, v.set, cfg)
			var want []string
			for i := range 4 {
				e := v.e
				if i%2 == 1 {
					e = other.e
				}
				ld, err := newElection(t, e, name, ttl).Campaign(ctx, fmt.Sprintf("leader %d", i))
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, fmt.Sprintf("%d leader %d", ld.Term(), i))
				time.Sleep(300 * time.Millisecond)
				if err := ld.Proclaim(ctx, fmt.Sprintf("leader %d again", i)); err != nil {
					t.Fatal(err)
				}
				want = append(want, fmt.Sprintf("%d leader %d again", ld.Term(), i))
				time.Sleep(300 * time.Millisecond)
				if err := ld.Resign(ctx); err != nil && !errors.Is(err, engine.ErrLockLost) {
					t.Fatal(err)
				} else if err != nil {
					// A loaded host let the 1 s term lapse: the next
					// campaign follows all the same (Observe is the subject).
					t.Logf("leader %d: %v", i, err)
				}
			}
			// Observe promises the most recent state, never an older one
			// after a newer: what it sent is want in order, possibly with
			// states skipped (a poll delayed past a 300 ms state on a busy
			// machine), ending with the last state.
			var observed []string
			for len(observed) == 0 || observed[len(observed)-1] != want[len(want)-1] {
				select {
				case l := <-got:
					observed = append(observed, l)
				case <-time.After(5 * time.Second):
					t.Fatalf("observed %q, want the last state %q seen", observed, want[len(want)-1])
				}
			}
			i := 0
			for _, o := range observed {
				for i < len(want) && want[i] != o {
					i++
				}
				if i == len(want) {
					t.Fatalf("observed %q: not the states %q in order (an older one after a newer, one sent twice, or one never proclaimed)", observed, want)
				}
				i++
			}
			if len(observed) < len(want) {
				t.Logf("observed %d of %d states (the rest held briefly on a busy machine): %q", len(observed), len(want), observed)
			}
			cancel()
			waitClosed(t, got, 5*time.Second, "after its context ended")
		})
	}
}

// Observe's goroutine ends when the engine closes, and the channel is
// closed.
func TestElectionObserveEngineClosed(t *testing.T) {
	v := newEnv(t, 3, functional)
	el := newElection(t, v.e, keyName(t), time.Minute) // polled every second
	before := runtime.NumGoroutine()
	seen := el.Observe(context.Background())
	time.Sleep(50 * time.Millisecond)
	v.e.Close()
	waitClosed(t, seen, 500*time.Millisecond, "after Close (its poll is 1s)")
	// The engine's own goroutines are gone too: fewer than before.
	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() >= before && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n >= before {
		t.Fatalf("%d goroutines after Close, %d with the engine before Observe", n, before)
	}
}

// A leader whose masters go away loses the leadership: Done closes with
// an error matching ErrLockLost, and Proclaim fails.
func TestElectionLost(t *testing.T) {
	cfg := functional
	cfg.MasterTimeout = 100 * time.Millisecond
	v := newEnv(t, 5, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	el := newElection(t, v.e, keyName(t), time.Second)
	ld, err := el.Campaign(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	killMasters(v, []int{0, 2, 4})
	select {
	case <-ld.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the leadership did not end with 3 of 5 masters down")
	}
	if !errors.Is(ld.Err(), engine.ErrLockLost) {
		t.Fatalf("Err = %v, want ErrLockLost", ld.Err())
	}
	if err := ld.Proclaim(ctx, "y"); !errors.Is(err, engine.ErrLockLost) {
		t.Fatalf("Proclaim after the loss: %v, want ErrLockLost", err)
	}
	if _, err := el.Leader(ctx); !errors.Is(err, engine.ErrUnavailable) {
		t.Fatalf("Leader with 2 of 5 masters: %v, want ErrUnavailable", err)
	}
}

// Bad arguments are refused before anything is sent.
func TestNewElectionArgs(t *testing.T) {
	v := newEnv(t, 1, functional)
	for _, tc := range []struct {
		name string
		ttl  time.Duration
	}{{"", time.Second}, {"x", 0}, {"x", 2 * engine.DefaultMaxTTL}} {
		if _, err := v.e.NewElection(tc.name, tc.ttl); !errors.Is(err, engine.ErrBadArgument) {
			t.Errorf("NewElection(%q, %v) = %v, want ErrBadArgument", tc.name, tc.ttl, err)
		}
	}
}

// Lead runs fn while leader and resigns after it; fn's context ends when
// the leadership is lost, and Lead then returns the loss.
func TestElectionLead(t *testing.T) {
	cfg := functional
	cfg.MasterTimeout = 100 * time.Millisecond
	v := newEnv(t, 5, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	el := newElection(t, v.e, keyName(t), time.Second)
	var term int64
	err := el.Lead(ctx, "a", func(ctx context.Context, ld *engine.Leadership) error {
		term = ld.Term()
		if l, err := el.Leader(ctx); err != nil || l.Term != term {
			t.Errorf("Leader inside Lead: %+v, %v", l, err)
		}
		return nil
	})
	if err != nil || term == 0 {
		t.Fatalf("Lead = %v (term %d)", err, term)
	}
	if _, err := el.Leader(ctx); !errors.Is(err, engine.ErrNoLeader) {
		t.Fatalf("after Lead returned: %v, want ErrNoLeader (resigned)", err)
	}
	err = el.Lead(ctx, "b", func(fctx context.Context, ld *engine.Leadership) error {
		if ld.Term() <= term {
			t.Errorf("second term %d not above %d", ld.Term(), term)
		}
		killMasters(v, []int{0, 2, 4})
		select {
		case <-fctx.Done():
			return nil
		case <-time.After(5 * time.Second):
			return errors.New("fn's context not cancelled by the loss")
		}
	})
	if !errors.Is(err, engine.ErrLockLost) {
		t.Fatalf("Lead after the loss: %v, want ErrLockLost", err)
	}
}

// waitClosed fails t unless ch is closed, with nothing more sent, within
// the given time.
func waitClosed[T any](t *testing.T, ch <-chan T, within time.Duration, when string) {
	t.Helper()
	select {
	case v, ok := <-ch:
		if ok {
			t.Fatalf("Observe sent %v %s; want its channel closed", v, when)
		}
	case <-time.After(within):
		t.Fatalf("Observe's channel not closed within %v %s", within, when)
	}
}
