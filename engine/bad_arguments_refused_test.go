package engine_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
)

// TestNilFunctionRefused: Do and Lead with a nil function are refused
// with ErrBadArgument before anything is sent; they took the lock (won
// the campaign) and then panicked on the nil call (found by the review of
// issue #46). The key stays free.
func TestNilFunctionRefused(t *testing.T) {
	v := newEnv(t, 3, functional)
	ctx := context.Background()
	key := keyName(t)
	if err := v.e.Do(ctx, key, time.Second, nil); !errors.Is(err, engine.ErrBadArgument) {
		t.Fatalf("Do(nil) = %v, want ErrBadArgument", err)
	}
	el, err := v.e.NewElection(key+":el", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := el.Lead(ctx, "x", nil); !errors.Is(err, engine.ErrBadArgument) {
		t.Fatalf("Lead(nil) = %v, want ErrBadArgument", err)
	}
	l, err := v.e.TryLock(ctx, key, time.Second)
	if err != nil {
		t.Fatalf("the key after a refused Do: %v, want free", err)
	}
	l.Unlock(ctx)
}

// TestDriftFactorNaNRefused: New refuses a DriftFactor of NaN, which
// passed the range check (every comparison with NaN is false) and made
// every acquisition a quorum granted fail as granted too late (found by
// the review of issue #46).
func TestDriftFactorNaNRefused(t *testing.T) {
	e, err := engine.New(engine.Config{Addrs: []string{"127.0.0.1:1"}, DriftFactor: math.NaN()})
	if err == nil {
		e.Close()
	}
	if !errors.Is(err, engine.ErrBadArgument) {
		t.Fatalf("New(DriftFactor NaN) = %v, want ErrBadArgument", err)
	}
}
