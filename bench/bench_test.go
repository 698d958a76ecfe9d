package bench

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
)

func requireReal() bool { return os.Getenv("REDLOCK_REQUIRE_REDIS") == "1" }

func TestConfigValidation(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string // substring of the error
	}{
		{"masters", Config{N: 65}, "masters must be 1..64"},
		{"target", Config{Target: "etcd"}, `unknown target "etcd"`},
		{"proxy without address", Config{Target: TargetProxy}, "needs a proxy address"},
		{"address without proxy", Config{ProxyAddr: "x:1"}, "needs target proxy"},
		{"proxy ceiling without masters", Config{Target: TargetProxy, ProxyAddr: "x:1", Ceiling: true}, "needs the proxy's masters"},
		{"workload", Config{Workload: "burst"}, `unknown workload "burst"`},
		{"duration", Config{Duration: -time.Second}, "negative duration"},
		{"warmup", Config{Warmup: -time.Second}, "negative warmup"},
		{"rounds", Config{Rounds: -1}, "negative rounds"},
		{"rounds too many", Config{Rounds: 100, Duration: time.Second}, "shorter than 100ms"},
		{"concurrency", Config{Concurrency: -1}, "concurrency must be"},
		{"rate", Config{Rate: -5}, "rate must be"},
		{"keys", Config{Keys: -1}, "keys must be positive"},
		{"ttl", Config{TTL: time.Microsecond}, "ttl must be at least 1ms"},
		{"hold", Config{Hold: -time.Millisecond}, "negative hold"},
		{"hold vs ttl", Config{Hold: time.Second, TTL: time.Second}, "shorter than the ttl"},
		{"peer", Config{Compare: []string{"bsm"}}, `unknown peer "bsm" (known: redsync, rueidis,`},
		{"engine peer of engine", Config{Compare: []string{"engine"}}, `unknown peer "engine"`},
		{"kind on the proxy", Config{Target: TargetProxy, ProxyAddr: "x:1", Workload: WorkloadRW}, "runs on target engine"},
		{"kind with redsync", Config{Workload: WorkloadSemaphore, Compare: []string{"redsync"}}, "compares with peer plain only"},
		{"kind with rueidis", Config{Workload: WorkloadRW, Compare: []string{"rueidis"}}, "compares with peer plain only"},
		{"plain without a kind", Config{Compare: []string{"plain"}}, `peer "plain" with workload cycle`},
		{"peer twice", Config{Compare: []string{"redsync", "redsync"}}, "listed twice"},
		{"sweep var", Config{SweepVar: "keys", SweepValues: []int{1}}, `unknown sweep variable "keys"`},
		{"sweep no values", Config{SweepVar: SweepConcurrency}, "at least one value"},
		{"sweep masters with masters", Config{SweepVar: SweepMasters, SweepValues: []int{3}, Masters: []string{"a:1"}}, "do not give masters"},
		{"sweep masters too many", Config{SweepVar: SweepMasters, SweepValues: []int{99}}, "1..64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Run(t.Context(), tt.cfg)
			if !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrBadConfig containing %q", err, tt.want)
			}
		})
	}
}

func TestParseSweep(t *testing.T) {
	v, vals, err := ParseSweep("concurrency=1, 16,64")
	if err != nil || v != SweepConcurrency || len(vals) != 3 || vals[1] != 16 {
		t.Fatalf("got %q %v %v", v, vals, err)
	}
	for _, bad := range []string{"", "concurrency", "concurrency=", "keys=1", "masters=3,x", "masters=0"} {
		if _, _, err := ParseSweep(bad); !errors.Is(err, ErrBadConfig) {
			t.Errorf("ParseSweep(%q) err = %v", bad, err)
		}
	}
}

