package proxy

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/internal/test/check"
	"github.com/redlock-dev/redlock/metrics"
	"github.com/redlock-dev/redlock/proxy/internal/respserver"
)

// metricsEnv is a proxy whose /metrics is built as `redlock proxy
// --metrics-addr` builds it (cmd/redlock/proxy.go): the engine's Observer,
// the masters' state, and the proxy's own counters.
type metricsEnv struct {
	*env
	url string
}

func startMetricsEnv(t *testing.T, mod func(*Config)) *metricsEnv {
	t.Helper()
	reg := metrics.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	e := startEnv(t, 3, func(c *Config) {
		c.EngineConfig.Observer = m
		if mod != nil {
			mod(c)
		}
	})
	if err := m.Watch(e.srv.Engine()); err != nil {
		t.Fatal(err)
	}
	if err := metrics.RegisterProxy(reg, func() metrics.ProxyStats { return metrics.ProxyStats(e.srv.Stats()) }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	addr, err := metrics.Serve(ctx, "127.0.0.1:0", reg, e.srv.Engine().Voting)
	if err != nil {
		t.Fatal(err)
	}
	return &metricsEnv{env: e, url: "http://" + addr.String() + "/metrics"}
}

// scrape reads /metrics: each series (name and labels) and its value.
func (e *metricsEnv) scrape(t *testing.T) map[string]float64 { return check.Scrape(t, e.url) }

// infoFields parses an INFO reply into its fields.
func infoFields(t *testing.T, reply string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, line := range strings.Split(reply, "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			out[k] = n
		}
	}
	return out
}

