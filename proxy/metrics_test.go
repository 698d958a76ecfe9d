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
	checkReply(t, mr.cmd("SET", "sm:big", strings.Repeat("v", 64<<10), "NX", "PX", "1000"), "-"+msgMemory+"*")
	// A panic in the reader, recovered.
	hook := func(where string, args [][]byte) {
		if where == "dispatch" && len(args) == 2 && string(args[1]) == "boom" {
			panic("test panic")
		}
	}
	testHook.Store(&hook)
	defer testHook.Store(nil)
	p := dial()
	checkReply(t, p.cmd("ECHO", "boom"), "-ERR redlock proxy internal error*")
	testHook.Store(nil)
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
	for field, series := range map[string]string{
		"connected_clients":    "redlock_proxy_clients",
		"accepted_connections": "redlock_proxy_connections_accepted_total",
		"rejected_connections": "redlock_proxy_connections_rejected_total",
		"commands_processed":   "redlock_proxy_commands_total",
		"protocol_errors":      "redlock_proxy_protocol_errors_total",
		"auth_failures":        "redlock_proxy_auth_failures_total",
		"memory_refusals":      "redlock_proxy_memory_refusals_total",
		"panics_recovered":     "redlock_proxy_panics_recovered_total",
	} {
		if float64(info[field]) != after[series] {
			t.Errorf("INFO %s:%d, /metrics %s %v", field, info[field], series, after[series])
		}
	}

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

// TestInfoMetricsLockCounters: after N extensions through the proxy — by
// the engine (single-key compare-and-pexpire) and by broadcast (redsync's
// touch-with-setnx, node-redlock's multi-key extend) — INFO's
// locks_extended and /metrics' redlock_extensions_total{result="extended"}
// both say N, and both count the failed one; so do INFO's other lock
// counters and their series. Before, INFO counted only the engine's.
func TestInfoMetricsLockCounters(t *testing.T) {
	e := startMetricsEnv(t, nil)
	c := dialRaw(t, e.addr)
	for _, k := range []string{"ext:a", "ext:b", "ext:c"} {
		checkReply(t, c.cmd("SET", k, "tok", "NX", "PX", "10000"), "+OK\r\n")
	}
	extends := []struct {
		script string
		keys   []string
		want   string
	}{
		{scripts.Extend.Source(), []string{"ext:a"}, ":1\r\n"},
		{scripts.Extend.Source(), []string{"ext:a"}, ":1\r\n"},
		{scripts.Lib("redsync-v4-touchWithSetNXScript"), []string{"ext:b"}, ":1\r\n"},
		{scripts.Lib("node-redlock5-extend"), []string{"ext:b", "ext:c"}, ":2\r\n"},
		{scripts.Lib("node-redlock5-extend"), []string{"ext:b", "ext:c"}, ":2\r\n"},
	}
	for _, x := range extends {
		args := append([]string{"EVAL", x.script, strconv.Itoa(len(x.keys))}, x.keys...)
		checkReply(t, c.cmd(append(args, "tok", "10000")...), x.want)
	}
	// A failed extension by broadcast: another token.
	checkReply(t, c.cmd("EVAL", scripts.Lib("node-redlock5-extend"), "2", "ext:b", "ext:c", "other", "10000"), ":0\r\n")

	// The other lock counters agree too: an acquisition, a refused one
	// and two releases (one lost) by broadcast.
	nodeAcquire, nodeRelease := scripts.Lib("node-redlock5-acquire"), scripts.Lib("node-redlock5-release")
	checkReply(t, c.cmd("EVAL", nodeAcquire, "2", "ext:d", "ext:e", "tok", "10000"), ":2\r\n")
	checkReply(t, c.cmd("EVAL", nodeAcquire, "2", "ext:d", "ext:e", "other", "10000"), ":0\r\n")
	checkReply(t, c.cmd("EVAL", nodeRelease, "2", "ext:d", "ext:e", "tok"), ":2\r\n")
	checkReply(t, c.cmd("EVAL", nodeRelease, "2", "ext:d", "ext:e", "tok"), ":0\r\n")

	info := infoFields(t, c.cmd("INFO", "proxy"))
	m := e.scrape(t)
	for field, series := range map[string]string{
		"locks_acquired": `redlock_acquisitions_total{result="acquired"}`,
		"locks_failed":   `redlock_acquisitions_total{result="taken"}`,
		"locks_released": `redlock_releases_total{result="released"}`,
		"locks_lost":     `redlock_releases_total{result="lost"}`,
	} {
		if float64(info[field]) != m[series] {
			t.Errorf("INFO %s:%d, /metrics %s %v", field, info[field], series, m[series])
		}
	}
	if info["locks_acquired"] != 4 || info["locks_failed"] != 1 || info["locks_released"] != 1 || info["locks_lost"] != 1 {
		t.Errorf("INFO acquired %d, failed %d, released %d, lost %d; want 4, 1, 1, 1",
			info["locks_acquired"], info["locks_failed"], info["locks_released"], info["locks_lost"])
	}
	n := int64(len(extends))
	extended := m[`redlock_extensions_total{by="caller",result="extended"}`] + m[`redlock_extensions_total{by="watchdog",result="extended"}`]
	failed := m[`redlock_extensions_total{by="caller",result="failed"}`] + m[`redlock_extensions_total{by="watchdog",result="failed"}`]
	if info["locks_extended"] != n || extended != float64(n) {
		t.Errorf("after %d extensions: INFO locks_extended:%d, /metrics %v", n, info["locks_extended"], extended)
	}
	if info["locks_extend_failed"] != 1 || failed != 1 {
		t.Errorf("after one failed extension: INFO locks_extend_failed:%d, /metrics %v", info["locks_extend_failed"], failed)
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
