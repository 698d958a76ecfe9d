package bench

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/redlock-dev/redlock/internal/test/check"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
)

// TestRueidisLocker drives the rueidis peer's locker directly on three
// real masters: a quorum acquires, a held key is refused, a failed acquire
// gives back what it took, release needs a quorum, wait waits, and Close
// leaves no goroutine behind.
func TestRueidisLocker(t *testing.T) {
	set := mastertest.Start(t, 3)
	if set.Embedded() {
		t.Skip("needs redis-server masters (rueidis speaks to them directly)")
	}
	raw := make([]*goredis.Client, 3)
	for i, a := range set.Addrs() {
		raw[i] = goredis.NewClient(&goredis.Options{Addr: a, DisableIndentity: true})
		defer raw[i].Close()
	}
	ctx := t.Context()
	time.Sleep(50 * time.Millisecond) // let goroutines of earlier tests wind down
	before := runtime.NumGoroutine()

	l, err := newRueidisLocker(set.Addrs(), Config{TTL: 10 * time.Second, MasterTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	h, contended, err := l.acquire(ctx, "rueidis:a")
	if err != nil || contended {
		t.Fatalf("acquire: contended %v, %v", contended, err)
	}
	tok := h.(*rueidisHandle).token
	for i, c := range raw {
		if v, err := c.Get(ctx, "rueidis:a").Result(); err != nil || v != tok {
			t.Errorf("master %d holds %q (%v), want the token %q", i, v, err, tok)
		}
	}
	if _, contended, err := l.acquire(ctx, "rueidis:a"); err != nil || !contended {
		t.Fatalf("acquire of a held key: contended %v, %v; want a refusal", contended, err)
	}

	// Two of three masters hold the key for someone else: master 0 grants,
	// the quorum refuses, and master 0's grant is released.
	for _, c := range raw[1:] {
		if err := c.Set(ctx, "rueidis:b", "other", 10*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if _, contended, err := l.acquire(ctx, "rueidis:b"); err != nil || !contended {
		t.Fatalf("acquire without a quorum: contended %v, %v", contended, err)
	}
	if n, err := raw[0].Exists(ctx, "rueidis:b").Result(); err != nil || n != 0 {
		t.Errorf("master 0 still holds the key of a failed acquire (exists %d, %v)", n, err)
	}
	if v, _ := raw[1].Get(ctx, "rueidis:b").Result(); v != "other" {
		t.Errorf("the cleanup touched another holder's key: %q", v)
	}

	// wait: held, it waits until ctx ends; released meanwhile, it gets the key.
	wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	if _, err := l.wait(wctx, "rueidis:a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait on a held key: %v, want the deadline", err)
	}
	cancel()
	done := make(chan error, 1)
	go func() {
		time.Sleep(50 * time.Millisecond)
		done <- l.release(ctx, h)
	}()
	h2, err := l.wait(ctx, "rueidis:a")
	if err != nil {
		t.Fatalf("wait across a release: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("release: %v", err)
	}
	if err := l.release(ctx, h); err == nil || !strings.Contains(err.Error(), "0/3 masters") {
		t.Fatalf("release of a lock held by another token: %v, want not confirmed", err)
	}
	if err := l.release(ctx, h2); err != nil {
		t.Fatal(err)
	}
	// A quorum lost (two masters' keys deleted under the holder): release
	// is not confirmed.
	h3, _, err := l.acquire(ctx, "rueidis:c")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range raw[:2] {
		c.Del(ctx, "rueidis:c")
	}
	if err := l.release(ctx, h3); err == nil || !strings.Contains(err.Error(), "1/3 masters") {
		t.Fatalf("release with the key on one master: %v, want not confirmed", err)
	}
	l.close()
	check.NoLeak(t, before, 0)

	if _, err := newRueidisLocker(append(set.Addrs()[:2:2], "127.0.0.1:1"), Config{TTL: time.Second}); err == nil ||
		!strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("an unreachable master: %v, want an error naming it", err)
	}
	check.NoLeak(t, before, 0)
}

// TestRunRueidisPeer: --compare rueidis measures the peer in the same run,
// alternating with the engine, with its CPU and syscalls per cycle in the
// result, the JSON, the tables and the HTML report.
func TestRunRueidisPeer(t *testing.T) {
	set := mastertest.Start(t, 3)
	dir := t.TempDir()
	// A generous per-master timeout: 2 noisy cores under -race.
	r, err := Run(t.Context(), Config{FreshMasters: true, Masters: set.Addrs(), Compare: []string{PeerRueidis}, Rounds: 2,
		Duration: 600 * time.Millisecond, Concurrency: 8, MasterTimeout: 500 * time.Millisecond, ReportDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Peers) != 1 || r.Peers[0].Target != PeerRueidis {
		t.Fatalf("peers = %+v", r.Peers)
	}
	p := r.Peers[0]
	checkPhase(t, p)
	if len(p.RoundCyclesPerSec) != 2 {
		t.Errorf("rueidis rounds %v, want 2", p.RoundCyclesPerSec)
	}
	if p.ClientCPUPerCycle <= 0 || p.RequestsPerWrite != 0 {
		t.Errorf("rueidis: client CPU %.1f µs per cycle, requests per write %.1f (not measured for it)", p.ClientCPUPerCycle, p.RequestsPerWrite)
	}
	linux := runtime.GOOS == "linux"
	if linux && p.ClientSyscallsPerCycle <= 0 {
		t.Errorf("rueidis: client syscalls per cycle %.2f", p.ClientSyscallsPerCycle)
	}
	// The masters' syscalls are read only for masters the bench starts.
	if !r.Embedded && p.MasterCPUPerCycle <= 0 {
		t.Errorf("rueidis: masters %.1f µs per cycle", p.MasterCPUPerCycle)
	}

	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var obj struct {
		Peers []map[string]any `json:"peers"`
	}
	if err := json.Unmarshal(b, &obj); err != nil || len(obj.Peers) != 1 {
		t.Fatalf("JSON peers: %v %s", err, b)
	}
	want := []string{"cycles_per_sec", "client_cpu_us_per_cycle"}
	if linux {
		want = append(want, "client_syscalls_per_cycle")
	}
	if !r.Embedded {
		want = append(want, "masters_cpu_us_per_cycle")
	}
	if obj.Peers[0]["target"] != PeerRueidis {
		t.Errorf("JSON peer target %v", obj.Peers[0]["target"])
	}
	for _, k := range want {
		if v, _ := obj.Peers[0][k].(float64); v <= 0 {
			t.Errorf("JSON peer %s = %v", k, obj.Peers[0][k])
		}
	}

	var tb strings.Builder
	if err := r.WriteWideTable(&tb); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tb.String(), "rueidis") || !strings.Contains(tb.String(), "engine ÷ rueidis per round:") {
		t.Errorf("wide table lacks the rueidis row or its ratios:\n%s", tb.String())
	}
	html, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(html), `id="rueidis-cycles"`) {
		t.Errorf("HTML report lacks the rueidis row")
	}
}