// TestProxyStatsMetrics: the proxy's own counters reach /metrics, each
// moved by exactly the events provoked — client connections (open and
// accepted), a protocol error, a wrong password, a refusal at
// MaxClientMemory (not also a protocol error), a recovered panic — and
// agree with INFO.
func TestProxyStatsMetrics(t *testing.T) {
	e := startMetricsEnv(t, func(c *Config) { c.RequirePass = "pw"; c.MaxClientMemory = 1 })
	before := e.scrape(t)
	var accepted float64
	dial := func() *rawConn {
		c := dialRaw(t, e.addr)
		accepted++
		checkReply(t, c.cmd("AUTH", "pw"), "+OK\r\n")
		return c
	}
	// Connections held open.
	open := []*rawConn{dial(), dial(), dial()}
	// A wrong password (the connection stays).
	checkReply(t, open[0].cmd("AUTH", "wrong"), "-WRONGPASS*")
	// A protocol error.
	pe := dial()
	pe.send("*1\r\n$x\r\n")
	checkReply(t, pe.read(), "-ERR Protocol error*")
	// A refusal at MaxClientMemory: a request beyond the connection's
	// free 16 KiB.
	mr := dial()
	checkReply(t, mr.cmd("SET", "sm:big", strings.Repeat("v", 64<<10), "NX", "PX", "1000"), "-"+respserver.MsgMemory+"*")
	// A panic in the reader, recovered.
	hook := func(where string, args [][]byte) {
		if where == "dispatch" && len(args) == 2 && string(args[1]) == "boom" {
			panic("test panic")
		}
	}
	respserver.SetTestHook(hook)
	defer respserver.SetTestHook(nil)
	p := dial()
	checkReply(t, p.cmd("ECHO", "boom"), "-ERR redlock proxy internal error*")
	respserver.SetTestHook(nil)
	for _, c := range []*rawConn{pe, mr, p} {
		if got := c.read(); got != "" {
			t.Fatalf("a connection that failed stays open: %q", got)
		}
	}

	// A failed connection is closed before its goroutine leaves the
	// count: wait for it (on a loaded machine a scrape can come between).
	after := e.scrape(t)
	for deadline := time.Now().Add(5 * time.Second); after["redlock_proxy_clients"]-before["redlock_proxy_clients"] > 3 && time.Now().Before(deadline); after = e.scrape(t) {
		time.Sleep(10 * time.Millisecond)
	}
	for _, x := range []struct {
		series string
		delta  float64
	}{
		{"redlock_proxy_clients", 3},
		{"redlock_proxy_connections_accepted_total", accepted},
		{"redlock_proxy_connections_rejected_total", 0},
		{"redlock_proxy_protocol_errors_total", 1},
		{"redlock_proxy_auth_failures_total", 1},
		{"redlock_proxy_memory_refusals_total", 1},
		{"redlock_proxy_panics_recovered_total", 1},
		// Each connection's AUTH, the wrong AUTH and the ECHO; not the
		// requests refused while being read.
		{"redlock_proxy_commands_total", accepted + 2},
	} {
		a, ok := after[x.series]
		if !ok {
			t.Errorf("/metrics lacks %s", x.series)
			continue
		}
		if d := a - before[x.series]; d != x.delta {
			t.Errorf("%s moved by %v, want %v", x.series, d, x.delta)
		}
	}
	info := infoFields(t, open[1].cmd("INFO"))
	after = e.scrape(t)
	if float64(info["connected_clients"]) != after["redlock_proxy_clients"] {
		t.Errorf("INFO connected_clients:%d, /metrics redlock_proxy_clients %v", info["connected_clients"], after["redlock_proxy_clients"])
	}
	checkInfoAgrees(t, info, after)

	// Closed connections leave the gauge.
	for _, c := range open {
		c.nc.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for e.scrape(t)["redlock_proxy_clients"] != before["redlock_proxy_clients"] {
		if time.Now().After(deadline) {
			t.Fatalf("redlock_proxy_clients %v after every connection closed, want %v", e.scrape(t)["redlock_proxy_clients"], before["redlock_proxy_clients"])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// infoNames names /metrics series as INFO's # Proxy section names its
// counters (docs/operations.md, Monitoring): the series name without
// redlock_, proxy_ and _total, then _ and the value of its result label;
// series that differ in other labels are summed.
func infoNames(m map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for series, v := range m {
		name, labels, _ := strings.Cut(series, "{")
		if !strings.HasPrefix(name, "redlock_") {
			continue
		}
		name = strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(name, "redlock_"), "proxy_"), "_total")
		if _, r, ok := strings.Cut(labels, `result="`); ok {
			name += "_" + r[:strings.IndexByte(r, '"')]
		}
		out[name] += v
	}
	return out
}

// sharedCounters are the counters INFO proxy and /metrics both show:
// a rename on one side only fails TestInfoMetricsAgree.
var sharedCounters = []string{
	"connections_accepted", "connections_rejected", "commands", "protocol_errors", "auth_failures",
	"memory_refusals", "panics_recovered",
	"acquisitions_acquired", "acquisitions_taken", "acquisitions_no_quorum",
	"extensions_extended", "extensions_failed",
	"releases_released", "releases_lost", "releases_cleanup", "releases_unavailable", "locks_lost",
}

// checkInfoAgrees compares every INFO field whose name a /metrics series
// has (infoNames) with that series, and returns the names compared.
func checkInfoAgrees(t *testing.T, info map[string]int64, m map[string]float64) map[string]bool {
	t.Helper()
	named, shared := infoNames(m), map[string]bool{}
	for field, v := range info {
		mv, ok := named[field]
		if !ok {
			continue
		}
		shared[field] = true
		if float64(v) != mv {
			t.Errorf("INFO %s:%d, /metrics %v", field, v, mv)
		}
	}
	return shared
}

// TestInfoMetricsAgree: after a workload that moves every counter INFO
// proxy and /metrics share — connections accepted and refused, commands,
// a protocol error, a wrong password, a memory refusal, a recovered
// panic; lock acquisitions acquired, taken and without quorum;
// extensions done and failed (a lock lost); releases released, lost,
// cleanup (of a refused value, and a second release of a released one)
// and unavailable; each by the engine (SET NX PX, single-key
// scripts) and by broadcast (node-redlock v4's multi-key scripts) — each
// shared name shows one value in both, and moved.
func TestInfoMetricsAgree(t *testing.T) {
	e := startMetricsEnv(t, func(c *Config) { c.RequirePass = "pw"; c.MaxClients = 2; c.MaxClientMemory = 1 })
	dial := func() *rawConn {
		c := dialRaw(t, e.addr)
		checkReply(t, c.cmd("AUTH", "pw"), "+OK\r\n")
		return c
	}
	// gone waits until a closed connection left the client count.
	gone := func(n int64) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); e.srv.Stats().ConnectedClients != n; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d clients, want %d", e.srv.Stats().ConnectedClients, n)
			}
		}
	}
	c := dial()
	checkReply(t, c.cmd("AUTH", "wrong"), "-WRONGPASS*")
	d := dial()
	checkReply(t, dialRaw(t, e.addr).read(), "-ERR max number of clients reached*")
	d.nc.Close()
	gone(1)
	pe := dialRaw(t, e.addr)
	pe.send("*1\r\n$x\r\n")
	checkReply(t, pe.read(), "-ERR Protocol error*")
	gone(1)
	mr := dial()
	checkReply(t, mr.cmd("SET", "agree:big", strings.Repeat("v", 64<<10), "NX", "PX", "1000"), "-"+respserver.MsgMemory+"*")
	gone(1)
	hook := func(where string, args [][]byte) {
		if where == "dispatch" && len(args) == 2 && string(args[1]) == "boom" {
			panic("test panic")
		}
	}
	respserver.SetTestHook(hook)
	defer respserver.SetTestHook(nil)
	checkReply(t, dial().cmd("ECHO", "boom"), "-ERR redlock proxy internal error*")
	respserver.SetTestHook(nil)
	gone(1)

	eval := func(script string, keys []string, args ...string) string {
		t.Helper()
		return c.cmd(append(append([]string{"EVAL", script, strconv.Itoa(len(keys))}, keys...), args...)...)
	}
	// By the engine: SET NX PX and the single-key scripts.
	release, extend := scripts.Release.Source(), scripts.Extend.Source()
	checkReply(t, c.cmd("SET", "agree:a", "tok", "NX", "PX", "10000"), "+OK\r\n")   // acquired
	checkReply(t, c.cmd("SET", "agree:a", "other", "NX", "PX", "10000"), "$-1\r\n") // taken
	checkReply(t, eval(release, []string{"agree:a"}, "other"), ":0\r\n")            // cleanup
	checkReply(t, eval(extend, []string{"agree:a"}, "tok", "10000"), ":1\r\n")      // extended
	checkReply(t, eval(extend, []string{"agree:a"}, "other", "10000"), ":0\r\n")    // failed: lost
	checkReply(t, eval(release, []string{"agree:a"}, "tok"), ":1\r\n")              // released
	checkReply(t, eval(release, []string{"agree:a"}, "tok"), ":0\r\n")              // released again: cleanup
	checkReply(t, c.cmd("SET", "agree:e", "tok", "NX", "PX", "50"), "+OK\r\n")      // acquired
	time.Sleep(150 * time.Millisecond)                                              // it expires
	checkReply(t, eval(release, []string{"agree:e"}, "tok"), ":0\r\n")              // lost
	// By broadcast: node-redlock v4's scripts on two keys.
	lock, ext, unlock := scripts.Lib("node-redlock4-lock"), scripts.Lib("node-redlock4-extend"), scripts.Lib("node-redlock4-unlock")
	bc := []string{"agree:b", "agree:c"}
	checkReply(t, eval(lock, bc, "tok", "10000"), ":2\r\n")   // acquired
	checkReply(t, eval(lock, bc, "other", "10000"), ":0\r\n") // taken
	checkReply(t, eval(unlock, bc, "other"), ":0\r\n")        // cleanup
	checkReply(t, eval(ext, bc, "tok", "10000"), ":2\r\n")    // extended
	checkReply(t, eval(ext, bc, "other", "10000"), ":0\r\n")  // failed: lost
	checkReply(t, eval(unlock, bc, "tok"), ":2\r\n")          // released
	checkReply(t, eval(unlock, bc, "tok"), ":0\r\n")          // released again: cleanup
	be := []string{"agree:f", "agree:g"}
	checkReply(t, eval(lock, be, "tok", "50"), ":2\r\n") // acquired
	time.Sleep(150 * time.Millisecond)                   // it expires
	checkReply(t, eval(unlock, be, "tok"), ":0\r\n")     // lost
	// Two of three masters down: no quorum, by the engine and by broadcast.
	for _, m := range e.set.Masters()[:2] {
		if err := m.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	checkReply(t, c.cmd("SET", "agree:d", "tok", "NX", "PX", "10000"), "-ERR redlock proxy: unavailable*") // no_quorum
	checkReply(t, eval(lock, bc, "tok", "10000"), "-ERR redlock proxy: unavailable*")                      // no_quorum
	checkReply(t, eval(release, []string{"agree:d"}, "tok"), "-ERR redlock proxy: unavailable*")           // unavailable
	checkReply(t, eval(unlock, bc, "tok"), "-ERR redlock proxy: unavailable*")                             // unavailable

	info := infoFields(t, c.cmd("INFO", "proxy"))
	m := e.scrape(t)
	shared := checkInfoAgrees(t, info, m)
	for _, name := range sharedCounters {
		if !shared[name] {
			t.Errorf("%s: not in both INFO proxy and /metrics", name)
		} else if info[name] == 0 {
			t.Errorf("%s: 0 after a workload that moves it", name)
		}
	}
	// The lock counters, exactly: one of each per path (the engine's and
	// the broadcasts').
	for name, want := range map[string]int64{
		"acquisitions_acquired": 4, "acquisitions_taken": 2, "acquisitions_no_quorum": 2,
		"extensions_extended": 2, "extensions_failed": 2, "locks_lost": 2,
		"releases_released": 2, "releases_lost": 2, "releases_cleanup": 4, "releases_unavailable": 2,
	} {
		if info[name] != want {
			t.Errorf("INFO %s:%d, want %d", name, info[name], want)
		}
	}
}

