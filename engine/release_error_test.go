package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
)

// waitDown waits until the engine sees masters idx down.
func (v *env) waitDown(idx ...int) {
	v.tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := v.e.Status()
		down := 0
		for _, i := range idx {
			if !st[i].Up {
				down++
			}
		}
		if down == len(idx) {
			return
		}
		if time.Now().After(deadline) {
			v.tb.Fatalf("masters %v not seen down: %+v", idx, st)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkNamed fails unless err's message names exactly the masters in
// failed ("master i (addr)"), each as a MasterError whose cause matches
// cause, and no other master.
func checkNamed(t *testing.T, v *env, err error, failed map[int]error) {
	t.Helper()
	msg := err.Error()
	got := masterErrors(err)
	for i, addr := range v.set.Addrs() {
		name := fmt.Sprintf("master %d (%s)", i, addr)
		cause, want := failed[i]
		switch {
		case want && !strings.Contains(msg, name):
			t.Errorf("the message does not name %s: %s", name, msg)
		case !want && strings.Contains(msg, name):
			t.Errorf("the message names %s, which answered: %s", name, msg)
		case want && got[i] == nil:
			t.Errorf("no MasterError for master %d in %v", i, err)
		case want && cause != nil && !errors.Is(got[i], cause):
			t.Errorf("master %d: cause %v, want %v", i, got[i].Err, cause)
		}
	}
	if len(got) != len(failed) {
		t.Errorf("%d per-master errors, want %d: %v", len(got), len(failed), err)
	}
}

// TestReleaseErrorCounts: an Unlock (or Extend) on five masters of which
// three fail reports the two that answered — Answered 2, "2/5 masters
// answered" — and names each of the three failed masters. Before, three
// masters refused at once (down) decided the release before the two that
// were up had answered: "0/5 masters answered".
func TestReleaseErrorCounts(t *testing.T) {
	mastertest.RequireReal(t, mastertest.Start(t, 1))
	unlock := func(l *engine.Lock) error { return l.Unlock(context.Background()) }
	extend := func(l *engine.Lock) error { return l.Extend(context.Background(), 10*time.Second) }
	three, all := []int{0, 2, 4}, []int{0, 1, 2, 3, 4}
	for _, tt := range []struct {
		name   string
		failed []int
		fail   func(v *env, idx []int)
		cause  error
		op     func(l *engine.Lock) error
	}{
		{"killed/unlock", three, killMasters, conn.ErrDown, unlock},
		{"killed/extend", three, killMasters, conn.ErrDown, extend},
		{"paused/unlock", three, func(v *env, idx []int) { v.pause(idx...) }, conn.ErrTimeout, unlock},
		// All five down: each is named, not only the three that decided.
		{"all killed/unlock", all, killMasters, conn.ErrDown, unlock},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := functional
			cfg.MasterTimeout = 300 * time.Millisecond
			v := newEnv(t, 5, cfg)
			l := v.mustLock(keyName(t), 10*time.Second)
			tt.fail(v, tt.failed)
			err := tt.op(l)
			if !errors.Is(err, engine.ErrUnavailable) || !errors.Is(err, engine.ErrLockLost) {
				t.Fatalf("err = %v; want ErrUnavailable and ErrLockLost", err)
			}
			qe := quorumError(t, err)
			n := 5 - len(tt.failed)
			if qe.Answered != n || qe.Granted != n || qe.Total != 5 {
				t.Errorf("Answered %d, Granted %d, Total %d; want %d, %d, 5: %v", qe.Answered, qe.Granted, qe.Total, n, n, err)
			}
			if want := fmt.Sprintf("%d/5 masters answered", n); !strings.Contains(err.Error(), want) {
				t.Errorf("the message does not say %q: %v", want, err)
			}
			want := map[int]error{}
			for _, i := range tt.failed {
				want[i] = tt.cause
			}
			checkNamed(t, v, err, want)
		})
	}
}

