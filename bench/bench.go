package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/localmaster"
	"github.com/redlock-dev/redlock/internal/members"
	"github.com/redlock-dev/redlock/metrics"
)

// Defaults of [Config]; a zero field selects them.
const (
	DefaultMasters       = 5
	DefaultDuration      = 10 * time.Second
	DefaultConcurrency   = 256
	DefaultKeys          = 100_000 // key space of the cycle workload
	DefaultContendedKeys = 16      // key space of the contended workload
	DefaultTTL           = 30 * time.Second
)

// embeddedMasterTimeout is the per-master timeout used with embedded
// masters unless Config.MasterTimeout is set: miniredis runs each script in
// a fresh Lua state, so replies take milliseconds, not microseconds.
const embeddedMasterTimeout = time.Second

// Targets and peers.
const (
	TargetEngine = "engine"  // the embedded engine (this module)
	TargetProxy  = "proxy"   // a RESP proxy driven by our own pipelined client
	PeerRedsync  = "redsync" // go-redsync/redsync v4 over go-redis v9
	PeerRueidis  = "rueidis" // Redlock written on rueidis clients, one per master (not rueidislock: see rueidisLocker)
	PeerFencing  = "fencing" // the embedded engine taking fencing tokens (engine.WithFencing)
	PeerNoMerge  = "nomerge" // the embedded engine without merged releases or native commands: one script call per release (engine.Config.MergeMax -1, conn.Config.DisableNative)
	PeerPlain    = "plain"   // the embedded engine's plain lock, beside a lock-kind workload
)

// Workloads.
const (
	// WorkloadCycle acquires a random key of the key space, holds it for
	// Config.Hold and releases it (the default).
	WorkloadCycle = "cycle"
	// WorkloadAcquire only acquires, each time a fresh unique key that is
	// never released (it expires by TTL): the cost of acquire alone.
	// Config.Keys is ignored.
	WorkloadAcquire = "acquire"
	// WorkloadContended is the cycle on a small key space (default
	// DefaultContendedKeys keys), so most attempts are refused.
	WorkloadContended = "contended"
	// WorkloadReentrant is the cycle with an engine.Reentrant lock
	// acquired, re-acquired once (nested), and unlocked twice.
	WorkloadReentrant = "reentrant"
	// WorkloadRW is the cycle with an engine.RWLock's read lock.
	WorkloadRW = "rw"
	// WorkloadSemaphore is the cycle with a permit of an engine.Semaphore
	// of 4 permits per key.
	WorkloadSemaphore = "semaphore"
)

// isKind reports whether w is a lock-kind workload (target engine only;
// PeerPlain is its same-run comparison).
func isKind(w string) bool {
	return w == WorkloadReentrant || w == WorkloadRW || w == WorkloadSemaphore
}

// Sweep variables.
const (
	SweepConcurrency = "concurrency"
	SweepMasters     = "masters"
	// SweepRate repeats an open-loop run per offered rate (ops/s): the
	// overload curve — offered load against goodput (cycles/s) and p99.
	SweepRate = "rate"
)

// ErrBadConfig is matched by errors for invalid [Config] values.
var ErrBadConfig = errors.New("bench: invalid config")

