package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/enginex"
	"github.com/redlock-dev/redlock/internal/localmaster"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/resp"
)

// env is an Engine over real masters plus plain connections to each master
// for checking their state directly.
type env struct {
	tb     testing.TB
	set    *localmaster.Set
	e      *engine.Engine
	direct []*conn.Conn
}

// newEnv starts n masters and an Engine over them (cfg.Addrs is filled in)
// and waits until the Engine and the direct connections are connected to
// every master.
func newEnv(tb testing.TB, n int, cfg engine.Config) *env {
	tb.Helper()
	set := mastertest.Start(tb, n)
	return newEnvOn(tb, set, cfg)
}

func newEnvOn(tb testing.TB, set *localmaster.Set, cfg engine.Config) *env {
	tb.Helper()
	cfg.Addrs = set.Addrs()
	e, err := engine.New(cfg)
	if err != nil {
		tb.Fatalf("engine.New: %v", err)
	}
	tb.Cleanup(func() { e.Close() })
	v := &env{tb: tb, set: set, e: e}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, a := range cfg.Addrs {
		// The test's own connections: the default 1 s to connect and
		// handshake was missed on a loaded host (ctx bounds the wait).
		c, err := conn.Dial(ctx, a, conn.Config{DialTimeout: 10 * time.Second})
		if err != nil {
			tb.Fatalf("dial %s: %v", a, err)
		}
		tb.Cleanup(func() { c.Close() })
		v.direct = append(v.direct, c)
	}
	v.waitConnected()
	return v
}

// on returns v bound to the (sub)test t: its failures and cleanups (such
// as resuming paused masters) belong to t. Use it at the top of subtests.
func (v *env) on(t testing.TB) *env {
	c := *v
	c.tb = t
	return &c
}