// killMasters kills masters idx and waits until the engine sees them down:
// its requests to them then fail at once.
func killMasters(v *env, idx []int) {
	v.tb.Helper()
	for _, i := range idx {
		if err := v.set.Masters()[i].Kill(); err != nil {
			v.tb.Fatal(err)
		}
	}
	v.waitDown(idx...)
}

// TestReleaseErrorPending: when the caller's ctx ends while Unlock waits
// for the last answers, the error still names the master that had not
// answered ("no answer yet"), beside the three that were down; it counts
// the one that answered.
func TestReleaseErrorPending(t *testing.T) {
	cfg := functional
	cfg.MasterTimeout = 5 * time.Second
	v := newEnv(t, 5, cfg)
	mastertest.RequireReal(t, v.set)
	l := v.mustLock(keyName(t), 10*time.Second)
	killMasters(v, []int{1, 2, 3})
	v.pause(4)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := l.Unlock(ctx)
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Unlock took %v: it did not stop waiting when ctx ended", d)
	}
	qe := quorumError(t, err)
	if qe.Answered != 1 || qe.Granted != 1 {
		t.Errorf("Answered %d, Granted %d; want 1, 1: %v", qe.Answered, qe.Granted, err)
	}
	if !strings.Contains(err.Error(), "1/5 masters answered") || !strings.Contains(err.Error(), "no answer yet") {
		t.Errorf("message: %v", err)
	}
	checkNamed(t, v, err, map[int]error{1: conn.ErrDown, 2: conn.ErrDown, 3: conn.ErrDown, 4: nil})
}

// TestLockLossErrorNamesAnswers: a watched lock that ends because three
// of five masters went down (killed: refused at once, or paused: timed
// out) reports what every master said — the two up granted its
// extension — not "0/5 masters answered" with the healthy masters listed
// as "no answer yet" (before, the three failures decided the extension
// before the two healthy answers arrived), and the three failures read as
// one cause.
func TestLockLossErrorNamesAnswers(t *testing.T) {
	mastertest.RequireReal(t, mastertest.Start(t, 1))
	for _, tt := range []struct {
		name  string
		fail  func(v *env, idx []int)
		cause error
	}{
		{"killed", killMasters, conn.ErrDown},
		// Timed out, or by then "not connected" (a stalled connection is
		// closed): either way a failure, not "no answer".
		{"paused", func(v *env, idx []int) { v.pause(idx...) }, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := functional
			cfg.MasterTimeout = 100 * time.Millisecond
			v := newEnv(t, 5, cfg)
			l := v.mustLock(keyName(t), 2*time.Second, engine.WithAutoExtend(time.Minute))
			tt.fail(v, []int{0, 2, 4})
			select {
			case <-l.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("the lock did not end with 3 of 5 masters down")
			}
			err := l.Err()
			if !errors.Is(err, engine.ErrLockLost) {
				t.Fatalf("Err = %v; want ErrLockLost", err)
			}
			// The error reads the last extension's answers as they come
			// in: the healthy masters' may still be on their way (within
			// a per-master timeout) when the lock ends.
			msg := err.Error()
			for deadline := time.Now().Add(2 * time.Second); strings.Contains(msg, "no answer yet") && time.Now().Before(deadline); msg = err.Error() {
				time.Sleep(10 * time.Millisecond)
			}
			if strings.Contains(msg, "no answer yet") || !strings.Contains(msg, "2/5 masters answered: 2 granted") {
				t.Errorf("the loss does not say what each master answered:\n%s", msg)
			}
			// (Paused masters' stall messages count requests in flight,
			// which differ: they need not read as one cause.)
			if tt.name == "killed" && !strings.Contains(msg, "master 0 ("+v.set.Addrs()[0]+"), master 2 (") {
				t.Errorf("the three failed masters are not one cause:\n%s", msg)
			}
			checkNamed(t, v, err, map[int]error{0: tt.cause, 2: tt.cause, 4: tt.cause})
		})
	}
}
