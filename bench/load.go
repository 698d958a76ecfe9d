package bench

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

func makeKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "redlock:bench:" + strconv.Itoa(i)
	}
	return keys
}

// phaseState is what the workers of one phase share.
type phaseState struct {
	cfg  Config
	l    locker
	keys []string
	base time.Time // all times are durations since base (monotonic)
	// the measured window [winStart, winEnd]: operations completing inside
	// it (in an open loop: also scheduled inside it) are counted and recorded.
	winStart, winEnd atomic.Int64
	rec              *recorder
	open             bool   // open loop: latency from the scheduled start
	acqPrefix        string // unique-key prefix of WorkloadAcquire
	waiter           waiter // WorkloadContended with a blocking lock: wait, don't poll

	counts     []opCounts // sharded by worker: see opCounts
	errs       atomic.Uint64
	windowOpen counters    // when the measured window opened
	procsOpen  sample      // the other processes' counters then
	cpu        *cpuProfile // profiles the window (the target's phase), or nil
	firstErr   atomic.Pointer[string]
}

func (s *phaseState) now() time.Duration { return time.Since(s.base) }

func (s *phaseState) inWindow(t time.Duration) bool {
	return int64(t) >= s.winStart.Load() && int64(t) <= s.winEnd.Load()
}

func (s *phaseState) fail(err error) {
	msg := err.Error()
	s.firstErr.CompareAndSwap(nil, &msg)
	s.errs.Add(1)
}

// opCounts is one shard of a phase's operation counts. Each worker adds
// to its shard's: a thousand workers adding to one counter bounced its
// cache line between the cores three times an operation (the bench's own
// cost, which counts in the client's CPU per cycle).
type opCounts struct {
	cycles, attempts, acquired, failed atomic.Uint64
	_                                  [64]byte // keep neighbouring shards apart
}

// total sums one counter over the shards.
func (s *phaseState) total(f func(*opCounts) *atomic.Uint64) uint64 {
	var n uint64
	for i := range s.counts {
		n += f(&s.counts[i]).Load()
	}
	return n
}

func cyclesOf(c *opCounts) *atomic.Uint64   { return &c.cycles }
func attemptsOf(c *opCounts) *atomic.Uint64 { return &c.attempts }
func acquiredOf(c *opCounts) *atomic.Uint64 { return &c.acquired }
func failedOf(c *opCounts) *atomic.Uint64   { return &c.failed }

// workerState is one worker's private state.
type workerState struct {
	id  int
	rng *rand.Rand
	sh  *shard
	n   *opCounts // the worker's shard of the phase's counts
	seq uint64
	// WorkloadAcquire's keys: the worker's prefix and seq, built in kb (one
	// allocation per key, the string the engine keeps)
	acqPrefix string
	kb        []byte
}

// op runs one operation of the workload. ref is the time latency is
// measured from: the actual start (closed loop) or the scheduled start
// (open loop).
func (s *phaseState) op(ctx context.Context, w *workerState, ref time.Duration) {
	var key string
	if s.cfg.Workload == WorkloadAcquire {
		w.seq++
		w.kb = strconv.AppendUint(append(w.kb[:0], w.acqPrefix...), w.seq, 10)
		key = string(w.kb)
	} else {
		key = s.keys[w.rng.IntN(len(s.keys))]
	}
	var h any
	var contended bool
	var err error
	if s.waiter != nil {
		h, err = s.waiter.wait(ctx, key)
	} else {
		h, contended, err = s.l.acquire(ctx, key)
	}
	t1 := s.now()
	// Open loop: an arrival scheduled during the warm-up is warm-up work,
	// even when a stalled host makes it complete inside the window (it
	// would inflate the measured rate by the backlog).
	warm := s.open && int64(ref) < s.winStart.Load()
	in := !warm && s.inWindow(t1)
	if in {
		w.n.attempts.Add(1)
	}
	if err != nil || contended {
		if ctx.Err() != nil || !in {
			return
		}
		if contended {
			w.n.failed.Add(1)
		} else {
			s.fail(err)
		}
		return
	}
	if in {
		w.n.acquired.Add(1)
	}
	if s.cfg.Workload == WorkloadAcquire {
		if in {
			w.n.cycles.Add(1)
			w.sh.record(t1-ref, -1, t1-ref)
		}
		return
	}
	if s.cfg.Hold > 0 {
		time.Sleep(s.cfg.Hold)
	}
	t2 := s.now()
	// Release even when ctx ended, so no lock is left behind. Every
	// target bounds its own release (engine: per-master deadlines; go-redis:
	// read timeouts; proxy target: proxyCallTimeout), so no timer is armed
	// here: a context.WithTimeout per release cost ~10% of the engine
	// phase's CPU.
	err = s.l.release(context.WithoutCancel(ctx), h)
	t3 := s.now()
	if warm || !s.inWindow(t3) {
		return
	}
	if err != nil {
		s.fail(err)
		return
	}
	w.n.cycles.Add(1)
	w.sh.record(t1-ref, t3-t2, t3-ref)
}

