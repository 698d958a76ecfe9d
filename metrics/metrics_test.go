package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/localmaster"
	"github.com/redlock-dev/redlock/internal/test/check"
	"github.com/redlock-dev/redlock/internal/test/clockfront"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/metrics"
)

// TestMetricsMove: after a load with every kind of outcome, the main
// series moved, each by what the load did.
func TestMetricsMove(t *testing.T) {
	set := mastertest.Start(t, 3)
	mastertest.RequireReal(t, set)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e, url := servedEngine(t, ctx, engine.Config{FreshMasters: true, Addrs: set.Addrs(), MasterTimeout: 200 * time.Millisecond})
	before := check.Scrape(t, url)
	if before[`redlock_master_up{addr="`+set.Addrs()[1]+`",master="1"}`] != 1 || before["redlock_quorum"] != 2 || before["redlock_masters_voting"] != 3 {
		t.Fatalf("state gauges at start: up=%v quorum=%v voting=%v", before[`redlock_master_up{addr="`+set.Addrs()[1]+`",master="1"}`], before["redlock_quorum"], before["redlock_masters_voting"])
	}

	// 400 acquire+release cycles from 8 goroutines on distinct keys.
	const cycles = 400
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range cycles / 8 {
				l, err := e.TryLock(ctx, fmt.Sprintf("k:%d:%d", g, i), time.Second)
				if err != nil {
					t.Error(err)
					return
				}
				if err := l.Unlock(ctx); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	// Taken, then a waiter handed the key, an Extend, a watchdog lock lost.
	held, err := e.TryLock(ctx, "hot", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.TryLock(ctx, "hot", time.Second); !errors.Is(err, engine.ErrNotAcquired) {
		t.Fatalf("second TryLock: %v", err)
	}
	if err := held.Extend(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	go func() { time.Sleep(50 * time.Millisecond); held.Unlock(ctx) }()
	w, err := e.Lock(ctx, "hot", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	w.Unlock(ctx)
	lost, err := e.TryLock(ctx, "lost", 600*time.Millisecond, engine.WithAutoExtend(0))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range set.Addrs() {
		c, err := conn.Dial(ctx, a, conn.Config{})
		if err != nil {
			t.Fatal(err)
		}
		c.Exec(ctx, "DEL", "lost")
		c.Close()
	}
	select {
	case <-lost.Done():
	case <-time.After(3 * time.Second):
		t.Fatal("the deleted lock was not reported lost")
	}
	// Its holder's Unlock finds it gone: a lost release.
	if err := lost.Unlock(ctx); !errors.Is(err, engine.ErrLockLost) || errors.Is(err, engine.ErrUnavailable) {
		t.Fatalf("Unlock of the deleted lock: %v", err)
	}
	// A master down: its part fails, and the gauges say so.
	if err := set.Masters()[2].Kill(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for e.Status()[2].Up && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if l, err := e.TryLock(ctx, "one-down", time.Second); err != nil {
		t.Fatal(err)
	} else {
		l.Unlock(ctx)
	}

	after := check.Scrape(t, url)
	moved := func(name string) float64 { return after[name] - before[name] }
	for _, c := range []struct {
		name string
		min  float64
		max  float64
	}{
		{`redlock_acquisitions_total{result="acquired"}`, cycles + 4, cycles + 4},
		// TryLock refused; the waiting Lock may try (and be refused) a few
		// times before the hand-off, as the host's scheduling goes.
		{`redlock_acquisitions_total{result="taken"}`, 1, 10},
		{`redlock_wait_duration_seconds_count{acquired="true"}`, 1, 1},
		{`redlock_extensions_total{by="caller",result="extended"}`, 1, 1},
		{`redlock_extensions_total{by="watchdog",result="failed"}`, 1, 1},
		{`redlock_locks_lost_total`, 1, 1},
		{`redlock_releases_total{result="released"}`, cycles + 3, cycles + 3},
		{`redlock_releases_total{result="lost"}`, 1, 1},
		// The engine's own locks have no cleanup (the proxy reports it);
		// every master that was up answered.
		{`redlock_releases_total{result="cleanup"}`, 0, 0},
		{`redlock_releases_total{result="unavailable"}`, 0, 0},
		{`redlock_validity_left_ratio_count`, cycles + 4, cycles + 4},
		{`redlock_master_rtt_seconds_count{master="0"}`, 2*cycles + 9, 2*cycles + 60},
		{`redlock_master_errors_total{kind="down",master="2"}`, 1, 4},
		{`redlock_write_batch_commands_count{master="0"}`, 1, 2*cycles + 60},
		{`redlock_write_batch_commands_sum{master="0"}`, 2*cycles + 9, 2*cycles + 60},
	} {
		if _, ok := after[c.name]; !ok {
			t.Errorf("/metrics lacks %s", c.name)
		}
		if d := moved(c.name); d < c.min || d > c.max {
			t.Errorf("%s moved by %v, want %v..%v", c.name, d, c.min, c.max)
		}
	}
	// Every attempt, whatever its result, has one latency and one margin.
	attempts := 0.0
	for _, r := range []string{"acquired", "taken", "no_quorum", "timeout", "cancelled"} {
		attempts += moved(`redlock_acquisitions_total{result="` + r + `"}`)
	}
	for _, name := range []string{"redlock_acquire_duration_seconds_count", "redlock_quorum_margin_count"} {
		if d := moved(name); d != attempts {
			t.Errorf("%s moved by %v, want the %v attempts", name, d, attempts)
		}
	}
	// Every margin of the cycles was +1 (3 of 3 granted, quorum 2); the
	// one with master 2 down was 0.
	if got := moved(`redlock_quorum_margin_bucket{le="0"}`); got < 1 {
		t.Errorf("no acquisition with margin ≤ 0 counted (%v)", got)
	}
	if after[`redlock_master_up{addr="`+set.Addrs()[2]+`",master="2"}`] != 0 || after["redlock_masters_voting"] != 2 {
		t.Errorf("after the kill: master 2 up=%v, voting=%v", after[`redlock_master_up{addr="`+set.Addrs()[2]+`",master="2"}`], after["redlock_masters_voting"])
	}
	if after["go_goroutines"] == 0 || after["process_open_fds"] == 0 {
		t.Error("runtime and process collectors missing")
	}
}

// TestClusterMetrics: an engine with a Redis Cluster member exports its
// slot map reloads and redirect counters, and they move when a slot the
// engine uses moves (a MOVED is followed).
func TestClusterMetrics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lc := mastertest.StartCluster(t, localmaster.ClusterOptions{Shards: 3})
	set := mastertest.Start(t, 2)
	e, url := servedEngine(t, ctx, engine.Config{FreshMasters: true, Addrs: set.Addrs(), Clusters: []engine.ClusterMember{{Seeds: lc.Addrs()[:1]}}, MasterTimeout: time.Second})
	l, err := e.TryLock(ctx, "cm:k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	before := check.Scrape(t, url)
	if before["redlock_cluster_map_reloads_total"] < 1 {
		t.Errorf("map reloads %v, want ≥ 1", before["redlock_cluster_map_reloads_total"])
	}
	// Move the key's slot (and the key) to another master, as a reshard
	// does.
	if _, _, err := lc.MoveSlot(ctx, conn.Slot("cm:k"), 0); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock after the slot moved: %v", err)
	}
	// Unlock returned at a quorum (the standalone masters): the cluster
	// member's release, redirected, may still be on its way. On a loaded
	// machine the member's periodic map reload (every 5 s) can learn the
	// move before the release is sent, which then needs no redirect: the
	// reload counter moved instead.
	const moved, reloads = `redlock_cluster_redirects_total{kind="moved"}`, "redlock_cluster_map_reloads_total"
	deadline := time.Now().Add(5 * time.Second)
	for {
		after := check.Scrape(t, url)
		if after[moved] > before[moved] {
			break
		}
		if after[reloads] > before[reloads] && time.Now().After(deadline) {
			t.Logf("no MOVED: the slot map was reloaded (%v → %v) before the release went out", before[reloads], after[reloads])
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("moved redirects %v → %v and map reloads %v → %v, want either to move", before[moved], after[moved], before[reloads], after[reloads])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestProxySeries: RegisterProxy reads the proxy's counters at each scrape,
// each field into its own series (distinct values: none swapped).
func TestProxySeries(t *testing.T) {
	reg := metrics.NewRegistry()
	var mu sync.Mutex
	st := metrics.ProxyStats{ConnectedClients: 1, AcceptedConnections: 2, RejectedConnections: 3, Commands: 4,
		ProtocolErrors: 5, AuthFailures: 6, MemoryRefusals: 7, PanicsRecovered: 8}
	if err := metrics.RegisterProxy(reg, func() metrics.ProxyStats { mu.Lock(); defer mu.Unlock(); return st }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := metrics.Serve(ctx, "127.0.0.1:0", reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + addr.String() + "/metrics"
	expect := func(add float64) {
		t.Helper()
		got := check.Scrape(t, url)
		for i, name := range []string{"redlock_proxy_clients", "redlock_proxy_connections_accepted_total", "redlock_proxy_connections_rejected_total",
			"redlock_proxy_commands_total", "redlock_proxy_protocol_errors_total", "redlock_proxy_auth_failures_total",
			"redlock_proxy_memory_refusals_total", "redlock_proxy_panics_recovered_total"} {
			if want := float64(i+1) + add; got[name] != want {
				t.Errorf("%s = %v, want %v", name, got[name], want)
			}
		}
	}
	expect(0)
	mu.Lock()
	st.ConnectedClients += 10
	for _, p := range []*uint64{&st.AcceptedConnections, &st.RejectedConnections, &st.Commands, &st.ProtocolErrors, &st.AuthFailures, &st.MemoryRefusals, &st.PanicsRecovered} {
		*p += 10
	}
	mu.Unlock()
	expect(10) // read at scrape time
}

// TestProbes: /healthz answers 200 while the process serves; /readyz
// answers 503 while too few masters vote — here all three were started a
// moment ago and the engine does not declare them fresh, so they are in
// restart quarantine (MaxTTL 2 s) — with the reason, and 200 once they
// vote; 503 again when two of three are killed.
func TestProbes(t *testing.T) {
	set := mastertest.Start(t, 3)
	mastertest.RequireReal(t, set)
	e, err := engine.New(engine.Config{Addrs: set.Addrs(), MaxTTL: 2 * time.Second, MasterTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := metrics.ServeProbes(ctx, "127.0.0.1:0", metrics.NewRegistry(), e.Voting, e.VoteMargin)
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, string) {
		r, err := http.Get("http://" + addr.String() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return r.StatusCode, string(b)
	}
	if _, err := e.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz: %d", code)
	}
	code, body := get("/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "restart quarantine until") || !strings.Contains(body, "0/3 masters vote") {
		t.Fatalf("/readyz with every master in quarantine: %d %q", code, body)
	}
	// Ready, with the margin (issue #42), once all three vote: one may
	// fail. The masters leave their quarantines one by one (each from its
	// own first contact), so "2/3 vote" may come first (it once did, under
	// the race detector): wait for the three.
	deadline := time.Now().Add(10 * time.Second)
	for code, body = get("/readyz"); body != "ready: 3/3 vote, quorum 2: 1 more failure is tolerated\n"; code, body = get("/readyz") {
		if time.Now().After(deadline) {
			t.Fatalf("/readyz after the quarantine, every master voting: %d %q; want ready with the voting count and margin", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := set.Masters()[2].Kill(); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for code, body = get("/readyz"); body != "ready: 2/3 vote, quorum 2: one more failure stops locking\n"; code, body = get("/readyz") {
		if time.Now().After(deadline) {
			t.Fatalf("/readyz with 2 of 3 masters voting: %d %q; want ready, no failure to spare", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, m := range set.Masters()[:1] {
		if err := m.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	deadline = time.Now().Add(10 * time.Second)
	for code, body = get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "down"); code, body = get("/readyz") {
		if time.Now().After(deadline) {
			t.Fatalf("/readyz with 2 of 3 masters killed: %d %q", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz with the masters down: %d", code)
	}
}

// TestClockJumpSeries: a master whose clock jumps forward (clockfront)
// shows in redlock_master_clock_jumps_total{direction="forward"} and as
// quarantined; a backward jump in direction="backward".
func TestClockJumpSeries(t *testing.T) {
	set := mastertest.Start(t, 3)
	mastertest.RequireReal(t, set)
	ctx := t.Context()
	f := clockfront.Start(t, set.Addrs()[0])
	addrs := set.Addrs()
	addrs[0] = f.Addr()
	e, url := servedEngine(t, ctx, engine.Config{FreshMasters: true, Addrs: addrs, MasterTimeout: time.Second})
	const fwd, back, quar = `redlock_master_clock_jumps_total{direction="forward"}`, `redlock_master_clock_jumps_total{direction="backward"}`, `redlock_master_quarantined{master="0"}`
	if s := check.Scrape(t, url); s[fwd] != 0 || s[back] != 0 || s[quar] != 0 {
		t.Fatalf("before any jump: %v %v %v", s[fwd], s[back], s[quar])
	}
	if err := f.Jump(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := e.TryLock(ctx, "cj:k", time.Second); err != nil { // masters 1 and 2 still make a quorum
		t.Fatal(err)
	}
	// TryLock returns at a quorum: master 0's reply may come after it.
	waitScrape := func(ok func(s map[string]float64) bool) map[string]float64 {
		t.Helper()
		s := check.Scrape(t, url)
		for deadline := time.Now().Add(2 * time.Second); !ok(s) && time.Now().Before(deadline); s = check.Scrape(t, url) {
			time.Sleep(10 * time.Millisecond)
		}
		return s
	}
	if s := waitScrape(func(s map[string]float64) bool { return s[fwd] == 1 && s[quar] == 1 }); s[fwd] != 1 || s[quar] != 1 {
		t.Errorf("after a 5 s forward jump: forward %v, master 0 quarantined %v; want 1, 1", s[fwd], s[quar])
	}
	time.Sleep(10 * time.Millisecond)
	if err := f.Jump(ctx, -3*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := e.TryLock(ctx, "cj:k2", time.Second); err != nil {
		t.Fatal(err)
	}
	if s := waitScrape(func(s map[string]float64) bool { return s[back] >= 1 }); s[back] < 1 {
		t.Errorf("after a 3 s backward jump: backward %v; want ≥ 1", s[back])
	}
}

// TestHandOffSeries: a Lock call waiting shows in redlock_lock_waiters,
// and the holder's Unlock that hands it the key in one script in
// redlock_handoffs_total.
func TestHandOffSeries(t *testing.T) {
	set := mastertest.Start(t, 3)
	ctx := t.Context()
	e, url := servedEngine(t, ctx, engine.Config{FreshMasters: true, Addrs: set.Addrs(), MasterTimeout: time.Second})
	const waiters, handOffs = "redlock_lock_waiters", "redlock_handoffs_total"
	holder, err := e.TryLock(ctx, "ho:k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := e.Lock(ctx, "ho:k", 10*time.Second)
		if err == nil {
			l.Unlock(ctx)
		}
		got <- err
	}()
	s := check.Scrape(t, url)
	for deadline := time.Now().Add(5 * time.Second); s[waiters] != 1 && time.Now().Before(deadline); s = check.Scrape(t, url) {
		time.Sleep(5 * time.Millisecond)
	}
	if s[waiters] != 1 || s[handOffs] != 0 {
		t.Fatalf("a Lock call waiting: %s %v, %s %v; want 1, 0", waiters, s[waiters], handOffs, s[handOffs])
	}
	for deadline := time.Now().Add(5 * time.Second); e.Stats().Failed == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond) // the waiter's first try, refused
	}
	time.Sleep(20 * time.Millisecond) // past its end: it waits
	holder.Unlock(ctx)
	if err := <-got; err != nil {
		t.Fatalf("Lock: %v", err)
	}
	// (On a host so busy that the waiter was still in its first try when
	// the holder unlocked, it tried again itself: no hand-off.)
	if s, n := check.Scrape(t, url), e.Stats().HandOffs; s[waiters] != 0 || s[handOffs] != float64(n) || n > 1 {
		t.Errorf("after the hand-off: %s %v, %s %v; want 0 and Stats.HandOffs %d (0 or 1)", waiters, s[waiters], handOffs, s[handOffs], n)
	} else if n == 0 {
		t.Log("no hand-off: the waiter was still in its first try")
	}
}

// servedEngine starts an engine of cfg whose Observer and Watch feed a new
// registry, waits until every master connected, and serves the registry's
// /metrics (until ctx ends); it returns the engine (closed at the test's
// end) and the URL.
func servedEngine(t *testing.T, ctx context.Context, cfg engine.Config) (*engine.Engine, string) {
	t.Helper()
	reg := metrics.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Observer = m
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if err := m.Watch(e); err != nil {
		t.Fatal(err)
	}
	if _, err := e.WaitReady(ctx); err != nil { // every master's first connect
		t.Fatal(err)
	}
	addr, err := metrics.Serve(ctx, "127.0.0.1:0", reg, e.Voting)
	if err != nil {
		t.Fatal(err)
	}
	return e, "http://" + addr.String() + "/metrics"
}
