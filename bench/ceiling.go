package bench

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/resp"
)

// ceilingWindow is the minimum number of SET+release pairs each master
// has in flight while the ceiling is measured; the window is
// max(ceilingWindow, Config.Concurrency), so the masters see at least the
// pipeline depth the measured target gave them.
const ceilingWindow = 256

// CeilingInfo is the masters' own capacity for the work of one lock cycle:
// a SET NX PX and a compare-and-delete EVALSHA on the same key, pipelined
// max(ceilingWindow, Config.Concurrency) deep on every master at once.
type CeilingInfo struct {
	// CyclesPerSec is the pairs per second of the quorum-th fastest
	// master (the 3rd of 5): a Redlock client needs a quorum of masters
	// for every cycle, so it cannot complete more cycles than that.
	CyclesPerSec float64 `json:"cycles_per_sec"`
	// SlowestPerSec is the slowest master's pairs per second: the bound
	// when every master must keep up (the engine sends to all of them).
	SlowestPerSec float64 `json:"slowest_per_sec"`
	// PerMaster lists each master's pairs per second.
	PerMaster []float64 `json:"per_master"`
	Window    int       `json:"window"`
	Errors    uint64    `json:"errors"`
	DurationS float64   `json:"duration_s"`
	// ClientCPUPerPair and MasterCPUPerPair are the pumps' (this
	// process's) and the masters' CPU per SET NX PX + release pair, µs
	// (the masters' together divided by the pairs of one master: per
	// cycle of N masters, comparable with Phase.MasterCPUPerCycle).
	ClientCPUPerPair float64 `json:"client_cpu_us_per_pair,omitempty"`
	MasterCPUPerPair float64 `json:"masters_cpu_us_per_pair,omitempty"`
}

// pump keeps the window's pairs in flight on one connection: each
// completed release enqueues the next pair.
type pump struct {
	c      *conn.Conn
	stop   *atomic.Bool
	ttl    string
	pairs  atomic.Uint64
	errs   atomic.Uint64
	wg     sync.WaitGroup
	mu     sync.Mutex // guards buf and rng
	buf    []byte
	rng    *rand.Rand
	nkeys  int
	prefix string
}

const (
	tagSet = iota
	tagRelease
)

func (p *pump) send() {
	p.mu.Lock()
	key := p.prefix + strconv.Itoa(p.rng.IntN(p.nkeys))
	p.buf = resp.AppendCommandStrings(p.buf[:0], "SET", key, "ceiling-token", "NX", "PX", p.ttl)
	dl := time.Now().Add(5 * time.Second) // bounds the wait if a master stalls
	err := p.c.Do(conn.Request{Cmd: p.buf, Deadline: dl, Callback: p, Tag: tagSet})
	if err == nil {
		p.buf = scripts.Release.AppendEvalSha(p.buf[:0], 1, 1)
		p.buf = resp.AppendBulkString(p.buf, key)
		p.buf = resp.AppendBulkString(p.buf, "ceiling-token")
		err = p.c.Do(conn.Request{Cmd: p.buf, Deadline: dl, Callback: p, Tag: tagRelease, Script: scripts.Release})
	}
	p.mu.Unlock()
	if err != nil {
		p.errs.Add(1)
		p.wg.Done()
	}
}

// Complete implements conn.Callback.
func (p *pump) Complete(tag uint64, r resp.Reply, err error) {
	if err != nil || r.IsError() {
		p.errs.Add(1)
	}
	if tag != tagRelease {
		return
	}
	if err == nil {
		p.pairs.Add(1)
	}
	if p.stop.Load() {
		p.wg.Done()
		return
	}
	p.send()
}

func measureCeiling(ctx context.Context, addrs []string, cfg Config) (CeilingInfo, error) {
	var stop atomic.Bool
	pumps := make([]*pump, len(addrs))
	for i, a := range addrs {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		c, err := conn.Dial(dctx, a, cfg.masterConn(scripts.Release))
		cancel()
		if err != nil {
			for _, p := range pumps[:i] {
				p.c.Close()
			}
			return CeilingInfo{}, fmt.Errorf("bench: ceiling: %w", err)
		}
		pumps[i] = &pump{c: c, stop: &stop, ttl: strconv.FormatInt(cfg.TTL.Milliseconds(), 10),
			rng: rand.New(rand.NewPCG(uint64(i), 7)), nkeys: cfg.Keys, prefix: "redlock:ceiling:"}
	}
	window := max(ceilingWindow, cfg.Concurrency)
	procs0, cpu0 := cfg.probe.read(ctx), processCPU()
	start := time.Now()
	for _, p := range pumps {
		for range window {
			p.wg.Add(1)
			p.send()
		}
	}
	var cycles atomic.Uint64
	done := make(chan struct{})
	go func() { // mirror the slowest master into the progress counter
		defer close(done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for !stop.Load() {
			<-t.C
			slowest := pumps[0].pairs.Load()
			for _, p := range pumps[1:] {
				slowest = min(slowest, p.pairs.Load())
			}
			cycles.Store(slowest)
		}
	}()
	ceilingWait(ctx, cfg, start, &cycles)
	elapsed := time.Since(start)
	info := CeilingInfo{Window: window, DurationS: elapsed.Seconds()}
	counts := make([]uint64, len(pumps))
	for i, p := range pumps {
		counts[i] = p.pairs.Load()
	}
	cpu := processCPU() - cpu0
	stop.Store(true)
	<-done
	var total uint64
	for _, n := range counts {
		total += n
	}
	if perMaster := float64(total) / float64(len(counts)); perMaster > 0 {
		info.ClientCPUPerPair = math.Round(float64(cpu.Microseconds())/perMaster*100) / 100
		if d := cfg.probe.read(ctx).minus(procs0); d.masterCPU >= 0 {
			info.MasterCPUPerPair = math.Round(float64(d.masterCPU.Microseconds())/perMaster*100) / 100
		}
	}
	for i, p := range pumps {
		p.wg.Wait()
		p.c.Close()
		rate := float64(counts[i]) / elapsed.Seconds()
		info.PerMaster = append(info.PerMaster, rate)
		if i == 0 || rate < info.SlowestPerSec {
			info.SlowestPerSec = rate
		}
		info.Errors += p.errs.Load()
	}
	sorted := slices.Sorted(slices.Values(info.PerMaster))
	q := len(sorted)/2 + 1
	info.CyclesPerSec = sorted[len(sorted)-q] // the q-th fastest
	return info, nil
}

// ceilingWait waits cfg.Duration (or until ctx ends), printing one line
// per second with the slowest master's pairs per second.
func ceilingWait(ctx context.Context, cfg Config, start time.Time, cycles *atomic.Uint64) {
	end := time.NewTimer(cfg.Duration)
	defer end.Stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var last uint64
	for {
		select {
		case <-ctx.Done():
			return
		case <-end.C:
			return
		case <-tick.C:
			now := cycles.Load()
			if cfg.Progress != nil {
				fmt.Fprintf(cfg.Progress, "%-14s %4.0fs  %8d pairs/s (slowest master)  %10d total\n",
					"ceiling", time.Since(start).Seconds(), now-last, now)
			}
			last = now
		}
	}
}