// runPhase drives l for cfg.Warmup plus cfg.Duration, with cfg.Concurrency
// closed-loop workers or, when cfg.Rate is set, an open loop at that rate
// with at most cfg.Concurrency operations in flight.
// Latencies are recorded into rec, which may hold earlier slices of the
// same target: the returned latency summaries cover all of them. With
// profile (the target's phase), cfg's CPU profile covers the measured
// window.
func runPhase(ctx context.Context, cfg Config, name string, l locker, rec *recorder, profile bool) Phase {
	var procs0 sample
	if cfg.Warmup == 0 {
		// The servers' counters before any load: reading them takes a few
		// ms, before the phase's clock starts.
		procs0 = cfg.probe.read(ctx)
	}
	s := &phaseState{cfg: cfg, l: l, base: time.Now(), open: cfg.Rate > 0, rec: rec, procsOpen: procs0}
	if profile {
		s.cpu = cfg.cpu
	}
	s.counts = make([]opCounts, len(rec.shards))
	s.acqPrefix = fmt.Sprintf("redlock:bench:acq:%s:%d:", name, s.base.UnixNano())
	if cfg.Workload != WorkloadAcquire {
		s.keys = makeKeys(cfg.Keys)
	}
	if w, ok := l.(waiter); ok && cfg.Workload == WorkloadContended {
		s.waiter = w
	}
	s.winStart.Store(int64(cfg.Warmup))
	s.winEnd.Store(math.MaxInt64)

	stop := make(chan struct{})
	var stopped atomic.Bool
	var wg sync.WaitGroup
	var lim *limiter
	if s.open {
		lim = newLimiter(newSchedule(0, cfg.Rate), cfg.Concurrency)
		wg.Go(func() { lim.run(stop, s.now) })
	}
	seed := uint64(s.base.UnixNano())
	// Waiting workers are woken at the end: a lock call may wait long
	// (redsync: up to 32 tries 50–250 ms apart).
	cancels := make([]context.CancelFunc, cfg.Concurrency)
	wctxs := make([]context.Context, cfg.Concurrency)
	for i := range cfg.Concurrency {
		w := &workerState{id: i, rng: rand.New(rand.NewPCG(uint64(i), seed)), sh: s.rec.shard(i), n: &s.counts[i%len(s.counts)], acqPrefix: s.acqPrefix + strconv.Itoa(i) + ":"}
		wctxs[i], cancels[i] = context.WithCancel(ctx)
		wg.Go(func() {
			// Each worker waits on its own context, as each request of a
			// server would: hundreds of goroutines selecting on one shared
			// Done channel contend on that channel's lock (measured: ~9% of
			// the engine phase's CPU).
			ctx := wctxs[i]
			defer cancels[i]()
			if lim != nil {
				for sched := range lim.jobs {
					if !stopped.Load() {
						s.op(ctx, w, sched)
					}
					lim.done()
				}
				return
			}
			for !stopped.Load() && ctx.Err() == nil {
				s.op(ctx, w, s.now())
			}
		})
	}

	if cfg.Warmup == 0 {
		s.openWindow(ctx)
	}
	perSecond := s.progress(ctx, name)
	end := s.now()
	s.cpu.pause()
	window := s.counters().since(s.windowOpen)
	s.winEnd.Store(int64(end))
	// After the window closed: reading the servers takes a few ms, and
	// cycles completing meanwhile must not count.
	procs := cfg.probe.read(ctx).minus(s.procsOpen)
	stopped.Store(true)
	close(stop)
	if s.waiter != nil {
		for _, cancel := range cancels {
			cancel()
		}
	}
	wg.Wait()

	p := Phase{Target: name, PerSecond: perSecond}
	acq, rel, cyc := s.rec.merged()
	p.Acquire, p.Release, p.Cycle = summarize(acq), summarize(rel), summarize(cyc)
	p.Waited = s.waiter != nil
	p.Acquired, p.FailedAcquires, p.Errors = s.total(acquiredOf), s.total(failedOf), s.errs.Load()
	if e := s.firstErr.Load(); e != nil {
		p.FirstError = *e
	}
	if lim != nil {
		p.Missed = lim.missed.Load()
	}
	p.cycles, p.attempts, p.reqs, p.writes = s.total(cyclesOf), s.total(attemptsOf), window.reqs, window.writes
	p.cpu, p.elapsed = window.cpu, max(end-cfg.Warmup, 0)
	p.procs = procs
	p.derive()
	return p
}

