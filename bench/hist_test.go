package bench

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
	"time"
)

// within reports whether got is within rel (relative) of want.
func within(got, want, rel float64) bool { return math.Abs(got-want) <= rel*want }

func TestSummarizeKnownDistributions(t *testing.T) {
	tests := []struct {
		name string
		gen  func(r *rand.Rand) time.Duration
		// exact quantile function of the distribution, in µs
		quantile func(q float64) float64
		tol      float64
	}{
		{"uniform 1..10000µs", func(r *rand.Rand) time.Duration { return time.Duration(1+r.IntN(10000)) * time.Microsecond },
			func(q float64) float64 { return q * 10000 }, 0.02},
		{"exponential mean 500µs", func(r *rand.Rand) time.Duration {
			return time.Duration(r.ExpFloat64() * 500 * float64(time.Microsecond))
		},
			func(q float64) float64 { return -math.Log(1-q) * 500 }, 0.05},
		{"constant 250µs", func(*rand.Rand) time.Duration { return 250 * time.Microsecond },
			func(float64) float64 { return 250 }, 0.001},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			h := newHist()
			for range 200_000 {
				record(h, tt.gen(r))
			}
			l := summarize(h)
			if l.Count != 200_000 {
				t.Fatalf("count = %d", l.Count)
			}
			for _, c := range []struct {
				name string
				got  float64
				q    float64
			}{{"p50", l.P50, 0.50}, {"p90", l.P90, 0.90}, {"p99", l.P99, 0.99}, {"p99.9", l.P999, 0.999}} {
				if want := tt.quantile(c.q); !within(c.got, want, tt.tol) {
					t.Errorf("%s = %.0fµs, want %.0fµs ±%.0f%%", c.name, c.got, want, 100*tt.tol)
				}
			}
			if !(l.P50 <= l.P90 && l.P90 <= l.P99 && l.P99 <= l.P999 && l.P999 <= l.Max) {
				t.Errorf("percentiles not ordered: %+v", l)
			}
		})
	}
}

func TestSummarizeExactSmallSet(t *testing.T) {
	// 1..100 ms: HDR with 3 significant digits is exact to 0.1%.
	h := newHist()
	var vals []float64
	for i := 100; i >= 1; i-- {
		record(h, time.Duration(i)*time.Millisecond)
		vals = append(vals, float64(i*1000))
	}
	sort.Float64s(vals)
	l := summarize(h)
	for _, c := range []struct {
		got, want float64
	}{{l.P50, 50_000}, {l.P90, 90_000}, {l.P99, 99_000}, {l.Max, 100_000}, {l.Mean, 50_500}} {
		if !within(c.got, c.want, 0.001) {
			t.Errorf("got %.0f, want %.0f", c.got, c.want)
		}
	}
}

func TestRecordClamps(t *testing.T) {
	h := newHist()
	record(h, 0)            // below 1µs counts as 1µs
	record(h, 2*time.Hour)  // above the range counts as the maximum
	record(h, -time.Second) // negative clock steps too
	if h.TotalCount() != 3 || h.Min() != 1 || h.Max() < histMaxUS*999/1000 {
		t.Fatalf("count=%d min=%d max=%d", h.TotalCount(), h.Min(), h.Max())
	}
	if l := summarize(newHist()); l != (Latency{}) {
		t.Fatalf("empty histogram summary = %+v", l)
	}
}

func TestRecorderMergesShards(t *testing.T) {
	r := newRecorder(4)
	for i := range 1000 {
		r.shard(i).record(time.Duration(i+1)*time.Microsecond, -1, time.Duration(2*(i+1))*time.Microsecond)
	}
	acq, rel, cyc := r.merged()
	if acq.TotalCount() != 1000 || rel.TotalCount() != 0 || cyc.TotalCount() != 1000 {
		t.Fatalf("counts acq=%d rel=%d cyc=%d", acq.TotalCount(), rel.TotalCount(), cyc.TotalCount())
	}
	if p := r.cycleP99(); !within(float64(p), 1980, 0.01) {
		t.Fatalf("cycle p99 = %d, want ~1980", p)
	}
	if m := acq.Max(); m != 1000 {
		t.Fatalf("acq max = %d", m)
	}
}
