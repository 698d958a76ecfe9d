package bench

import (
	"sync"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram range: microseconds from 1µs to 60s with 3 significant digits
// (values above are clamped to 60s).
const (
	histMinUS = 1
	histMaxUS = 60_000_000
	histSig   = 3
)

// newHist returns a histogram of microseconds from 1µs to 60s, 3 digits.
func newHist() *hdr.Histogram { return hdr.New(histMinUS, histMaxUS, histSig) }

func record(h *hdr.Histogram, d time.Duration) {
	us := d.Microseconds()
	if us < 1 {
		us = 1
	}
	_ = h.RecordValue(min(us, h.HighestTrackableValue()))
}

// Latency summarises one histogram, in microseconds.
type Latency struct {
	Count int64   `json:"count"`
	P50   float64 `json:"p50_us"`
	P90   float64 `json:"p90_us"`
	P99   float64 `json:"p99_us"`
	P999  float64 `json:"p999_us"`
	Max   float64 `json:"max_us"`
	Mean  float64 `json:"mean_us"`
}

func summarize(h *hdr.Histogram) Latency {
	if h.TotalCount() == 0 {
		return Latency{}
	}
	return Latency{
		Count: h.TotalCount(),
		P50:   float64(h.ValueAtQuantile(50)),
		P90:   float64(h.ValueAtQuantile(90)),
		P99:   float64(h.ValueAtQuantile(99)),
		P999:  float64(h.ValueAtQuantile(99.9)),
		Max:   float64(h.Max()),
		Mean:  h.Mean(),
	}
}

// shard is one lock-protected set of histograms. Workers record into the
// shard of their index modulo the shard count, so the progress loop can
// read percentiles while the run goes on at little contention.
type shard struct {
	mu            sync.Mutex // guards the histograms
	acq, rel, cyc *hdr.Histogram
	_             [64]byte // keep neighbouring shards' mutexes apart
}

// recorder is the sharded histograms of one phase.
type recorder struct{ shards []*shard }

func newRecorder(n int) *recorder {
	r := &recorder{shards: make([]*shard, n)}
	for i := range r.shards {
		r.shards[i] = &shard{acq: newHist(), rel: newHist(), cyc: newHist()}
	}
	return r
}

func (r *recorder) shard(i int) *shard { return r.shards[i%len(r.shards)] }

// record adds one operation's latencies; a negative duration is skipped.
func (s *shard) record(acq, rel, cyc time.Duration) {
	s.mu.Lock()
	if acq >= 0 {
		record(s.acq, acq)
	}
	if rel >= 0 {
		record(s.rel, rel)
	}
	if cyc >= 0 {
		record(s.cyc, cyc)
	}
	s.mu.Unlock()
}

// merged returns the union of all shards' histograms.
func (r *recorder) merged() (acq, rel, cyc *hdr.Histogram) {
	acq, rel, cyc = newHist(), newHist(), newHist()
	for _, s := range r.shards {
		s.mu.Lock()
		acq.Merge(s.acq)
		rel.Merge(s.rel)
		cyc.Merge(s.cyc)
		s.mu.Unlock()
	}
	return acq, rel, cyc
}

// cycleP99 returns the p99 of full operations so far, in microseconds.
func (r *recorder) cycleP99() int64 {
	h := newHist()
	for _, s := range r.shards {
		s.mu.Lock()
		h.Merge(s.cyc)
		s.mu.Unlock()
	}
	return h.ValueAtQuantile(99)
}