// checkPhase asserts the invariants of a healthy phase.
func checkPhase(t *testing.T, p Phase) {
	t.Helper()
	if p.CyclesPerSec <= 0 || p.Cycle.Count == 0 || p.Acquired == 0 {
		t.Fatalf("%s: no work measured: %+v", p.Target, p)
	}
	// A loaded machine (-race, shared CI) can make a quorum of masters
	// miss the engine's per-master timeout now and then; more is a bug.
	if p.Errors*100 > p.Acquired {
		t.Errorf("%s: %d errors in %d acquisitions, first: %s", p.Target, p.Errors, p.Acquired, p.FirstError)
	} else if p.Errors > 0 {
		t.Logf("%s: %d errors (timeouts on a loaded machine?), first: %s", p.Target, p.Errors, p.FirstError)
	}
	for _, l := range []Latency{p.Acquire, p.Cycle} {
		if !(l.P50 > 0 && l.P50 <= l.P90 && l.P90 <= l.P99 && l.P99 <= l.P999 && l.P999 <= l.Max) {
			t.Errorf("%s: percentiles not ordered: %+v", p.Target, l)
		}
	}
	if p.AcquireP50 != p.Acquire.P50 || p.CycleP99 != p.Cycle.P99 {
		t.Errorf("%s: flat fields disagree with the histograms", p.Target)
	}
}

