// Package metrics exports an engine's measurements as Prometheus series.
//
// The engine imports no metrics library: it reports through the small
// [engine.Observer] interface. [New] returns an Observer that records into
// Prometheus collectors; pass it as engine.Config.Observer, then call
// [Metrics.Watch] with the engine for the masters' state gauges, and serve
// the registry with [Handler] (`redlock proxy --metrics-addr` and `redlock
// bench --metrics-addr` do this). [RegisterProxy] adds a proxy's own
// counters, read through a function: metrics does not import the proxy,
// nor the proxy metrics. The series are listed in
// docs/operations.md, with what to alert on.
package metrics

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/resp"
)

// Namespace prefixes every series name.
const Namespace = "redlock"

// Metrics records one engine's events ([engine.Observer]). Its methods are
// safe for concurrent use and allocate nothing.
type Metrics struct {
	acquisitions [5]prometheus.Counter // by engine.AcquireResult
	acquireSecs  prometheus.Histogram
	waitSecs     [2]prometheus.Observer // got it: false, true
	margin       prometheus.Histogram
	validity     prometheus.Histogram
	extensions   [2][2]prometheus.Counter // [auto][ok]
	releases     [4]prometheus.Counter    // by engine.ReleaseResult
	losses       prometheus.Counter
	rttVec       *prometheus.HistogramVec
	errVec       *prometheus.CounterVec
	batchVec     *prometheus.HistogramVec
	masters      [engine.MaxMasters]atomic.Pointer[masterSeries] // made at a master's first event

	reg      prometheus.Registerer
	state    *stateCollector
	watchMu  sync.Mutex
	watching bool // state registered
}

// masterSeries are one master's series, resolved once.
type masterSeries struct {
	rtt, batch prometheus.Observer
	errs       [len(errorKinds)]prometheus.Counter
}

// errorKinds label a master's failed replies.
var errorKinds = [...]string{"timeout", "down", "error_reply", "other"}

// New creates the collectors and registers them with reg. Per-master
// series are labelled with the master's index in engine.Config.Addrs
// (master="0"...; redlock_master_up also carries the address).
func New(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{reg: reg, state: &stateCollector{}}
	acq := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "acquisitions_total",
		Help: "Acquisition attempts by result: acquired, taken (held by another), no_quorum (too few masters answered), timeout, cancelled."}, []string{"result"})
	for r := range m.acquisitions {
		m.acquisitions[r] = acq.WithLabelValues(engine.AcquireResult(r).String())
	}
	m.acquireSecs = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "acquire_duration_seconds",
		Help: "Time from sending an acquisition to every master until its decision.", Buckets: latencyBuckets})
	wait := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "wait_duration_seconds",
		Help: "Time a Lock call waited, by whether it got the lock.", Buckets: waitBuckets}, []string{"acquired"})
	m.waitSecs = [2]prometheus.Observer{wait.WithLabelValues("false"), wait.WithLabelValues("true")}
	m.margin = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "quorum_margin",
		Help:    "Grants minus quorum per acquisition attempt: how many more masters could have failed (negative: short of a quorum).",
		Buckets: prometheus.LinearBuckets(-3, 1, 7)})
	m.validity = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "validity_left_ratio",
		Help: "Share of the TTL left as validity when a lock was granted (1 − (elapsed + drift)/TTL).", Buckets: []float64{0.5, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 0.999}})
	ext := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "extensions_total",
		Help: "Decided extensions, by who asked (watchdog or caller) and result (extended or failed)."}, []string{"by", "result"})
	for a, by := range []string{"caller", "watchdog"} {
		for ok, res := range []string{"failed", "extended"} {
			m.extensions[a][ok] = ext.WithLabelValues(by, res)
		}
	}
	rel := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "releases_total",
		Help: "Decided releases: released (by a quorum), lost (a quorum answered and fewer held the token of a granted lock), cleanup (a failed attempt's value, refused by the proxy, released by its client), unavailable (too few masters answered)."}, []string{"result"})
	for r := range m.releases {
		m.releases[r] = rel.WithLabelValues(engine.ReleaseResult(r).String())
	}
	losses := prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "locks_lost_total",
		Help: "Locks that ended other than by Unlock: an extension failed, the validity ran out, or the hold limit was reached."})
	m.losses = losses
	rtt := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "master_rtt_seconds",
		Help: "Round trip of one master's part of an operation, from the fan-out to its reply or failure.", Buckets: latencyBuckets}, []string{"master"})
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "master_errors_total",
		Help: "A master's failed parts of operations, by kind: timeout, down (not connected), error_reply, other."}, []string{"master", "kind"})
	batch := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "write_batch_commands",
		Help: "Commands per write to a master (auto-pipelining's batch size).", Buckets: prometheus.ExponentialBuckets(1, 2, 12)}, []string{"master"})
	m.rttVec, m.errVec, m.batchVec = rtt, errs, batch
	for _, c := range []prometheus.Collector{acq, m.acquireSecs, wait, m.margin, m.validity, ext, rel, losses, rtt, errs, batch} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