// Config describes one benchmark run.
type Config struct {
	// Masters are existing masters (host:port). Empty: start N local ones
	// (for the engine target). For the proxy target they are the proxy's
	// masters, needed only for peers and the ceiling.
	Masters []string
	// MasterConn is how Masters are reached: ACL user and password (AUTH)
	// and TLS; the bench sets the scripts. Zero for local masters.
	MasterConn conn.Config
	// FreshMasters: the caller has just started Masters empty, and no
	// other client uses them (engine.Config.FreshMasters): they vote from
	// their first session. Local masters the bench starts are.
	FreshMasters bool
	// MaxTTL is the engine's MaxTTL (engine.Config.MaxTTL), and so the
	// restart quarantine of masters younger than it when first met
	// (zero: the larger of TTL and engine.DefaultMaxTTL).
	MaxTTL time.Duration
	// DisableClockCheck turns the engine's clock check off
	// (engine.Config.DisableClockCheck): to measure what it costs.
	DisableClockCheck bool
	// N is the number of local masters to start (default 5).
	N int
	// Embedded forces embedded in-process masters even if redis-server exists.
	Embedded bool
	// RequireReal fails instead of falling back to embedded masters.
	RequireReal bool
	// Target is what is measured first: TargetEngine (default) or TargetProxy.
	Target string
	// ProxyAddr is the proxy's host:port (TargetProxy only).
	ProxyAddr string
	// ProxyConn is how the proxy is reached: its password (AUTH) and TLS
	// (TargetProxy only); the bench sets the scripts.
	ProxyConn conn.Config
	// Workload is WorkloadCycle (default), WorkloadAcquire or WorkloadContended.
	Workload string
	// Duration of each measured phase, warm-up excluded (default 10s).
	Duration time.Duration
	// Warmup runs the load this long before measuring (default 0); with
	// Rounds, before each slice.
	Warmup time.Duration
	// Rounds splits Duration into this many slices per target, run
	// alternately (target, peers, target, peers, ...), so that the drift of
	// a shared host hits every target alike (default 1: each target once).
	// Figures are over all slices; Phase.RoundCyclesPerSec has each one.
	Rounds int
	// Concurrency is the number of closed-loop workers (default 256); with
	// Rate it bounds the operations in flight.
	Concurrency int
	// Rate, if positive, switches to an open loop: operations start at this
	// fixed rate (per second) and latency is measured from each scheduled
	// start, so a slow target cannot hide latency (no coordinated
	// omission). Arrivals finding Concurrency operations in flight are
	// dropped and counted in Phase.Missed.
	Rate float64
	// Keys is the key space size; small means contention (default
	// DefaultKeys, or DefaultContendedKeys for WorkloadContended).
	Keys int
	// TTL of each lock (default 30s).
	TTL time.Duration
	// Hold is how long a worker holds each lock before releasing it.
	Hold time.Duration
	// Names name the engine's settings in its errors (engine.Config.Names):
	// the CLI names its flags.
	Names engine.Names
	// MasterTimeout is the engine's per-master timeout (0: the engine's
	// default, max(5ms, min(50ms, ttl/100)); with embedded masters, which
	// are far slower than redis-server, embeddedMasterTimeout).
	MasterTimeout time.Duration
	// MergeMax is the engine's Config.MergeMax: releases (and extensions)
	// for one master merged into one script call when queued for the same
	// write (0: the engine's default; negative: never merge).
	MergeMax int
	// ConnsPerMaster is the engine's connections per master, or the number
	// of connections to the proxy (default 1).
	ConnsPerMaster int
	// Compare lists peers measured after the target on the same masters
	// (PeerRedsync, PeerRueidis, PeerFencing, PeerNoMerge; TargetEngine
	// too when Target is TargetProxy).
	Compare []string
	// Ceiling also measures the masters' own pipelined capacity.
	Ceiling bool
	// SweepVar, if set, repeats the run for each of SweepValues:
	// SweepConcurrency or SweepMasters (local masters started per point).
	SweepVar    string
	SweepValues []int
	// CPUProfile is the file the CPU profile of the target's measured
	// windows is written to ("" = none): every round and sweep point of
	// the target, merged; not the warm-ups, the peers, the ceiling or the
	// start of local masters. It is the whole process's CPU in those
	// windows (embedded masters included). With ReportDir set, it
	// defaults to ReportDir/cpu.pprof.
	CPUProfile string
	// MemProfile, MutexProfile and BlockProfile are files the heap profile
	// at the end of the run and the mutex and block profiles of the whole
	// run are written to ("" = none).
	MemProfile, MutexProfile, BlockProfile string
	// PprofAddr, if set, serves net/http/pprof on this address during the run.
	PprofAddr string
	// MetricsAddr, if set, serves the engine target's Prometheus metrics
	// at http://MetricsAddr/metrics during the run (package metrics).
	MetricsAddr string
	metrics     *metrics.Metrics // set by Run from MetricsAddr
	cpu         *cpuProfile      // set by Run from CPUProfile
	probe       *probe           // set by runOnce: the processes whose CPU and syscalls a phase reads
	// ReportDir, if set, receives index.html, result.json and the profiles.
	ReportDir string
	// Progress, if set, receives one line per second.
	Progress io.Writer
	// Notice receives one-off notices (embedded masters, pprof address);
	// default io.Discard.
	Notice io.Writer
	// Args is the command line, recorded in the report (optional).
	Args []string
}