func TestRunWorkloads(t *testing.T) {
	set := mastertest.Start(t, 3)
	// A generous per-master timeout: these are functional checks on 2 noisy
	// cores under -race, not timeout tests.
	base := Config{FreshMasters: true, Masters: set.Addrs(), Duration: 600 * time.Millisecond, Concurrency: 8, TTL: 5 * time.Second, MasterTimeout: 500 * time.Millisecond}
	t.Run("cycle", func(t *testing.T) {
		r, err := Run(t.Context(), base)
		if err != nil {
			t.Fatal(err)
		}
		checkPhase(t, r.Phase)
		if r.Masters != 3 || r.Workload != WorkloadCycle || r.Keys != DefaultKeys || r.Release.Count == 0 {
			t.Fatalf("result = %+v", r)
		}
		// Cycles complete within the window: throughput matches the count.
		if got := float64(r.Cycle.Count) / r.DurationS; !within(got, r.CyclesPerSec, 0.001) {
			t.Errorf("cycles/s %.0f vs count/duration %.0f", r.CyclesPerSec, got)
		}
		// Every write carries at least one request and at most what 8
		// workers can have in flight on one connection.
		if r.RequestsPerWrite < 1 || r.RequestsPerWrite > 8 {
			t.Errorf("requests per write %.1f, want 1..8", r.RequestsPerWrite)
		}
		// The client uses some CPU, and less than 2 s per cycle; so do the
		// masters (INFO cpu); the client makes syscalls.
		if r.ClientCPUPerCycle <= 0 || r.ClientCPUPerCycle > 2e6 {
			t.Errorf("client CPU per cycle %.1fµs", r.ClientCPUPerCycle)
		}
		if requireReal() && (r.MasterCPUPerCycle <= 0 || r.MasterCPUPerCycle > 2e6) {
			t.Errorf("masters' CPU per cycle %.1fµs", r.MasterCPUPerCycle)
		}
		if r.ClientSyscallsPerCycle <= 0 || r.MasterSyscallsPerCycle != 0 {
			t.Errorf("syscalls per cycle: client %.2f, masters %.2f (not started by the bench: unknown)", r.ClientSyscallsPerCycle, r.MasterSyscallsPerCycle)
		}
	})
	t.Run("own masters", func(t *testing.T) {
		// Masters the bench starts: their syscalls are read too.
		r, err := Run(t.Context(), Config{N: 3, RequireReal: requireReal(), Duration: 600 * time.Millisecond, Concurrency: 8, TTL: 5 * time.Second, MasterTimeout: 500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if !r.Embedded && (r.MasterSyscallsPerCycle <= 0 || r.MasterCPUPerCycle <= 0) {
			t.Errorf("local masters: CPU %.1fµs, syscalls %.2f per cycle", r.MasterCPUPerCycle, r.MasterSyscallsPerCycle)
		}
	})
	t.Run("kinds", func(t *testing.T) {
		for _, w := range []string{WorkloadReentrant, WorkloadRW, WorkloadSemaphore} {
			c := base
			c.Workload, c.Compare = w, []string{PeerPlain}
			r, err := Run(t.Context(), c)
			if err != nil {
				t.Fatal(err)
			}
			checkPhase(t, r.Phase)
			if len(r.Peers) != 1 || r.Peers[0].Target != PeerPlain {
				t.Fatalf("%s: peers %+v; want plain", w, r.Peers)
			}
			for _, p := range r.phases() {
				// Uncontended keys: every acquisition granted and released.
				if p.Cycle.Count == 0 || p.Release.Count == 0 || p.FailedAcquires*10 > p.Acquired {
					t.Fatalf("%s, phase %s: cycles %d releases %d failed %d acquired %d", w, p.Target, p.Cycle.Count, p.Release.Count, p.FailedAcquires, p.Acquired)
				}
			}
		}
		// Nothing left on the masters: every kind's release reached them.
		time.Sleep(100 * time.Millisecond)
		for _, a := range set.Addrs() {
			c, err := conn.Dial(t.Context(), a, conn.Config{})
			if err != nil {
				t.Fatal(err)
			}
			r, err := c.Exec(t.Context(), "DBSIZE")
			keys, _ := c.Exec(t.Context(), "KEYS", "*")
			c.Close()
			if err != nil || r.Int != 0 {
				t.Fatalf("master %s: DBSIZE %d, %v; want 0 (keys %s)", a, r.Int, err, keys)
			}
		}
	})
	t.Run("acquire", func(t *testing.T) {
		c := base
		c.Workload, c.TTL = WorkloadAcquire, time.Second
		r, err := Run(t.Context(), c)
		if err != nil {
			t.Fatal(err)
		}
		checkPhase(t, r.Phase)
		// Unique keys: refusals only from masters timing out on a loaded machine.
		if r.Release.Count != 0 || r.FailedAcquires*10 > r.Acquired || uint64(r.Cycle.Count) != r.Acquired {
			t.Fatalf("acquire workload: release=%d failed=%d cycles=%d acquired=%d", r.Release.Count, r.FailedAcquires, r.Cycle.Count, r.Acquired)
		}
	})
	t.Run("contended", func(t *testing.T) {
		c := base
		c.Workload, c.Keys, c.Hold = WorkloadContended, 1, time.Millisecond
		r, err := Run(t.Context(), c)
		if err != nil {
			t.Fatal(err)
		}
		checkPhase(t, r.Phase)
		// The engine waits (Lock): no refusals, and each worker waits about
		// for the 7 others' holds of ≥1ms.
		if !r.Waited || r.FailedAcquires != 0 || r.WaitP50 < 3000 || r.WaitP99 < r.WaitP50 {
			t.Fatalf("contended workload did not wait on one key with 8 workers: %+v", r.Phase)
		}
		// The wait is reported in the table, the HTML report and the JSON.
		var tb strings.Builder
		if err := r.WriteTable(&tb); err != nil {
			t.Fatal(err)
		}
		js, _ := json.Marshal(r.Phase)
		html := renderHTML(r)
		if !strings.Contains(tb.String(), "hand-offs/s") || !strings.Contains(tb.String(), "wait p99") ||
			!strings.Contains(string(js), `"wait_p99_us"`) || !strings.Contains(html, `id="engine-wait-p99"`) {
			t.Fatalf("wait columns missing:\n%s\n%s", tb.String(), js)
		}
		// One key held ≥1ms at a time: at most ~1000 cycles/s.
		if r.CyclesPerSec > 1100 {
			t.Fatalf("cycles/s %.0f exceeds one 1ms-hold key's capacity", r.CyclesPerSec)
		}
		if r.Cycle.P50 < 1000 {
			t.Errorf("cycle p50 %.0fµs shorter than the 1ms hold", r.Cycle.P50)
		}
	})
	t.Run("contended default keys", func(t *testing.T) {
		c := base
		c.Workload, c.Duration = WorkloadContended, 100*time.Millisecond
		r, err := Run(t.Context(), c)
		if err != nil {
			t.Fatal(err)
		}
		if r.Keys != DefaultContendedKeys {
			t.Fatalf("keys = %d", r.Keys)
		}
	})
	t.Run("open loop", func(t *testing.T) {
		c := base
		c.Rate, c.Duration, c.Warmup, c.Concurrency = 1000, 500*time.Millisecond, 100*time.Millisecond, 256
		r, err := Run(t.Context(), c)
		if err != nil {
			t.Fatal(err)
		}
		checkPhase(t, r.Phase)
		if r.Missed != 0 {
			t.Errorf("missed %d arrivals at 1000/s", r.Missed)
		}
		if !within(r.CyclesPerSec, 1000, 0.15) {
			t.Errorf("open loop at 1000/s measured %.0f cycles/s", r.CyclesPerSec)
		}
		if r.DurationS < 0.49 || r.DurationS > 0.6 {
			t.Errorf("measured duration %.3fs, want 0.5s (warm-up excluded)", r.DurationS)
		}
	})
	t.Run("open loop overload", func(t *testing.T) {
		// One slot and a 5ms hold: at most 200/s complete, the rest is missed.
		c := base
		c.Rate, c.Concurrency, c.Hold = 2000, 1, 5*time.Millisecond
		r, err := Run(t.Context(), c)
		if err != nil {
			t.Fatal(err)
		}
		if r.Missed == 0 || r.CyclesPerSec > 250 {
			t.Fatalf("missed=%d cycles/s=%.0f", r.Missed, r.CyclesPerSec)
		}
	})
}

func TestRunCompareAndCeiling(t *testing.T) {
	set := mastertest.Start(t, 3)
	r, err := Run(t.Context(), Config{FreshMasters: true, Masters: set.Addrs(), Duration: 300 * time.Millisecond, Concurrency: 8,
		Compare: []string{PeerRedsync}, Ceiling: true})
	if err != nil {
		t.Fatal(err)
	}
	checkPhase(t, r.Phase)
	if len(r.Peers) != 1 || r.Peers[0].Target != PeerRedsync {
		t.Fatalf("peers = %+v", r.Peers)
	}
	checkPhase(t, r.Peers[0])
	if p := r.Peers[0]; p.RequestsPerWrite != 0 || p.ClientCPUPerCycle <= 0 {
		t.Errorf("redsync: requests per write %.1f (not measured for it), CPU per cycle %.1fµs", p.RequestsPerWrite, p.ClientCPUPerCycle)
	}
	c := r.Ceiling
	if c == nil || c.CyclesPerSec <= 0 || len(c.PerMaster) != 3 || c.Errors != 0 {
		t.Fatalf("ceiling = %+v", c)
	}
	if c.SlowestPerSec <= 0 || c.SlowestPerSec > c.CyclesPerSec || c.Window != ceilingWindow {
		t.Fatalf("ceiling slowest %.0f vs quorum-th %.0f, window %d", c.SlowestPerSec, c.CyclesPerSec, c.Window)
	}
	if want := r.CyclesPerSec / c.CyclesPerSec; r.CeilingFraction != want {
		t.Fatalf("ceiling fraction %v, want %v", r.CeilingFraction, want)
	}
	// The ceiling reports its per-process CPU too; redsync's masters
	// cost more per cycle than the engine's (one command per call).
	if c.ClientCPUPerPair <= 0 || (requireReal() && c.MasterCPUPerPair <= 0) {
		t.Errorf("ceiling CPU per pair: pumps %.1f µs, masters %.1f µs", c.ClientCPUPerPair, c.MasterCPUPerPair)
	}
	if requireReal() && (r.Peers[0].MasterCPUPerCycle <= 0 || r.Peers[0].ClientSyscallsPerCycle <= r.ClientSyscallsPerCycle) {
		t.Errorf("redsync: masters %.1f µs, syscalls %.2f per cycle (engine %.2f): not measured per peer",
			r.Peers[0].MasterCPUPerCycle, r.Peers[0].ClientSyscallsPerCycle, r.ClientSyscallsPerCycle)
	}
	var b strings.Builder
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"engine", "redsync", "ceiling", "engine÷row", "masters 3/3 up"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	if err := r.WriteWideTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"attempts/s", "cycle p99.9 µs", "cpu µs/cycle", "engine÷row"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("wide table lacks %q:\n%s", want, b.String())
		}
	}
}

