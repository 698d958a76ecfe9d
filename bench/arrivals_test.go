package bench

import (
	"sync"
	"testing"
	"time"
)

func TestScheduleDue(t *testing.T) {
	s := newSchedule(10*time.Millisecond, 1000) // one per ms from 10ms
	tests := []struct {
		now  time.Duration
		want int64
	}{
		{0, 0},
		{10*time.Millisecond - 1, 0},
		{10 * time.Millisecond, 1},
		{10*time.Millisecond + 999*time.Microsecond, 1},
		{11 * time.Millisecond, 2},
		{1010 * time.Millisecond, 1001},
	}
	for _, tt := range tests {
		if got := s.due(tt.now); got != tt.want {
			t.Errorf("due(%v) = %d, want %d", tt.now, got, tt.want)
		}
	}
	if got := s.at(500); got != 510*time.Millisecond {
		t.Errorf("at(500) = %v", got)
	}
	// Non-integral interval (3 per ms): due never counts an arrival
	// scheduled after now.
	s = newSchedule(0, 3000)
	for ns := time.Duration(0); ns < 5*time.Millisecond; ns += 7919 {
		n := s.due(ns)
		if s.at(n-1) > ns || s.at(n) <= ns {
			t.Fatalf("due(%v) = %d: at(n-1)=%v at(n)=%v", ns, n, s.at(n-1), s.at(n))
		}
	}
}

// TestLimiterAccuracy runs the limiter in real time with instant workers
// and checks the number and spacing of dispatched arrivals.
func TestLimiterAccuracy(t *testing.T) {
	for _, rate := range []float64{200, 5000, 50_000} {
		t.Run(time.Duration(1e9/rate).String(), func(t *testing.T) {
			base := time.Now()
			now := func() time.Duration { return time.Since(base) }
			l := newLimiter(newSchedule(0, rate), 64)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var scheds []time.Duration
			var lateMax time.Duration
			wg.Go(func() {
				for s := range l.jobs {
					scheds = append(scheds, s)
					lateMax = max(lateMax, now()-s)
					l.done()
				}
			})
			wg.Go(func() { l.run(stop, now) })
			const run = 500 * time.Millisecond
			time.Sleep(run)
			close(stop)
			wg.Wait()
			got := float64(len(scheds)) + float64(l.missed.Load())
			want := rate * run.Seconds()
			if !within(got, want, 0.10) {
				t.Errorf("arrivals = %.0f, want %.0f ±10%%", got, want)
			}
			// Scheduled times are exact and strictly spaced by the interval.
			for i := 1; i < len(scheds); i++ {
				d := scheds[i] - scheds[i-1]
				if l.missed.Load() == 0 && (d < time.Duration(1e9/rate)-time.Microsecond || d > time.Duration(1e9/rate)+time.Microsecond) {
					t.Fatalf("arrival %d spaced %v, want %v", i, d, time.Duration(1e9/rate))
				}
			}
			if uint64(len(scheds)) != l.sent.Load() {
				t.Errorf("sent = %d, received %d", l.sent.Load(), len(scheds))
			}
			t.Logf("rate %.0f/s: %d dispatched, %d missed, worst dispatch lag %v", rate, len(scheds), l.missed.Load(), lateMax)
		})
	}
}

// TestLimiterBoundsInFlight: with no operation completing, exactly
// maxInFlight arrivals are dispatched and the rest are counted as missed.
func TestLimiterBoundsInFlight(t *testing.T) {
	base := time.Now()
	now := func() time.Duration { return time.Since(base) }
	l := newLimiter(newSchedule(0, 10_000), 8)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); l.run(stop, now) }()
	// Stop once ~1000 arrivals were dispatched or counted missed, not after
	// a fixed 100 ms: on a loaded host the limiter's goroutine may have run
	// a few times only by then (it once had dispatched 2).
	for deadline := time.Now().Add(10 * time.Second); l.sent.Load()+l.missed.Load() < 1000 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	close(stop)
	<-done
	if l.sent.Load() != 8 {
		t.Fatalf("sent = %d, want 8 (the in-flight cap)", l.sent.Load())
	}
	if m := l.missed.Load(); m < 500 {
		t.Fatalf("missed = %d, want most of ~1000 arrivals", m)
	}
	n := 0
	for range l.jobs {
		n++
	}
	if n != 8 {
		t.Fatalf("jobs queued = %d", n)
	}
}
