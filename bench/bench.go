package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/redlock-dev/redlock/internal/localmaster"
)

// Defaults of [Config]; a zero field selects them.
const (
	DefaultMasters     = 5
	DefaultDuration    = 10 * time.Second
	DefaultConcurrency = 256
	DefaultKeys        = 100_000
	DefaultTTL         = 30 * time.Second
)

// Targets and peers.
const (
	TargetEngine = "engine"  // the embedded engine (this module)
	PeerRedsync  = "redsync" // go-redsync/redsync v4 over go-redis v9
)

// ErrBadConfig is matched by errors for invalid [Config] values.
var ErrBadConfig = errors.New("bench: invalid config")

// Config describes one benchmark run.
type Config struct {
	// Masters are existing masters (host:port). Empty: start N local ones.
	Masters []string
	// N is the number of local masters to start (default 5).
	N int
	// Embedded forces embedded in-process masters even if redis-server exists.
	Embedded bool
	// RequireReal fails instead of falling back to embedded masters.
	RequireReal bool
	// Duration of each measured phase (default 10s).
	Duration time.Duration
	// Concurrency is the number of closed-loop workers (default 256).
	Concurrency int
	// Keys is the key space size; small means contention (default 100000).
	Keys int
	// TTL of each lock (default 30s).
	TTL time.Duration
	// Hold is how long a worker holds each lock before releasing it.
	Hold time.Duration
	// ConnsPerMaster is the engine's connections per master (default 1).
	ConnsPerMaster int
	// Compare lists peers measured after the engine on the same masters
	// (PeerRedsync).
	Compare []string
	// Ceiling also measures the masters' own pipelined capacity.
	Ceiling bool
	// Progress, if set, receives one line per second.
	Progress io.Writer
	// Notice receives one-off notices (embedded masters); default io.Discard.
	Notice io.Writer
}

func (c Config) withDefaults() (Config, error) {
	if c.N == 0 {
		c.N = DefaultMasters
	}
	if c.Duration == 0 {
		c.Duration = DefaultDuration
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.Keys == 0 {
		c.Keys = DefaultKeys
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.Notice == nil {
		c.Notice = io.Discard
	}
	switch {
	case c.N < 1 || c.N > 64:
		return c, fmt.Errorf("%w: masters must be 1..64, got %d", ErrBadConfig, c.N)
	case c.Duration < 0:
		return c, fmt.Errorf("%w: negative duration", ErrBadConfig)
	case c.Concurrency < 1 || c.Concurrency > 100_000:
		return c, fmt.Errorf("%w: concurrency must be 1..100000, got %d", ErrBadConfig, c.Concurrency)
	case c.Keys < 1:
		return c, fmt.Errorf("%w: keys must be positive, got %d", ErrBadConfig, c.Keys)
	case c.TTL < time.Millisecond:
		return c, fmt.Errorf("%w: ttl must be at least 1ms, got %v", ErrBadConfig, c.TTL)
	case c.Hold < 0:
		return c, fmt.Errorf("%w: negative hold", ErrBadConfig)
	case c.ConnsPerMaster < 0:
		return c, fmt.Errorf("%w: negative conns per master", ErrBadConfig)
	}
	for _, p := range c.Compare {
		if p != PeerRedsync {
			return c, fmt.Errorf("%w: unknown peer %q (known: %s)", ErrBadConfig, p, PeerRedsync)
		}
	}
	return c, nil
}

// Result is one run's outcome. The flat fields describe the primary
// target (the engine); Peers and Ceiling hold the same-run comparisons.
type Result struct {
	Phase
	Masters     int          `json:"masters"`
	Concurrency int          `json:"concurrency"`
	Keys        int          `json:"keys"`
	TTLMillis   int64        `json:"ttl_ms"`
	Embedded    bool         `json:"embedded_masters"`
	GOMAXPROCS  int          `json:"gomaxprocs"`
	Peers       []Phase      `json:"peers,omitempty"`
	Ceiling     *CeilingInfo `json:"ceiling,omitempty"`
	// CeilingFraction is the engine's cycles/s over the ceiling's.
	CeilingFraction float64 `json:"ceiling_fraction,omitempty"`
}

// Phase is the measurement of one target.
type Phase struct {
	Target         string  `json:"target"`
	CyclesPerSec   float64 `json:"cycles_per_sec"`
	AcquireP50     float64 `json:"acquire_p50_us"`
	AcquireP99     float64 `json:"acquire_p99_us"`
	CycleP50       float64 `json:"cycle_p50_us"`
	CycleP99       float64 `json:"cycle_p99_us"`
	Acquired       uint64  `json:"acquired"`
	FailedAcquires uint64  `json:"failed_acquires"`
	Errors         uint64  `json:"errors"`
	DurationS      float64 `json:"duration_s"`
	Acquire        Latency `json:"acquire"`
	Release        Latency `json:"release"`
	Cycle          Latency `json:"cycle"`
	// PerSecond is the number of completed cycles in each second.
	PerSecond []uint64 `json:"per_second,omitempty"`
	// FirstError is the first non-contention error seen, if any.
	FirstError string `json:"first_error,omitempty"`
}

// locker is one implementation under test.
type locker interface {
	// acquire takes key once; contended reports a refusal (not an error).
	acquire(ctx context.Context, key string) (h any, contended bool, err error)
	release(ctx context.Context, h any) error
	close() error
}

// Run executes the benchmark described by cfg. When ctx ends early it
// stops and returns what was measured so far.
func Run(ctx context.Context, cfg Config) (Result, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return Result{}, err
	}
	addrs := cfg.Masters
	res := Result{Concurrency: cfg.Concurrency, Keys: cfg.Keys, TTLMillis: cfg.TTL.Milliseconds(), GOMAXPROCS: runtime.GOMAXPROCS(0)}
	if len(addrs) == 0 {
		set, err := localmaster.Start(ctx, localmaster.Options{N: cfg.N, Embedded: cfg.Embedded, RequireReal: cfg.RequireReal, Notice: cfg.Notice})
		if err != nil {
			return Result{}, fmt.Errorf("bench: start local masters: %w", err)
		}
		defer set.Close()
		addrs = set.Addrs()
		res.Embedded = set.Embedded()
	}
	res.Masters = len(addrs)
	keys := makeKeys(cfg.Keys)

	eng, err := newEngineLocker(ctx, addrs, cfg)
	if err != nil {
		return Result{}, err
	}
	res.Phase = runPhase(ctx, cfg, TargetEngine, eng, keys)
	eng.close()

	for _, p := range cfg.Compare {
		if ctx.Err() != nil {
			break
		}
		switch p {
		case PeerRedsync:
			rs := newRedsyncLocker(addrs, cfg)
			res.Peers = append(res.Peers, runPhase(ctx, cfg, PeerRedsync, rs, keys))
			rs.close()
		}
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
	return res, nil
}

func makeKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "redlock:bench:" + strconv.Itoa(i)
	}
	return keys
}