// waitConnected waits until every engine connection to every master is up.
func (v *env) waitConnected() {
	v.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// WaitReady waits for each master's first connect only: after a
	// restart it reports the reconnects still under way. Ask again.
	for {
		_, err := v.e.WaitReady(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			v.tb.Fatalf("WaitReady: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i := range v.direct {
		for _, c := range enginex.Open(v.e).Conns(i) {
			if err := c.WaitConnected(ctx); err != nil {
				v.tb.Fatalf("engine connection to master %d: %v", i, err)
			}
		}
		if err := v.direct[i].WaitConnected(ctx); err != nil {
			v.tb.Fatalf("direct connection to master %d: %v", i, err)
		}
	}
}

// exec runs one command on master i directly.
func (v *env) exec(i int, args ...string) (resp.Reply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return v.direct[i].Exec(ctx, args...)
}

// mustExec runs one command on master i and fails the test on error. Only
// call it from the test's goroutine.
func (v *env) mustExec(i int, args ...string) resp.Reply {
	v.tb.Helper()
	r, err := v.exec(i, args...)
	if err != nil {
		v.tb.Fatalf("master %d: %q: %v", i, args, err)
	}
	return r
}

// nilValue stands for "key absent" in the results of values.
const nilValue = "<nil>"

// values returns GET key on every master (nilValue where absent).
func (v *env) values(key string) []string {
	v.tb.Helper()
	out := make([]string, len(v.direct))
	for i := range v.direct {
		r := v.mustExec(i, "GET", key)
		if r.IsNull() {
			out[i] = nilValue
		} else {
			out[i] = r.Text()
		}
	}
	return out
}

// pttls returns PTTL key on every master, in milliseconds.
func (v *env) pttls(key string) []int64 {
	v.tb.Helper()
	out := make([]int64, len(v.direct))
	for i := range v.direct {
		out[i] = v.mustExec(i, "PTTL", key).Int
	}
	return out
}

// waitGone polls until no master holds key, failing after within.
func (v *env) waitGone(key string, within time.Duration) {
	v.tb.Helper()
	deadline := time.Now().Add(within)
	for {
		vals := v.values(key)
		if countOf(vals, nilValue) == len(vals) {
			return
		}
		if time.Now().After(deadline) {
			v.tb.Fatalf("key %q still held %v after %v: %v", key, vals, within, vals)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitHeld polls until every master holds key with value token, failing
// after 5 s. A successful acquisition returns as soon as a quorum granted
// it: the other masters may answer a moment later (much later on a busy
// machine).
func (v *env) waitHeld(key, token string) {
	v.tb.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		vals := v.values(key)
		if countOf(vals, token) == len(vals) {
			return
		}
		if time.Now().After(deadline) {
			v.tb.Fatalf("key %q: masters hold %q, want %q on all", key, vals, token)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitPTTL polls until PTTL key is in (lo, hi] ms on every master, failing
// after 5 s (like waitHeld, for stragglers of a quorum decision).
func (v *env) waitPTTL(key string, lo, hi int64) {
	v.tb.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ps := v.pttls(key)
		ok := true
		for _, p := range ps {
			ok = ok && p > lo && p <= hi
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			v.tb.Fatalf("key %q: PTTLs %v ms, want all in (%d, %d]", key, ps, lo, hi)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitValues polls until GET key on the masters in idx returns want[i]
// for each, failing after within.
func (v *env) waitValues(key string, idx []int, want []string, within time.Duration) {
	v.tb.Helper()
	deadline := time.Now().Add(within)
	for {
		got := make([]string, len(idx))
		ok := true
		for j, i := range idx {
			r := v.mustExec(i, "GET", key)
			got[j] = nilValue
			if !r.IsNull() {
				got[j] = r.Text()
			}
			ok = ok && got[j] == want[j]
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			v.tb.Fatalf("key %q on masters %v: %q, want %q", key, idx, got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func countOf(vals []string, want string) int {
	n := 0
	for _, s := range vals {
		if s == want {
			n++
		}
	}
	return n
}

// mustLock takes key with TryLock and fails the test if it cannot.
func (v *env) mustLock(key string, ttl time.Duration, opts ...engine.Option) *engine.Lock {
	v.tb.Helper()
	l, err := v.e.TryLock(context.Background(), key, ttl, opts...)
	if err != nil {
		v.tb.Fatalf("TryLock(%q, %v): %v", key, ttl, err)
	}
	return l
}

// pause SIGSTOPs the given masters and resumes them when the test ends
// (Resume of a running master is harmless).
func (v *env) pause(idx ...int) {
	v.tb.Helper()
	mastertest.RequireReal(v.tb, v.set)
	ms := v.set.Masters()
	for _, i := range idx {
		if err := ms[i].Pause(); err != nil {
			v.tb.Fatalf("pause master %d: %v", i, err)
		}
		v.tb.Cleanup(func() { ms[i].Resume() })
	}
}

func (v *env) resume(idx ...int) {
	v.tb.Helper()
	ms := v.set.Masters()
	for _, i := range idx {
		if err := ms[i].Resume(); err != nil {
			v.tb.Fatalf("resume master %d: %v", i, err)
		}
	}
}

// quorumError returns err as a *QuorumError or fails the test.
func quorumError(tb testing.TB, err error) *engine.QuorumError {
	tb.Helper()
	var qe *engine.QuorumError
	if !errors.As(err, &qe) {
		tb.Fatalf("error %v (%T) is not a *engine.QuorumError", err, err)
	}
	return qe
}

// masterErrors returns the per-master causes of err, by master index.
func masterErrors(err error) map[int]*engine.MasterError {
	out := map[int]*engine.MasterError{}
	var qe *engine.QuorumError
	if !errors.As(err, &qe) {
		return out
	}
	for _, m := range qe.Masters {
		var me *engine.MasterError
		if errors.As(m, &me) {
			out[me.Master] = me
		}
	}
	return out
}

func sortedKeys[M ~map[int]V, V any](m M) []int {
	ks := make([]int, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func keyName(t testing.TB, parts ...any) string {
	return fmt.Sprint(append([]any{t.Name(), ":"}, parts...)...)
}

// functional is the config of tests that check behaviour, not timing: a
// generous per-master timeout so a CPU-starved CI machine cannot turn a
// slow reply into a refusal. Fault tests use the defaults on purpose.
var functional = engine.Config{FreshMasters: true, MasterTimeout: time.Second}