// TestRunRounds interleaves the target and a peer in slices: each target
// gets one throughput per round, the totals cover every slice, and the
// table shows the per-round ratios.
func TestRunRounds(t *testing.T) {
	set := mastertest.Start(t, 3)
	// Slices of 500 ms: a 200 ms slice of a peer once saw no cycle at all
	// on a busy two-core machine (issue #43).
	r, err := Run(t.Context(), Config{FreshMasters: true, Masters: set.Addrs(), Duration: 1500 * time.Millisecond, Rounds: 3,
		Concurrency: 8, Compare: []string{PeerRedsync}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range r.phases() {
		checkPhase(t, p)
		if len(p.RoundCyclesPerSec) != 3 {
			t.Fatalf("%s: rounds %v, want 3", p.Target, p.RoundCyclesPerSec)
		}
		// Three slices of ~500ms: the duration and the count add up.
		if !within(p.DurationS, 1.5, 0.2) {
			t.Errorf("%s: duration %.3fs, want ~1.5s", p.Target, p.DurationS)
		}
		if got := float64(p.Cycle.Count) / p.DurationS; !within(got, p.CyclesPerSec, 0.001) {
			t.Errorf("%s: cycles/s %.0f vs count/duration %.0f", p.Target, p.CyclesPerSec, got)
		}
		sum := 0.0
		for _, c := range p.RoundCyclesPerSec {
			if c <= 0 {
				t.Fatalf("%s: a round without cycles: %v", p.Target, p.RoundCyclesPerSec)
			}
			sum += c
		}
		// Equal slices: the overall rate is (about) the mean of the rounds'.
		if !within(p.CyclesPerSec, sum/3, 0.1) {
			t.Errorf("%s: %.0f cycles/s vs rounds %v", p.Target, p.CyclesPerSec, p.RoundCyclesPerSec)
		}
	}
	var b strings.Builder
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "engine ÷ redsync per round:") || !strings.Contains(b.String(), "median") {
		t.Errorf("table lacks the per-round ratios:\n%s", b.String())
	}
}

// TestRunProxyTarget drives a plain redis-server as the "proxy": it speaks
// the same protocol (SET NX PX, EVALSHA of the release script).
func TestRunProxyTarget(t *testing.T) {
	set := mastertest.Start(t, 3)
	r, err := Run(t.Context(), Config{Target: TargetProxy, ProxyAddr: set.Addrs()[0], ConnsPerMaster: 2,
		FreshMasters: true, Masters: set.Addrs(), Compare: []string{TargetEngine}, Duration: 300 * time.Millisecond, Concurrency: 8})
	if err != nil {
		t.Fatal(err)
	}
	if r.Target != TargetProxy || len(r.Peers) != 1 || r.Peers[0].Target != TargetEngine {
		t.Fatalf("phases: %s %+v", r.Target, r.Peers)
	}
	checkPhase(t, r.Phase)
	checkPhase(t, r.Peers[0])
	if r.ProxyCPUPerCycle <= 0 || r.Peers[0].ProxyCPUPerCycle != 0 {
		t.Errorf("proxy CPU per cycle: %.1fµs on its phase, %.1fµs on the engine's (want none)", r.ProxyCPUPerCycle, r.Peers[0].ProxyCPUPerCycle)
	}

	t.Run("contended", func(t *testing.T) {
		r, err := Run(t.Context(), Config{Target: TargetProxy, ProxyAddr: set.Addrs()[1], Workload: WorkloadContended, Keys: 1,
			Duration: 200 * time.Millisecond, Concurrency: 4, Hold: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		checkPhase(t, r.Phase)
		if r.FailedAcquires == 0 {
			t.Fatal("no refusals on one key")
		}
	})
	// The overload curve: an open-loop run per offered rate, goodput and
	// p99 per point, in the table and the HTML report.
	t.Run("rate sweep", func(t *testing.T) {
		r, err := Run(t.Context(), Config{Target: TargetProxy, ProxyAddr: set.Addrs()[2], SweepVar: SweepRate, SweepValues: []int{200, 800},
			Duration: 300 * time.Millisecond, Concurrency: 16})
		if err != nil {
			t.Fatal(err)
		}
		if r.Sweep == nil || r.Sweep.Var != SweepRate || len(r.Sweep.Points) != 2 {
			t.Fatalf("sweep: %+v", r.Sweep)
		}
		lo, hi := r.Sweep.Points[0].Phases[0].CyclesPerSec, r.Sweep.Points[1].Phases[0].CyclesPerSec
		if lo < 100 || lo > 300 || hi < 2*lo {
			t.Errorf("goodput %.0f at 200/s and %.0f at 800/s; want about the offered rates", lo, hi)
		}
		var b strings.Builder
		if err := writeHTML(&b, r); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), "goodput (cycles/s) against offered load") {
			t.Error("the HTML report lacks the overload curve")
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		_, err := Run(t.Context(), Config{Target: TargetProxy, ProxyAddr: "127.0.0.1:1", Duration: 100 * time.Millisecond})
		if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestRunSweeps(t *testing.T) {
	t.Run("concurrency", func(t *testing.T) {
		r, err := Run(t.Context(), Config{N: 3, RequireReal: requireReal(), Duration: 300 * time.Millisecond, Warmup: 100 * time.Millisecond,
			SweepVar: SweepConcurrency, SweepValues: []int{1, 8}})
		if err != nil {
			t.Fatal(err)
		}
		sw := r.Sweep
		if sw == nil || len(sw.Points) != 2 || sw.Points[0].Value != 1 || sw.Points[1].Phases[0].Target != TargetEngine {
			t.Fatalf("sweep = %+v", sw)
		}
		for _, p := range sw.Points {
			checkPhase(t, p.Phases[0])
		}
		if r.Concurrency != 8 || r.CyclesPerSec != sw.Points[1].Phases[0].CyclesPerSec {
			t.Errorf("flat fields are not the last point's: %d %.0f", r.Concurrency, r.CyclesPerSec)
		}
		var b strings.Builder
		r.WriteTable(&b)
		if !strings.Contains(b.String(), "sweep over concurrency") || !strings.Contains(b.String(), "#") {
			t.Errorf("table:\n%s", b.String())
		}
	})
	t.Run("masters", func(t *testing.T) {
		// Each point is a new set of masters: a warm-up keeps the first
		// dial and script loads out of the measured window, which saw no
		// cycle at all on a busy machine without it.
		r, err := Run(t.Context(), Config{RequireReal: requireReal(), Duration: 300 * time.Millisecond, Warmup: 200 * time.Millisecond, Concurrency: 4,
			SweepVar: SweepMasters, SweepValues: []int{1, 3}})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Sweep.Points) != 2 || r.Masters != 3 {
			t.Fatalf("points=%d masters=%d", len(r.Sweep.Points), r.Masters)
		}
		for _, p := range r.Sweep.Points {
			checkPhase(t, p.Phases[0])
		}
	})
}

func TestRunInterrupted(t *testing.T) {
	set := mastertest.Start(t, 3)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	start := time.Now()
	// Cancel at the first progress line (one second into the phase).
	progress := writerFunc(func(p []byte) (int, error) { cancel(); return len(p), nil })
	r, err := Run(ctx, Config{FreshMasters: true, Masters: set.Addrs(), Duration: time.Minute, Concurrency: 8, Compare: []string{PeerRedsync}, Ceiling: true,
		Progress: progress})
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Fatalf("interrupted run took %v", el)
	}
	if !r.Interrupted || r.Cycle.Count == 0 || r.DurationS > 3 || len(r.Peers) != 0 || r.Ceiling != nil {
		t.Fatalf("interrupted result = interrupted:%v cycles:%d duration:%v peers:%d", r.Interrupted, r.Cycle.Count, r.DurationS, len(r.Peers))
	}
	if strings.Contains(r.FirstError, "context canceled") {
		t.Errorf("cancellation counted as an error: %s", r.FirstError)
	}
}

func TestRunProfiles(t *testing.T) {
	set := mastertest.Start(t, 3)
	dir := t.TempDir()
	r, err := Run(t.Context(), Config{FreshMasters: true, Masters: set.Addrs(), Duration: 300 * time.Millisecond, Concurrency: 8,
		CPUProfile: dir + "/cpu.pprof", MemProfile: dir + "/mem.pprof", MutexProfile: dir + "/mutex.pprof",
		BlockProfile: dir + "/block.pprof", PprofAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Profiles) != 4 {
		t.Fatalf("profiles = %v", r.Profiles)
	}
	for _, p := range r.Profiles {
		if st, err := os.Stat(p); err != nil || st.Size() == 0 {
			t.Errorf("profile %s: %v", p, err)
		}
	}
	if len(r.TopFlat) == 0 || len(r.TopFlat) > topN || len(r.TopCum) == 0 {
		t.Fatalf("top flat=%d cum=%d", len(r.TopFlat), len(r.TopCum))
	}
	for i := 1; i < len(r.TopCum); i++ {
		if r.TopCum[i].Cum > r.TopCum[i-1].Cum {
			t.Fatalf("cum not sorted: %+v", r.TopCum)
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestRunNoMergePeer: the nomerge peer is the engine with merging off,
// interleaved with the engine in one run.
func TestRunNoMergePeer(t *testing.T) {
	set := mastertest.Start(t, 3)
	r, err := Run(t.Context(), Config{FreshMasters: true, Masters: set.Addrs(), Compare: []string{PeerNoMerge}, Rounds: 2,
		Duration: 400 * time.Millisecond, Concurrency: 16, MasterTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if r.Target != TargetEngine || len(r.Peers) != 1 || r.Peers[0].Target != PeerNoMerge {
		t.Fatalf("phases: %s %+v", r.Target, r.Peers)
	}
	checkPhase(t, r.Phase)
	checkPhase(t, r.Peers[0])
	if len(r.Peers[0].RoundCyclesPerSec) != 2 {
		t.Errorf("nomerge rounds %v, want 2", r.Peers[0].RoundCyclesPerSec)
	}
}

// TestRunWaitsForQuarantine (issue #42): on masters younger than MaxTTL,
// not declared fresh, the bench waits until a quorum votes — saying until
// when — instead of running rounds of 0 cycles and printing a ratio from
// them.
func TestRunWaitsForQuarantine(t *testing.T) {
	set := mastertest.Start(t, 3)
	var notice strings.Builder
	start := time.Now()
	r, err := Run(t.Context(), Config{Masters: set.Addrs(), MaxTTL: 3 * time.Second, TTL: time.Second, Duration: 600 * time.Millisecond,
		Rounds: 2, Concurrency: 4, Compare: []string{PeerRedsync}, Notice: &notice})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(notice.String(), "restart quarantine: a quorum of masters votes from") {
		t.Errorf("no notice of the wait: %q", notice.String())
	}
	if d := time.Since(start); d < 2*time.Second {
		t.Errorf("ran in %v: it did not wait for the quarantine (3 s from the masters' start)", d)
	}
	for _, c := range r.Phase.RoundCyclesPerSec {
		if c <= 0 {
			t.Fatalf("a round of the engine without cycles: %v (ran into the quarantine)", r.Phase.RoundCyclesPerSec)
		}
	}
	// Ran into the quarantine: its refusals. A busy machine may time a
	// master out now and then (one release of hundreds once: the per-master
	// timeout of a 1 s TTL is short), as checkPhase allows.
	if strings.Contains(r.FirstError, "quarantin") || r.Errors*100 > r.Acquired {
		t.Errorf("%d errors in %d acquisitions; the first: %s", r.Errors, r.Acquired, r.FirstError)
	} else if r.Errors > 0 {
		t.Logf("%d errors (timeouts on a loaded machine?), first: %s", r.Errors, r.FirstError)
	}
}