func (c Config) withDefaults() (Config, error) {
	if c.N == 0 {
		c.N = DefaultMasters
	}
	if c.Target == "" {
		c.Target = TargetEngine
	}
	if c.Workload == "" {
		c.Workload = WorkloadCycle
	}
	if c.Rounds == 0 {
		c.Rounds = 1
	}
	if c.Duration == 0 {
		c.Duration = DefaultDuration
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.Keys == 0 {
		c.Keys = DefaultKeys
		if c.Workload == WorkloadContended {
			c.Keys = DefaultContendedKeys
		}
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.Notice == nil {
		c.Notice = io.Discard
	}
	if c.ReportDir != "" && c.CPUProfile == "" {
		c.CPUProfile = c.ReportDir + "/cpu.pprof"
	}
	bad := func(format string, a ...any) (Config, error) {
		return c, fmt.Errorf("%w: "+format, append([]any{ErrBadConfig}, a...)...)
	}
	switch {
	case c.N < 1 || c.N > 64:
		return bad("masters must be 1..64, got %d", c.N)
	case c.Target != TargetEngine && c.Target != TargetProxy:
		return bad("unknown target %q (known: %s, %s)", c.Target, TargetEngine, TargetProxy)
	case c.Target == TargetProxy && c.ProxyAddr == "":
		return bad("target %s needs a proxy address", TargetProxy)
	case c.Target != TargetProxy && c.ProxyAddr != "":
		return bad("a proxy address needs target %s", TargetProxy)
	case c.Target == TargetProxy && (c.Ceiling || len(c.Compare) > 0) && len(c.Masters) == 0:
		return bad("target %s with peers or ceiling needs the proxy's masters", TargetProxy)
	case c.Ceiling && members.HasCluster(c.Masters):
		return bad("the ceiling is measured on standalone masters, not on Redis Cluster members")
	case c.Target == TargetProxy && c.SweepVar == SweepMasters:
		return bad("cannot sweep masters behind a proxy")
	case c.Workload != WorkloadCycle && c.Workload != WorkloadAcquire && c.Workload != WorkloadContended && !isKind(c.Workload):
		return bad("unknown workload %q (known: %s, %s, %s, %s, %s, %s)", c.Workload, WorkloadCycle, WorkloadAcquire, WorkloadContended,
			WorkloadReentrant, WorkloadRW, WorkloadSemaphore)
	case isKind(c.Workload) && c.Target != TargetEngine:
		return bad("workload %s runs on target %s", c.Workload, TargetEngine)
	case c.Duration < 0:
		return bad("negative duration %v", c.Duration)
	case c.Warmup < 0:
		return bad("negative warmup %v", c.Warmup)
	case c.Rounds < 0:
		return bad("negative rounds %d", c.Rounds)
	case c.Rounds > 1 && c.Duration/time.Duration(c.Rounds) < 100*time.Millisecond:
		return bad("rounds %d leave slices shorter than 100ms of %v", c.Rounds, c.Duration)
	case c.Concurrency < 1 || c.Concurrency > 100_000:
		return bad("concurrency must be 1..100000, got %d", c.Concurrency)
	case c.Rate < 0 || c.Rate > 10_000_000:
		return bad("rate must be 0 (closed loop) or up to 10000000/s, got %g", c.Rate)
	case c.Keys < 1:
		return bad("keys must be positive, got %d", c.Keys)
	case c.TTL < time.Millisecond:
		return bad("ttl must be at least 1ms, got %v", c.TTL)
	case c.Hold < 0:
		return bad("negative hold %v", c.Hold)
	case c.Hold >= c.TTL:
		return bad("hold %v must be shorter than the ttl %v", c.Hold, c.TTL)
	case c.MasterTimeout < 0:
		return bad("master timeout must not be negative, got %v", c.MasterTimeout)
	case c.ConnsPerMaster < 0 || c.ConnsPerMaster > 64:
		return bad("conns per master must be 0..64, got %d", c.ConnsPerMaster)
	}
	seen := map[string]bool{}
	for _, p := range c.Compare {
		if isKind(c.Workload) != (p == PeerPlain) {
			return bad("peer %q with workload %s (a lock-kind workload compares with peer %s only)", p, c.Workload, PeerPlain)
		}
		ok := p == PeerRedsync || p == PeerRueidis || p == PeerFencing || p == PeerNoMerge || p == PeerPlain || (p == TargetEngine && c.Target == TargetProxy)
		if !ok {
			return bad("unknown peer %q (known: %s, %s, %s, %s; %s with target %s)", p, PeerRedsync, PeerRueidis, PeerFencing, PeerNoMerge, TargetEngine, TargetProxy)
		}
		if seen[p] {
			return bad("peer %q listed twice", p)
		}
		seen[p] = true
	}
	switch c.SweepVar {
	case "":
		if len(c.SweepValues) > 0 {
			return bad("sweep values without a sweep variable")
		}
	case SweepConcurrency, SweepMasters, SweepRate:
		if len(c.SweepValues) == 0 {
			return bad("sweep %s needs at least one value", c.SweepVar)
		}
		if c.SweepVar == SweepMasters && len(c.Masters) > 0 {
			return bad("sweep masters starts local masters: do not give masters")
		}
		for _, v := range c.SweepValues {
			if c.SweepVar == SweepConcurrency && (v < 1 || v > 100_000) {
				return bad("sweep concurrency values must be 1..100000, got %d", v)
			}
			if c.SweepVar == SweepMasters && (v < 1 || v > 64) {
				return bad("sweep masters values must be 1..64, got %d", v)
			}
			if c.SweepVar == SweepRate && (v < 1 || v > 10_000_000) {
				return bad("sweep rate values must be 1..10000000 ops/s, got %d", v)
			}
		}
	default:
		return bad("unknown sweep variable %q (known: %s, %s, %s)", c.SweepVar, SweepConcurrency, SweepMasters, SweepRate)
	}
	return c, nil
}

// ParseSweep parses a sweep specification "var=v1,v2,..." such as
// "concurrency=1,16,64" into its variable and values.
func ParseSweep(s string) (string, []int, error) {
	name, list, ok := strings.Cut(s, "=")
	if !ok || name == "" || list == "" {
		return "", nil, fmt.Errorf("%w: sweep %q: want var=v1,v2,... (var: %s, %s or %s)", ErrBadConfig, s, SweepConcurrency, SweepMasters, SweepRate)
	}
	if name != SweepConcurrency && name != SweepMasters && name != SweepRate {
		return "", nil, fmt.Errorf("%w: unknown sweep variable %q (known: %s, %s, %s)", ErrBadConfig, name, SweepConcurrency, SweepMasters, SweepRate)
	}
	var vals []int
	for _, f := range strings.Split(list, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 1 {
			return "", nil, fmt.Errorf("%w: sweep %s: bad value %q (want a positive integer)", ErrBadConfig, name, f)
		}
		vals = append(vals, v)
	}
	return name, vals, nil
}

// Result is one run's outcome. The flat fields describe the primary
// target; Peers and Ceiling hold the same-run comparisons. With a sweep,
// the flat fields, Peers and Ceiling describe the last point and Sweep
// holds every point.
type Result struct {
	Phase
	// Plan is set by the CLI's --plan (PlanFor of the target's phase).
	Plan    *Plan `json:"plan,omitempty"`
	Masters int   `json:"masters"`
	// MasterNodes is the servers whose CPU the masters' figures sum: the
	// masters, or every node of cluster members (cpuNodes).
	MasterNodes int   `json:"master_nodes"`
	MastersUp   int   `json:"masters_up"` // connected when the run started
	Concurrency int   `json:"concurrency"`
	Keys        int   `json:"keys"`
	TTLMillis   int64 `json:"ttl_ms"`
	// MasterTimeoutMillis is the engine's per-master timeout (engine
	// target; 0: not known): a master slower than it counts as failed.
	MasterTimeoutMillis float64      `json:"master_timeout_ms,omitempty"`
	HoldMillis          float64      `json:"hold_ms"`
	Workload            string       `json:"workload"`
	Rate                float64      `json:"rate,omitempty"`
	Embedded            bool         `json:"embedded_masters"`
	GOMAXPROCS          int          `json:"gomaxprocs"`
	Peers               []Phase      `json:"peers,omitempty"`
	Ceiling             *CeilingInfo `json:"ceiling,omitempty"`
	// CeilingFraction is the target's cycles/s over the ceiling's.
	CeilingFraction float64 `json:"ceiling_fraction,omitempty"`
	// Sweep holds the points of a sweep, in order.
	Sweep *SweepResult `json:"sweep,omitempty"`
	// Interrupted is set when the context ended the run early.
	Interrupted bool `json:"interrupted"`
	// Env describes the machine and versions.
	Env Env `json:"env"`
	// Profiles lists the profile files written; TopFlat and TopCum the
	// hottest functions of the CPU profile.
	Profiles []string   `json:"profiles,omitempty"`
	TopFlat  []FuncStat `json:"top_flat,omitempty"`
	TopCum   []FuncStat `json:"top_cum,omitempty"`
}

// Phase is the measurement of one target.
type Phase struct {
	Target string `json:"target"`
	// CyclesPerSec counts completed operations of the workload (cycles;
	// acquisitions for WorkloadAcquire) per second.
	CyclesPerSec float64 `json:"cycles_per_sec"`
	// AttemptsPerSec counts acquire attempts, refused ones included.
	AttemptsPerSec float64 `json:"attempts_per_sec"`
	AcquireP50     float64 `json:"acquire_p50_us"`
	AcquireP99     float64 `json:"acquire_p99_us"`
	// WaitP50 and WaitP99 are, when the target waited for its locks
	// (WorkloadContended with a blocking lock call), the time from a
	// worker's first attempt to its grant; CyclesPerSec then counts
	// hand-offs (grants) per second.
	WaitP50        float64 `json:"wait_p50_us,omitempty"`
	WaitP99        float64 `json:"wait_p99_us,omitempty"`
	Waited         bool    `json:"waited,omitempty"`
	CycleP50       float64 `json:"cycle_p50_us"`
	CycleP99       float64 `json:"cycle_p99_us"`
	Acquired       uint64  `json:"acquired"`
	FailedAcquires uint64  `json:"failed_acquires"`
	Errors         uint64  `json:"errors"`
	// Missed counts open-loop arrivals dropped because Concurrency
	// operations were in flight (the target could not keep up).
	Missed uint64 `json:"missed"`
	// ClientCPUPerCycle is the bench process's CPU time (user + system)
	// in the measured window divided by the cycles: the client's cost of
	// one cycle, steadier than throughput on a shared host. It includes
	// the masters when they are embedded.
	ClientCPUPerCycle float64 `json:"client_cpu_us_per_cycle,omitempty"`
	// ClientSyscallsPerCycle is the bench process's read and write
	// syscalls per cycle (/proc/self/io; Linux).
	ClientSyscallsPerCycle float64 `json:"client_syscalls_per_cycle,omitempty"`
	// MasterCPUPerCycle is the masters' CPU time per cycle, all masters
	// together, from each master's INFO cpu (used_cpu_user + used_cpu_sys)
	// at the window's start and end: what a cycle costs the servers.
	MasterCPUPerCycle float64 `json:"masters_cpu_us_per_cycle,omitempty"`
	// MasterSyscallsPerCycle is the local masters' read and write syscalls
	// per cycle, all together (/proc/<pid>/io; masters the bench started).
	MasterSyscallsPerCycle float64 `json:"masters_syscalls_per_cycle,omitempty"`
	// ProxyCPUPerCycle is, with TargetProxy, the proxy process's CPU time
	// per cycle (its INFO cpu).
	ProxyCPUPerCycle float64 `json:"proxy_cpu_us_per_cycle,omitempty"`
	// RequestsPerWrite is the auto-pipelining batch size: commands sent to
	// the masters per write syscall in the measured window (engine target).
	RequestsPerWrite float64 `json:"requests_per_write,omitempty"`
	DurationS        float64 `json:"duration_s"`
	Acquire          Latency `json:"acquire"`
	Release          Latency `json:"release"`
	Cycle            Latency `json:"cycle"`
	// PerSecond is the number of completed cycles in each second.
	PerSecond []uint64 `json:"per_second"`
	// FirstError is the first non-contention error seen, if any.
	FirstError string `json:"first_error,omitempty"`
	// RoundCyclesPerSec has the cycles/s of each slice when Config.Rounds > 1.
	RoundCyclesPerSec []float64 `json:"round_cycles_per_sec,omitempty"`

	// Raw window totals, for combining slices.
	cycles, attempts, reqs, writes uint64
	cpu, elapsed                   time.Duration
	procs                          sample // the other processes' counters over the window (negative: unknown)
}

// pipeliner is implemented by lockers that can count their write batches.
type pipeliner interface {
	pipeline() (requests, writes uint64)
}

// locker is one implementation under test.
type locker interface {
	// acquire takes key once; contended reports a refusal (not an error).
	acquire(ctx context.Context, key string) (h any, contended bool, err error)
	release(ctx context.Context, h any) error
	close() error
}

// waiter is a locker with a blocking lock call: WorkloadContended then
// waits for each lock (the time from the first attempt to the grant is the
// acquire latency, reported as the wait) instead of counting refusals.
type waiter interface {
	wait(ctx context.Context, key string) (h any, err error)
}

// Run executes the benchmark described by cfg. When ctx ends early it
// stops and returns what was measured so far (Result.Interrupted set),
// still writing profiles and the report.
func Run(ctx context.Context, cfg Config) (res Result, err error) {
	cfg, err = cfg.withDefaults()
	if err != nil {
		return Result{}, err
	}
	prof, err := startProfiles(cfg)
	if err != nil {
		return Result{}, err
	}
	cfg.cpu = prof.cpu
	defer func() {
		files, top, perr := prof.stop()
		res.Profiles = files
		if top != nil {
			res.TopFlat, res.TopCum = top.Flat, top.Cum
		}
		if err == nil && perr != nil {
			err = perr
		}
		if err == nil && cfg.ReportDir != "" {
			err = WriteReport(cfg.ReportDir, res)
		}
	}()
	if cfg.MetricsAddr != "" {
		reg := metrics.NewRegistry()
		if cfg.metrics, err = metrics.New(reg); err != nil {
			return Result{}, err
		}
		mctx, cancel := context.WithCancel(ctx)
		defer cancel()
		addr, err := metrics.Serve(mctx, cfg.MetricsAddr, reg, nil) // the bench's engines come and go: no readiness
		if err != nil {
			return Result{}, fmt.Errorf("%w: metrics server: %w", ErrBadConfig, err)
		}
		fmt.Fprintf(cfg.Notice, "redlock: metrics at http://%s/metrics\n", addr)
	}
	if cfg.SweepVar != "" {
		return runSweep(ctx, cfg)
	}
	return runOnce(ctx, cfg)
}

// runOnce measures the target, the peers and the ceiling once.
func runOnce(ctx context.Context, cfg Config) (Result, error) {
	res := Result{
		Concurrency: cfg.Concurrency, Keys: cfg.Keys, TTLMillis: cfg.TTL.Milliseconds(),
		HoldMillis: float64(cfg.Hold) / 1e6, Workload: cfg.Workload, Rate: cfg.Rate,
		GOMAXPROCS: runtime.GOMAXPROCS(0), Env: captureEnv(cfg.Args),
	}
	addrs := cfg.Masters
	var set *localmaster.Set
	if len(addrs) == 0 && cfg.Target == TargetEngine {
		var err error
		set, err = localmaster.Start(ctx, localmaster.Options{N: cfg.N, Embedded: cfg.Embedded, RequireReal: cfg.RequireReal, Notice: cfg.Notice})
		if err != nil {
			return Result{}, fmt.Errorf("bench: start local masters: %w", err)
		}
		defer set.Close()
		addrs = set.Addrs()
		cfg.FreshMasters = true
		res.Embedded = set.Embedded()
		if res.Embedded && cfg.MasterTimeout == 0 {
			cfg.MasterTimeout = embeddedMasterTimeout
		}
	}
	cfg.probe = &probe{masters: cpuNodes(ctx, addrs, cfg.masterConn()), cc: cfg.masterConn()}
	if set != nil {
		for _, m := range set.Masters() {
			cfg.probe.pids = append(cfg.probe.pids, m.PID())
		}
	}
	if cfg.Target == TargetProxy {
		cfg.probe.proxy = cfg.ProxyAddr
	} else {
		res.MasterTimeoutMillis = float64(cfg.masterTimeout()) / 1e6
	}
	res.Masters, res.MasterNodes = len(addrs), len(cfg.probe.masters)
	if len(addrs) > 0 {
		up, err := probeMasters(ctx, addrs, cfg)
		if err != nil {
			return res, err
		}
		res.MastersUp = up
		res.Env.RedisVersion = redisVersion(ctx, addrs[0], cfg)
	}
	label := func(name string) string {
		switch cfg.SweepVar {
		case SweepConcurrency:
			return fmt.Sprintf("%s c=%d", name, cfg.Concurrency)
		case SweepMasters:
			return fmt.Sprintf("%s n=%d", name, len(addrs))
		}
		return name
	}

	targets := append([]string{cfg.Target}, cfg.Compare...)
	phases, err := runTargets(ctx, cfg, targets, addrs, label)
	if len(phases) > 0 {
		res.Phase, res.Peers = phases[0], phases[1:]
	}
	if err != nil {
		return res, err
	}
	if cfg.Ceiling && ctx.Err() == nil {
		c, err := measureCeiling(ctx, addrs, cfg)
		if err != nil {
			return res, err
		}
		res.Ceiling = &c
		if c.CyclesPerSec > 0 {
			res.CeilingFraction = res.CyclesPerSec / c.CyclesPerSec
		}
	}
	res.Interrupted = ctx.Err() != nil
	return res, nil
}

// runTargets measures each target, in cfg.Rounds alternating slices of
// cfg.Duration/cfg.Rounds, and returns one combined Phase per target. With
// one round each target's locker lives only for its own phase.
func runTargets(ctx context.Context, cfg Config, targets, addrs []string, label func(string) string) ([]Phase, error) {
	slice := cfg
	slice.Duration = cfg.Duration / time.Duration(cfg.Rounds)
	phases := make([]Phase, 0, len(targets))
	recs := make([]*recorder, len(targets))
	lockers := make([]locker, len(targets))
	defer func() {
		for _, l := range lockers {
			if l != nil {
				l.close()
			}
		}
	}()
	for round := 0; round < cfg.Rounds; round++ {
		for i, t := range targets {
			if ctx.Err() != nil {
				return phases, nil
			}
			if lockers[i] == nil {
				l, err := newLocker(ctx, t, addrs, cfg)
				if err != nil {
					return phases, err
				}
				lockers[i] = l
				recs[i] = newRecorder(min(cfg.Concurrency, 8*runtime.GOMAXPROCS(0)))
			}
			name := label(t)
			if cfg.Rounds > 1 {
				name = fmt.Sprintf("%s %d/%d", name, round+1, cfg.Rounds)
			}
			sl := slice
			if t != TargetProxy && cfg.probe != nil {
				pr := *cfg.probe
				pr.proxy = "" // the proxy's CPU counts on its own phase only
				sl.probe = &pr
			}
			p := runPhase(ctx, sl, name, lockers[i], recs[i], i == 0)
			p.Target = t
			if round == 0 {
				phases = append(phases, p)
			} else {
				phases[i] = combine(phases[i], p)
			}
			if cfg.Rounds > 1 {
				phases[i].RoundCyclesPerSec = append(phases[i].RoundCyclesPerSec, p.CyclesPerSec)
			}
			if cfg.Rounds == 1 {
				lockers[i].close()
				lockers[i] = nil
			}
		}
	}
	return phases, nil
}

func newLocker(ctx context.Context, target string, addrs []string, cfg Config) (locker, error) {
	switch target {
	case TargetEngine:
		l, err := newEngineLocker(ctx, addrs, cfg)
		if l != nil && isKind(cfg.Workload) {
			l.kind = cfg.Workload
		}
		return l, err
	case PeerPlain:
		return newEngineLocker(ctx, addrs, cfg)
	case PeerFencing:
		l, err := newEngineLocker(ctx, addrs, cfg)
		if l != nil {
			l.opts = []engine.Option{engine.WithFencing()}
		}
		return l, err
	case PeerNoMerge:
		// The single-key script baseline: no merging, and scripts also
		// on masters that have the native commands (conn.Native).
		cfg.MergeMax = -1
		cfg.MasterConn.DisableNative = true
		return newEngineLocker(ctx, addrs, cfg)
	case TargetProxy:
		return newProxyLocker(ctx, cfg)
	case PeerRedsync:
		return newRedsyncLocker(addrs, cfg), nil
	case PeerRueidis:
		return newRueidisLocker(addrs, cfg)
	}
	return nil, fmt.Errorf("%w: unknown target %q", ErrBadConfig, target)
}

// masterConn returns the connection settings for the masters (AUTH, TLS)
// with scripts to load.
// masterTimeout is the engine's per-master timeout for c.TTL: the
// engine's default when MasterTimeout is 0 (engine.Config.MasterTimeout).
func (c Config) masterTimeout() time.Duration {
	if c.MasterTimeout != 0 {
		return c.MasterTimeout
	}
	return max(engine.MinMasterTimeout, min(engine.MaxMasterTimeout, c.TTL/100))
}

func (c Config) masterConn(scripts ...*conn.Script) conn.Config {
	cc := c.MasterConn
	cc.Scripts = scripts
	return cc
}

// probeMasters connects to every master once before the run: a dial error
// shows at once (not after a wait), an unreachable master is reported on
// cfg.Notice, and the run is refused without a quorum or with one server
// listed under two addresses. It returns the masters connected.
func probeMasters(ctx context.Context, addrs []string, cfg Config) (int, error) {
	ec := engine.Config{Conn: cfg.masterConn(), FreshMasters: cfg.FreshMasters, MaxTTL: cfg.maxTTL(), Names: cfg.Names}
	if err := members.Apply(&ec, addrs); err != nil {
		return 0, fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	e, err := engine.New(ec)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	defer e.Close()
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := e.WaitReady(pctx)
	if errors.Is(err, engine.ErrDuplicateMaster) {
		return 0, fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	if err != nil {
		return 0, fmt.Errorf("bench: %w", err)
	}
	up := 0
	for _, m := range st {
		if m.Up {
			up++
		} else if cfg.Notice != nil {
			fmt.Fprintf(cfg.Notice, "bench: master %d unreachable: %v\n", m.Index, m.Err)
		}
	}
	return up, waitVoting(ctx, e, cfg.Notice)
}

// waitVoting waits until a quorum of e's masters votes when restart
// quarantine is what keeps it from voting — saying until when —, so that
// no round runs into it (the engine's would count 0 cycles and its ratio
// to a peer, which has no quarantine, would mean nothing). It returns at
// once when a quorum votes, and ctx's error if ctx ends first.
func waitVoting(ctx context.Context, e *engine.Engine, notice io.Writer) error {
	said := false
	for e.Voting() != nil {
		at, hint := e.QuarantineOutlook()
		if at.IsZero() {
			return nil // not quarantine: the run reports what it meets
		}
		if !said {
			said = true
			msg := fmt.Sprintf("bench: restart quarantine: a quorum of masters votes from %s (in %v); waiting, so that no round runs into it",
				at.Format(time.TimeOnly), time.Until(at).Round(100*time.Millisecond))
			if hint != "" {
				msg += " (" + hint + ")"
			}
			fmt.Fprintln(notice, msg)
		}
		t := time.NewTimer(max(time.Until(at), 10*time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// maxTTL is the engines' MaxTTL.
func (c Config) maxTTL() time.Duration {
	if c.MaxTTL > 0 {
		return c.MaxTTL
	}
	return max(c.TTL, engine.DefaultMaxTTL)
}

// phases returns the target's phase followed by the peers'.
func (r Result) phases() []Phase {
	return slices.Concat([]Phase{r.Phase}, r.Peers)
}
