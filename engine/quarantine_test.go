package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/localmaster"
	"github.com/redlock-dev/redlock/internal/localmaster/mastertest"
)

// restartEmpty kills the masters at idx (no persistence: they lose every
// key) and starts them again on the same ports.
func restartEmpty(t *testing.T, set *localmaster.Set, idx ...int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, i := range idx {
		m := set.Masters()[i]
		if err := m.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := m.Restart(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// QuarantineScenario is the interleaving the delayed-restart rule exists
// for: a holder on {A,B,C} while D,E are down; A and B crash and come back
// empty; D and E come back empty. Only C still holds the key, and a
// second client asks for it. It returns the engine that served the holder
// (and now serves the second client).
func quarantineScenario(t *testing.T, off bool) (*engine.Engine, *localmaster.Set, *engine.Lock) {
	t.Helper()
	set := mastertest.Start(t, 5)
	mastertest.RequireReal(t, set)
	e, err := engine.New(engine.Config{Addrs: set.Addrs(), DisableQuarantine: off, MasterTimeout: 500 * time.Millisecond,
		Conn: conn.Config{ReconnectMin: time.Millisecond, ReconnectMax: 20 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := e.Probe(ctx); err != nil {
		t.Fatal(err)
	}
	ms := set.Masters()
	for _, i := range []int{3, 4} { // D, E down
		if err := ms[i].Kill(); err != nil {
			t.Fatal(err)
		}
	}
	holder, err := e.TryLock(ctx, "q:key", 5*time.Second)
	if err != nil {
		t.Fatalf("holder on A,B,C: %v", err)
	}
	restartEmpty(t, set, 0, 1) // A, B crash and come back empty
	for _, i := range []int{3, 4} {
		if err := ms[i].Restart(ctx); err != nil { // D, E come back empty
			t.Fatal(err)
		}
	}
	for {
		up := 0
		for _, m := range e.Status() {
			if m.Up {
				up++
			}
		}
		if up == 5 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("masters did not reconnect")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return e, set, holder
}

// TestQuarantine: with quarantine on, the second client is refused while
// the holder's lock is valid; off, it gets the lock too — two holders.
func TestQuarantine(t *testing.T) {
	ctx := context.Background()
	t.Run("on", func(t *testing.T) {
		e, _, holder := quarantineScenario(t, false)
		if !holder.Valid() {
			t.Fatal("the holder's lock ran out during the restarts; the test proves nothing")
		}
		_, err := e.TryLock(ctx, "q:key", 5*time.Second)
		if err == nil {
			t.Fatalf("a second holder got q:key while the first is valid until %v", holder.Until())
		}
		if !errors.Is(err, engine.ErrUnavailable) {
			t.Fatalf("second client: %v; want ErrUnavailable (4 masters quarantined, C says held)", err)
		}
		st := e.Stats()
		for i, until := range st.QuarantinedUntil {
			if q := !until.IsZero(); q != (i != 2) {
				t.Fatalf("master %d quarantined until %v; want masters 0, 1, 3, 4", i, until)
			}
		}
		var me *engine.MasterError
		if !errors.As(err, &me) {
			t.Fatalf("no per-master cause in %v", err)
		}
		if !errors.Is(err, engine.ErrQuarantined) {
			t.Fatalf("the error does not name the quarantine: %v", err)
		}
	})
	t.Run("off", func(t *testing.T) {
		e, _, holder := quarantineScenario(t, true)
		l, err := e.TryLock(ctx, "q:key", 5*time.Second)
		if err != nil {
			t.Fatalf("with quarantine off the second client was refused (%v): the unsafe case did not happen", err)
		}
		if !holder.Valid() || !l.Valid() {
			t.Fatal("the two locks do not overlap")
		}
		t.Logf("quarantine off: two valid holders of q:key (until %v and %v)", holder.Until(), l.Until())
	})
}
