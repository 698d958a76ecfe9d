package engine_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/internal/test/check"
	"github.com/redlock-dev/redlock/internal/test/relay"
)

// TestCallerTokenRetryKeepsGrant: property (d) for WithToken (the proxy's
// SET NX PX and REDLOCK.LOCK pass the client's value). An attempt A with
// the caller's token is still under way (master 4 has not answered) when
// the caller gives up on it, releases its value everywhere (as redsync
// does after a failed try) and tries again with the same token through
// another engine (another proxy): B is granted on masters 0 and 1, where
// A had created the key, and on 2. Then A fails, and its cleanup must not
// delete B's keys. Before, A's cleanup released the token wherever A had
// created the key, and B's grant stood on one master of five.
func TestCallerTokenRetryKeepsGrant(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []engine.Option
	}{
		{"SET NX", nil},
		{"fenced", []engine.Option{engine.WithFencing()}},
	} {
		t.Run(c.name, func(t *testing.T) {
			// v's engine is B's (straight to the masters); A's reaches
			// master 4 through a relay the test holds.
			v := newEnv(t, 5, engine.Config{FreshMasters: true, MasterTimeout: time.Second})
			r, err := relay.Start(v.set.Addrs()[4])
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close() })
			addrs := slices.Clone(v.set.Addrs())
			addrs[4] = r.Addr()
			ea, err := engine.New(engine.Config{FreshMasters: true, Addrs: addrs, MasterTimeout: 8 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ea.Close() })
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := ea.WaitReady(ctx); err != nil {
				t.Fatal(err)
			}

			key, tok := keyName(t), "caller-token-0123456789"
			for _, i := range []int{2, 3, 4} { // another holder X
				v.mustExec(i, "SET", key, "holder-X", "PX", "30000")
			}
			calls := func(i int) int { // SET, EVAL, EVALSHA run by master i
				return check.CommandCalls(v.mustExec(i, "INFO", "commandstats").Text(), "set", "eval", "evalsha")
			}
			before2, before3 := calls(2), calls(3)
			r.Hold()
			t.Cleanup(r.Release)
			type result struct {
				l   *engine.Lock
				err error
			}
			done := make(chan result, 1)
			ea.TryLockAsync(context.Background(), key, 20*time.Second, func(l *engine.Lock, err error) { done <- result{l, err} },
				append([]engine.Option{engine.WithToken(tok)}, c.opts...)...)
			check.Eventually(t, 10*time.Second, "A created the key on masters 0 and 1, was refused on 2 and 3 and waits for 4", func() bool {
				vals := v.values(key)
				return vals[0] == tok && vals[1] == tok && calls(2) > before2 && calls(3) > before3 && r.Holding([]byte(key))
			})
			v.mustExec(2, "DEL", key) // X's hold on master 2 ended
			for i := range 5 {        // the caller's release of its value
				v.mustExec(i, "EVAL", scripts.Release.Source(), "1", key, tok)
			}
			b, err := v.e.TryLock(context.Background(), key, 20*time.Second, append([]engine.Option{engine.WithToken(tok)}, c.opts...)...)
			if err != nil {
				t.Fatalf("B, the retry with the same token: %v", err)
			}
			if got := countOf(v.values(key), tok); got != 3 {
				t.Fatalf("B granted on %d masters (%q); want 3", got, v.values(key))
			}
			r.Release()
			select {
			case a := <-done:
				if !errors.Is(a.err, engine.ErrNotAcquired) {
					t.Fatalf("A: %v; want ErrNotAcquired", a.err)
				}
			case <-time.After(15 * time.Second):
				t.Fatal("A was not decided after master 4 answered")
			}
			if got := countOf(v.values(key), tok); got < 3 || !b.Valid() {
				t.Fatalf("after A's cleanup B's token is on %d masters (%q), valid %v; want 3, valid: A's cleanup deleted what B created", got, v.values(key), b.Valid())
			}
		})
	}
}
