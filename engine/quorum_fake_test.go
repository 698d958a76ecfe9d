package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/resp"
)

// fakeMaster answers every request at once, inside Do, or — when it
// times out — at the request's deadline from a timer goroutine (as a
// connection's expiry would), according to its mode: grant, deny (SET NX:
// nil; release/extend: 0) or time out. It records what it was sent.
type fakeMaster struct {
	mu   sync.Mutex
	mode byte     // guarded by mu: 'g', 'd' or 't'
	sent []string // guarded by mu: "acquire", "release", "extend"
}

func (f *fakeMaster) Do(req conn.Request) error {
	var kind string
	switch {
	case bytes.Contains(req.Cmd, []byte("\r\nSET\r\n")):
		kind = "acquire"
	case bytes.Contains(req.Cmd, []byte(scripts.Release.SHA())):
		kind = "release"
	case bytes.Contains(req.Cmd, []byte(scripts.Extend.SHA())):
		kind = "extend"
	default:
		return fmt.Errorf("fake master: unexpected command %q", req.Cmd)
	}
	f.mu.Lock()
	f.sent = append(f.sent, kind)
	mode := f.mode
	f.mu.Unlock()
	var r resp.Reply
	var err error
	switch {
	case mode == 't':
		err = conn.ErrTimeout
	case mode == 'g' && kind == "acquire":
		r = resp.Reply{Type: resp.TypeSimpleString, Str: []byte("OK")}
	case mode == 'g':
		r = resp.Reply{Type: resp.TypeInteger, Int: 1}
	case kind == "acquire":
		r = resp.Reply{Type: resp.TypeNull}
	default:
		r = resp.Reply{Type: resp.TypeInteger, Int: 0}
	}
	if err != nil { // as a connection does: at the request's deadline
		time.AfterFunc(time.Until(req.Deadline), func() { req.Callback.Complete(req.Tag, r, err) })
		return nil
	}
	// Answers come back inside Do, so every answer precedes every timeout
	// and the decision does not depend on goroutine scheduling.
	req.Callback.Complete(req.Tag, r, err)
	return nil
}

func (f *fakeMaster) reset(mode byte) {
	f.mu.Lock()
	f.mode, f.sent = mode, nil
	f.mu.Unlock()
}

func (f *fakeMaster) got() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.sent...)
}

// fakeEngine is an Engine whose fan-outs go to n fake masters (its real
// connections point at closed ports and are never used).
func fakeEngine(t *testing.T, n int) (*Engine, []*fakeMaster) {
	t.Helper()
	var addrs []string
	for i := range n {
		addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", i+1))
	}
	e, err := New(Config{FreshMasters: true, Addrs: addrs, DisableQuarantine: true, MasterTimeout: 3 * time.Millisecond, CleanupTimeout: 3 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	fakes := make([]*fakeMaster, n)
	for i := range fakes {
		fakes[i] = &fakeMaster{}
		e.fan[i] = []master{fakes[i]}
	}
	return e, fakes
}

// combos returns every assignment of grant/deny/timeout to n masters
// (3^n), like redsync's bitmask quorum test over grant/deny.
func combos(n int) []string {
	out := []string{""}
	for range n {
		var next []string
		for _, c := range out {
			for _, m := range "gdt" {
				next = append(next, c+string(m))
			}
		}
		out = next
	}
	return out
}

func count(c string, m rune) (k int) {
	for _, x := range c {
		if x == m {
			k++
		}
	}
	return k
}

// TestQuorumEveryCombination drives acquire, extend and release through
// a fake transport of 5 masters, for each of the 243 grant/deny/timeout
// combinations, and checks the decision against the rule: success with 3
// grants; otherwise ErrUnavailable when fewer than 3 masters answered at
// all (grant or deny), else the operation's "no" (ErrNotAcquired,
// ErrLockLost). After a failed acquisition the token is released on every
// master that granted or timed out, and on no master that refused.
func TestQuorumEveryCombination(t *testing.T) {
	const n, q = 5, 3
	e, fakes := fakeEngine(t, n)
	ctx := context.Background()
	ttl := 10 * time.Second
	for _, c := range combos(n) {
		g, d := count(c, 'g'), count(c, 'd')
		unavailable := g+d < q
		t.Run("acquire/"+c, func(t *testing.T) {
			for i, f := range fakes {
				f.reset(c[i])
			}
			l, err := e.TryLock(ctx, "k", ttl)
			if g >= q {
				if err != nil || !l.Valid() {
					t.Fatalf("%d grants: TryLock = %v", g, err)
				}
				for i, f := range fakes {
					if s := f.got(); len(s) != 1 {
						t.Errorf("master %d was sent %v after a grant; want the acquire only", i, s)
					}
				}
				return
			}
			if err == nil {
				t.Fatalf("%d grants: TryLock succeeded", g)
			}
			if errors.Is(err, ErrUnavailable) != unavailable || errors.Is(err, ErrNotAcquired) == unavailable {
				t.Fatalf("%d grants, %d refusals: %v (unavailable want %v)", g, d, err, unavailable)
			}
			var qe *QuorumError
			if !errors.As(err, &qe) || qe.Granted != g {
				t.Fatalf("QuorumError %+v, want Granted %d", qe, g)
			}
			for i, f := range fakes {
				s := f.got()
				released := len(s) == 2 && s[1] == "release"
				if want := c[i] != 'd'; released != want || s[0] != "acquire" {
					t.Errorf("master %d (%c) was sent %v; release wanted: %v", i, c[i], s, want)
				}
			}
		})
		for _, op := range []string{"extend", "release"} {
			t.Run(op+"/"+c, func(t *testing.T) {
				for _, f := range fakes {
					f.reset('g')
				}
				l, err := e.TryLock(ctx, "k", ttl)
				if err != nil {
					t.Fatal(err)
				}
				for i, f := range fakes {
					f.reset(c[i])
				}
				if op == "extend" {
					err = l.Extend(ctx, ttl)
				} else {
					err = l.Unlock(ctx)
				}
				if g >= q {
					if err != nil {
						t.Fatalf("%d grants: %s = %v", g, op, err)
					}
					if op == "extend" && l.Err() != nil {
						t.Fatalf("Err() = %v after a successful extend", l.Err())
					}
					return
				}
				if !errors.Is(err, ErrLockLost) || errors.Is(err, ErrUnavailable) != unavailable {
					t.Fatalf("%d grants, %d refusals: %s = %v (unavailable want %v)", g, d, op, err, unavailable)
				}
				if op == "extend" {
					select {
					case <-l.Done():
					default:
						t.Fatal("Done not closed after a failed extension")
					}
					if !errors.Is(l.Err(), ErrLockLost) {
						t.Fatalf("Err() = %v after a failed extension", l.Err())
					}
				}
			})
		}
	}
}