// TestNodeRedlockContentionMetrics: node-redlock v4 sends its unlock script
// after every failed attempt (retryCount 2: three attempts, three
// releases per refused lock). Those releases clean up values the proxy
// refused; they are counted as result="cleanup", and
// redlock_releases_total{result="lost"} — work that finished after its
// lock expired, which docs/operations.md says to alert on — stays at 0.
func TestNodeRedlockContentionMetrics(t *testing.T) {
	dir, _ := filepath.Abs("testdata/node")
	_, err := os.Stat(filepath.Join(dir, "node_modules", "redlock4"))
	requirePeer(t, "node and testdata/node/node_modules (npm ci --prefix proxy/testdata/node)", haveCmd("node") && err == nil)
	e := startMetricsEnv(t, nil)
	before := e.scrape(t)
	out, err := exec.Command("node", filepath.Join(dir, "contend.js"), port(e.addr), "20").CombinedOutput()
	if err != nil {
		t.Fatalf("contend.js: %v\n%s", err, out)
	}
	f := strings.Fields(string(out))
	if len(f) != 4 || f[0] != "DONE" {
		t.Fatalf("contend.js said %q", out)
	}
	acquired, _ := strconv.Atoi(f[1])
	refused, _ := strconv.Atoi(f[2])
	failed, _ := strconv.Atoi(f[3])
	if refused == 0 || failed < 3*refused {
		t.Fatalf("contend.js: %d acquired, %d refused, %d failed attempts: want a refused lock (3 attempts each)", acquired, refused, failed)
	}
	after := e.scrape(t)
	moved := func(series string) int { return int(after[series] - before[series]) }
	t.Logf("%d locks acquired, %d refused, %d failed attempts; releases: released %d, cleanup %d, lost %d",
		acquired, refused, failed, moved(`redlock_releases_total{result="released"}`),
		moved(`redlock_releases_total{result="cleanup"}`), moved(`redlock_releases_total{result="lost"}`))
	if n := moved(`redlock_releases_total{result="lost"}`); n != 0 {
		t.Errorf(`redlock_releases_total{result="lost"} moved by %d under contention, want 0 (no lock was lost)`, n)
	}
	if n := moved(`redlock_releases_total{result="cleanup"}`); n != failed {
		t.Errorf(`redlock_releases_total{result="cleanup"} moved by %d, want %d (one per failed attempt)`, n, failed)
	}
	if n := moved(`redlock_releases_total{result="released"}`); n != acquired {
		t.Errorf(`redlock_releases_total{result="released"} moved by %d, want %d (one per lock)`, n, acquired)
	}
}