var (
	latencyBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}
	waitBuckets    = []float64{.001, .005, .01, .05, .1, .5, 1, 5, 10, 30, 60, 300}
)

var _ engine.Observer = (*Metrics)(nil)

// Acquire implements [engine.Observer].
func (m *Metrics) Acquire(ev engine.AcquireEvent) {
	if int(ev.Result) < len(m.acquisitions) {
		m.acquisitions[ev.Result].Inc()
	}
	m.acquireSecs.Observe(ev.Latency.Seconds())
	m.margin.Observe(float64(ev.Margin))
	if ev.Result == engine.AcquireGranted && ev.TTL > 0 {
		m.validity.Observe(float64(ev.ValidityLeft) / float64(ev.TTL))
	}
}

// Wait implements [engine.Observer].
func (m *Metrics) Wait(d time.Duration, acquired bool) {
	m.waitSecs[b2i(acquired)].Observe(d.Seconds())
}

// Extend implements [engine.Observer].
func (m *Metrics) Extend(ok, auto bool) { m.extensions[b2i(auto)][b2i(ok)].Inc() }

// Release implements [engine.Observer].
func (m *Metrics) Release(r engine.ReleaseResult) {
	if int(r) < len(m.releases) {
		m.releases[r].Inc()
	}
}

// Lost implements [engine.Observer].
func (m *Metrics) Lost(error) { m.losses.Inc() }

// master returns master i's series (nil for an index out of range).
func (m *Metrics) master(i int) *masterSeries {
	if i < 0 || i >= len(m.masters) {
		return nil
	}
	if s := m.masters[i].Load(); s != nil {
		return s
	}
	l := strconv.Itoa(i)
	s := &masterSeries{rtt: m.rttVec.WithLabelValues(l), batch: m.batchVec.WithLabelValues(l)}
	for k, kind := range errorKinds {
		s.errs[k] = m.errVec.WithLabelValues(l, kind)
	}
	if m.masters[i].CompareAndSwap(nil, s) {
		return s
	}
	return m.masters[i].Load()
}

// MasterReply implements [engine.Observer].
func (m *Metrics) MasterReply(i int, rtt time.Duration, err error) {
	s := m.master(i)
	if s == nil {
		return
	}
	s.rtt.Observe(rtt.Seconds())
	if err == nil {
		return
	}
	var re *resp.Error
	k := 3
	switch {
	case errors.Is(err, conn.ErrTimeout), errors.Is(err, conn.ErrStalled):
		k = 0
	case errors.Is(err, conn.ErrDown), errors.Is(err, conn.ErrBroken), errors.Is(err, conn.ErrClosed):
		k = 1
	case errors.As(err, &re):
		k = 2
	}
	s.errs[k].Inc()
}