// derive computes p's rates and ratios from its raw totals and latency
// summaries.
func (p *Phase) derive() {
	p.DurationS = p.elapsed.Seconds()
	if p.elapsed > 0 {
		p.CyclesPerSec = float64(p.cycles) / p.elapsed.Seconds()
		p.AttemptsPerSec = float64(p.attempts) / p.elapsed.Seconds()
	}
	if p.writes > 0 {
		p.RequestsPerWrite = math.Round(float64(p.reqs)/float64(p.writes)*10) / 10
	}
	if p.cycles > 0 {
		p.ClientCPUPerCycle = math.Round(float64(p.cpu.Microseconds())/float64(p.cycles)*100) / 100
	}
	p.perCycle()
	p.AcquireP50, p.AcquireP99 = p.Acquire.P50, p.Acquire.P99
	if p.Waited {
		p.WaitP50, p.WaitP99 = p.Acquire.P50, p.Acquire.P99
	}
	p.CycleP50, p.CycleP99 = p.Cycle.P50, p.Cycle.P99
}

// combine adds the slice next to the target's phase so far, acc. next's
// latency summaries already cover every slice (they share a recorder).
func combine(acc, next Phase) Phase {
	next.PerSecond = append(acc.PerSecond, next.PerSecond...)
	next.Acquired += acc.Acquired
	next.FailedAcquires += acc.FailedAcquires
	next.Errors += acc.Errors
	next.Missed += acc.Missed
	if acc.FirstError != "" {
		next.FirstError = acc.FirstError
	}
	next.cycles += acc.cycles
	next.attempts += acc.attempts
	next.reqs += acc.reqs
	next.writes += acc.writes
	next.cpu += acc.cpu
	next.elapsed += acc.elapsed
	next.procs = next.procs.plus(acc.procs)
	next.RoundCyclesPerSec = acc.RoundCyclesPerSec
	next.derive()
	return next
}

// counters are the process's CPU time and the locker's pipeline counts
// (zero when it has none) at one moment.
type counters struct {
	cpu          time.Duration
	reqs, writes uint64
}

func (s *phaseState) counters() counters {
	c := counters{cpu: processCPU()}
	if pl, ok := s.l.(pipeliner); ok {
		c.reqs, c.writes = pl.pipeline()
	}
	return c
}

// openWindow records the counters when the measured window opens, and
// starts its CPU profile.
func (s *phaseState) openWindow(ctx context.Context) {
	if s.cfg.Warmup > 0 { // else read before the workers started
		s.procsOpen = s.cfg.probe.read(ctx)
	}
	s.windowOpen = s.counters()
	s.cpu.resume()
}

// since returns the counts from start to c.
func (c counters) since(start counters) counters {
	return counters{cpu: c.cpu - start.cpu, reqs: c.reqs - start.reqs, writes: c.writes - start.writes}
}

// progress waits for the warm-up and the measured phase to end (or ctx),
// printing one line per second of the measured phase, and returns the
// cycles completed in each whole second.
func (s *phaseState) progress(ctx context.Context, name string) []uint64 {
	cfg := s.cfg
	if cfg.Warmup > 0 {
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "%-14s warming up for %v\n", name, cfg.Warmup)
		}
		t := time.NewTimer(cfg.Warmup - s.now())
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		s.openWindow(ctx)
	}
	end := time.NewTimer(cfg.Warmup + cfg.Duration - s.now())
	defer end.Stop()
	// One sample (and progress line) per second of the measured window,
	// counted from its start: this loop may begin late on a busy host.
	next := time.Second
	tick := time.NewTimer(cfg.Warmup + next - s.now())
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
			now := s.total(cyclesOf)
			perSecond = append(perSecond, now-last)
			last = now
			if cfg.Progress != nil {
				fmt.Fprintf(cfg.Progress, "%-14s %4.0fs  %8d ops/s  p99 %7dµs  %10d total\n",
					name, (s.now() - cfg.Warmup).Seconds(), perSecond[len(perSecond)-1], s.rec.cycleP99(), now)
			}
			next += time.Second
			tick.Reset(cfg.Warmup + next - s.now())
		}
	}
}