// worker holds one closed-loop worker's private histograms and counters.
type worker struct {
	acq, rel, cyc *hdr.Histogram
	failed, errs  uint64
	firstErr      error
}

// runPhase drives l with cfg.Concurrency workers for cfg.Duration.
func runPhase(ctx context.Context, cfg Config, name string, l locker, keys []string) Phase {
	var stop atomic.Bool
	var cycles, acquired atomic.Uint64
	workers := make([]*worker, cfg.Concurrency)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range workers {
		w := &worker{acq: newHist(), rel: newHist(), cyc: newHist()}
		workers[i] = w
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), uint64(start.UnixNano())))
			for !stop.Load() && ctx.Err() == nil {
				key := keys[rng.IntN(len(keys))]
				t0 := time.Now()
				h, contended, err := l.acquire(ctx, key)
				t1 := time.Now()
				if err != nil || contended {
					if ctx.Err() != nil {
						return
					}
					if contended {
						w.failed++
					} else {
						w.errs++
						if w.firstErr == nil {
							w.firstErr = err
						}
					}
					continue
				}
				acquired.Add(1)
				record(w.acq, t1.Sub(t0))
				if cfg.Hold > 0 {
					time.Sleep(cfg.Hold)
				}
				if err := l.release(ctx, h); err != nil {
					if ctx.Err() != nil {
						return
					}
					w.errs++
					if w.firstErr == nil {
						w.firstErr = err
					}
					continue
				}
				t2 := time.Now()
				record(w.rel, t2.Sub(t1))
				record(w.cyc, t2.Sub(t0))
				cycles.Add(1)
			}
		}()
	}

	perSecond := progressLoop(ctx, cfg, name, start, &cycles)
	stop.Store(true)
	wg.Wait()
	elapsed := time.Since(start)

	acq, rel, cyc := newHist(), newHist(), newHist()
	p := Phase{Target: name, Acquired: acquired.Load(), PerSecond: perSecond, DurationS: elapsed.Seconds()}
	for _, w := range workers {
		acq.Merge(w.acq)
		rel.Merge(w.rel)
		cyc.Merge(w.cyc)
		p.FailedAcquires += w.failed
		p.Errors += w.errs
		if w.firstErr != nil && p.FirstError == "" {
			p.FirstError = w.firstErr.Error()
		}
	}
	p.Acquire, p.Release, p.Cycle = summarize(acq), summarize(rel), summarize(cyc)
	p.CyclesPerSec = float64(cycles.Load()) / elapsed.Seconds()
	p.AcquireP50, p.AcquireP99 = p.Acquire.P50, p.Acquire.P99
	p.CycleP50, p.CycleP99 = p.Cycle.P50, p.Cycle.P99
	return p
}

// progressLoop waits for the phase to end, printing one line per second,
// and returns cycles completed in each whole second.
func progressLoop(ctx context.Context, cfg Config, name string, start time.Time, cycles *atomic.Uint64) []uint64 {
	end := time.NewTimer(cfg.Duration)
	defer end.Stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var perSecond []uint64
	var last uint64
	for {
		select {
		case <-ctx.Done():
			return perSecond
		case <-end.C:
			return perSecond
		case <-tick.C:
			now := cycles.Load()
			perSecond = append(perSecond, now-last)
			last = now
			if cfg.Progress != nil {
				fmt.Fprintf(cfg.Progress, "%-8s %5.0fs  %8d cycles/s  %10d total\n",
					name, time.Since(start).Seconds(), perSecond[len(perSecond)-1], now)
			}
		}
	}
}