// WriteBatch implements [engine.Observer].
func (m *Metrics) WriteBatch(i, n int) {
	if s := m.master(i); s != nil {
		s.batch.Observe(float64(n))
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Watch makes the scrapes read the masters' state from e: connected and
// quarantined per master, masters voting, and the quorum. A later call
// replaces the engine (a benchmark runs one engine after another).
func (m *Metrics) Watch(e *engine.Engine) error {
	m.watchMu.Lock()
	defer m.watchMu.Unlock()
	if !m.watching {
		if err := m.reg.Register(m.state); err != nil {
			return err
		}
		m.watching = true
	}
	m.state.e.Store(e)
	return nil
}

// stateCollector reads the masters' state from the engine at scrape time.
type stateCollector struct{ e atomic.Pointer[engine.Engine] }

var (
	upDesc = prometheus.NewDesc(Namespace+"_master_up",
		"1 when the engine is connected to the master.", []string{"master", "addr"}, nil)
	quarDesc = prometheus.NewDesc(Namespace+"_master_quarantined",
		"1 while the master's grants do not count (it may have started less than the quarantine period ago).", []string{"master"}, nil)
	votingDesc = prometheus.NewDesc(Namespace+"_masters_voting",
		"Masters connected and not quarantined: locks can be taken while this is at least the quorum.", nil, nil)
	quorumDesc = prometheus.NewDesc(Namespace+"_quorum",
		"Masters needed for a lock (N/2+1).", nil, nil)
	redirectDesc = prometheus.NewDesc(Namespace+"_cluster_redirects_total",
		"-MOVED and -ASK replies followed by Redis Cluster members.", []string{"kind"}, nil)
	reloadDesc = prometheus.NewDesc(Namespace+"_cluster_map_reloads_total",
		"Slot map reloads of Redis Cluster members.", nil, nil)
	jumpDesc = prometheus.NewDesc(Namespace+"_master_clock_jumps_total",
		"Masters' clock jumps the clock check saw: forward (the master was quarantined) and backward (logged only).", []string{"direction"}, nil)
	waitingDesc = prometheus.NewDesc(Namespace+"_lock_waiters",
		"Lock calls waiting now, over every key.", nil, nil)
	handOffDesc = prometheus.NewDesc(Namespace+"_handoffs_total",
		"Unlocks whose release went with the next waiter's acquire as one script per master (the hand-off in one round trip).", nil, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- upDesc
	ch <- quarDesc
	ch <- votingDesc
	ch <- quorumDesc
	ch <- redirectDesc
	ch <- reloadDesc
	ch <- jumpDesc
	ch <- waitingDesc
	ch <- handOffDesc
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	e := c.e.Load()
	if e == nil {
		return
	}
	st := e.Status()
	voting := 0
	for _, s := range st {
		up, q := float64(b2i(s.Up)), float64(b2i(s.Quarantined))
		if s.Up && !s.Quarantined {
			voting++
		}
		i := strconv.Itoa(s.Index)
		ch <- prometheus.MustNewConstMetric(upDesc, prometheus.GaugeValue, up, i, s.Addr)
		ch <- prometheus.MustNewConstMetric(quarDesc, prometheus.GaugeValue, q, i)
	}
	ch <- prometheus.MustNewConstMetric(votingDesc, prometheus.GaugeValue, float64(voting))
	ch <- prometheus.MustNewConstMetric(quorumDesc, prometheus.GaugeValue, float64(len(st)/2+1))
	stats := e.Stats()
	ch <- prometheus.MustNewConstMetric(redirectDesc, prometheus.CounterValue, float64(stats.ClusterMoved), "moved")
	ch <- prometheus.MustNewConstMetric(redirectDesc, prometheus.CounterValue, float64(stats.ClusterAsked), "ask")
	ch <- prometheus.MustNewConstMetric(reloadDesc, prometheus.CounterValue, float64(stats.ClusterRefreshes))
	ch <- prometheus.MustNewConstMetric(jumpDesc, prometheus.CounterValue, float64(stats.ClockJumpsAhead), "forward")
	ch <- prometheus.MustNewConstMetric(jumpDesc, prometheus.CounterValue, float64(stats.ClockJumpsBack), "backward")
	ch <- prometheus.MustNewConstMetric(waitingDesc, prometheus.GaugeValue, float64(stats.Waiting))
	ch <- prometheus.MustNewConstMetric(handOffDesc, prometheus.CounterValue, float64(stats.HandOffs))
}

// ProxyStats are a `redlock proxy`'s own counters, as [RegisterProxy]
// reads them: the fields of proxy.Stats, in its order (metrics does not
// import the proxy), so that the caller converts one into the other —
// metrics.ProxyStats(srv.Stats()) — and a field added to one and not the
// other fails to compile there instead of going missing from /metrics.
type ProxyStats struct {
	ConnectedClients    int64
	AcceptedConnections uint64
	RejectedConnections uint64
	Commands            uint64
	ProtocolErrors      uint64
	AuthFailures        uint64
	MemoryRefusals      uint64
	PanicsRecovered     uint64
	OverloadRefusals    uint64
	LoopClients         int64
	LoopMoves           uint64
	ExpiredReplies      uint64
}

// RegisterProxy registers with reg the proxy's own series (client
// connections, commands, protocol errors, wrong passwords, memory
// refusals, panics recovered), read from stats at each scrape.
func RegisterProxy(reg prometheus.Registerer, stats func() ProxyStats) error {
	return reg.Register(proxyCollector(stats))
}

// proxyCollector reads a proxy's counters at scrape time.
type proxyCollector func() ProxyStats

var (
	proxyClientsDesc = prometheus.NewDesc(Namespace+"_proxy_clients",
		"Client connections open.", nil, nil)
	proxyAcceptedDesc = prometheus.NewDesc(Namespace+"_proxy_connections_accepted_total",
		"Client connections accepted.", nil, nil)
	proxyRejectedDesc = prometheus.NewDesc(Namespace+"_proxy_connections_rejected_total",
		"Client connections refused at --max-clients.", nil, nil)
	proxyCommandsDesc = prometheus.NewDesc(Namespace+"_proxy_commands_total",
		"Commands read from clients.", nil, nil)
	proxyProtoDesc = prometheus.NewDesc(Namespace+"_proxy_protocol_errors_total",
		"Requests that could not be parsed or broke a request limit (the connection was closed).", nil, nil)
	proxyAuthDesc = prometheus.NewDesc(Namespace+"_proxy_auth_failures_total",
		"Wrong passwords (AUTH, HELLO AUTH).", nil, nil)
	proxyMemDesc = prometheus.NewDesc(Namespace+"_proxy_memory_refusals_total",
		"Requests refused at --max-client-memory.", nil, nil)
	proxyPanicsDesc = prometheus.NewDesc(Namespace+"_proxy_panics_recovered_total",
		"Panics recovered while serving a client connection (the connection was closed).", nil, nil)
	proxyOverloadDesc = prometheus.NewDesc(Namespace+"_proxy_overload_refusals_total",
		"Pipelined commands answered -BUSY: they would have waited longer than --queue-timeout for the masters.", nil, nil)
	proxyLoopClientsDesc = prometheus.NewDesc(Namespace+"_proxy_loop_clients",
		"Client connections served by an event loop (of redlock_proxy_clients; the others by goroutines).", nil, nil)
	proxyLoopMovesDesc = prometheus.NewDesc(Namespace+"_proxy_loop_moves_total",
		"Client connections an event loop handed to goroutines (a subscription, a request larger than 16 KiB).", nil, nil)
	proxyExpiredDesc = prometheus.NewDesc(Namespace+"_proxy_expired_replies_total",
		"Grants and extensions answered as expired: their reply waited for the connection's earlier replies past the lock's validity.", nil, nil)
)

func (c proxyCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{proxyClientsDesc, proxyAcceptedDesc, proxyRejectedDesc, proxyCommandsDesc,
		proxyProtoDesc, proxyAuthDesc, proxyMemDesc, proxyPanicsDesc, proxyOverloadDesc, proxyLoopClientsDesc, proxyLoopMovesDesc, proxyExpiredDesc} {
		ch <- d
	}
}

func (c proxyCollector) Collect(ch chan<- prometheus.Metric) {
	st := c()
	ch <- prometheus.MustNewConstMetric(proxyClientsDesc, prometheus.GaugeValue, float64(st.ConnectedClients))
	ch <- prometheus.MustNewConstMetric(proxyLoopClientsDesc, prometheus.GaugeValue, float64(st.LoopClients))
	for _, m := range []struct {
		d *prometheus.Desc
		v uint64
	}{
		{proxyAcceptedDesc, st.AcceptedConnections},
		{proxyRejectedDesc, st.RejectedConnections},
		{proxyCommandsDesc, st.Commands},
		{proxyProtoDesc, st.ProtocolErrors},
		{proxyAuthDesc, st.AuthFailures},
		{proxyMemDesc, st.MemoryRefusals},
		{proxyPanicsDesc, st.PanicsRecovered},
		{proxyOverloadDesc, st.OverloadRefusals},
		{proxyLoopMovesDesc, st.LoopMoves},
		{proxyExpiredDesc, st.ExpiredReplies},
	} {
		ch <- prometheus.MustNewConstMetric(m.d, prometheus.CounterValue, float64(m.v))
	}
}

// NewRegistry returns a registry with the Go runtime and process
// collectors, for a binary's /metrics.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Handler serves reg in the Prometheus exposition format.
func Handler(reg prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Serve serves reg on addr at /metrics until ctx ends, with the probes a
// load balancer or Kubernetes asks: /healthz answers 200 while the
// process serves, /readyz 200 when ready returns nil (or ready is nil)
// and 503 with ready's error otherwise — for a proxy, [engine.Engine.Voting]:
// a quorum of masters up and out of restart quarantine. It returns once
// the listener is open (its address, for ":0"), or the listen error; the
// server shuts down in the background when ctx ends.
func Serve(ctx context.Context, addr string, reg prometheus.Gatherer, ready func() error) (net.Addr, error) {
	return ServeProbes(ctx, addr, reg, ready, nil)
}

// ServeProbes is [Serve] whose /readyz, when ready, also says margin()
// ("ready: 3/5 vote, quorum 3: one more failure stops locking" for a
// proxy's [engine.Engine.VoteMargin]): a probe that passes with no
// failure left to spare is worth an alert.
func ServeProbes(ctx context.Context, addr string, reg prometheus.Gatherer, ready func() error, margin func() string) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", Handler(reg))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if ready != nil {
			if err := ready(); err != nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				io.WriteString(w, err.Error()+"\n")
				return
			}
		}
		if margin != nil {
			io.WriteString(w, "ready: "+margin()+"\n")
			return
		}
		io.WriteString(w, "ready\n")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	context.AfterFunc(ctx, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	})
	return ln.Addr(), nil
}
