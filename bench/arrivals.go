package bench

import (
	"sync/atomic"
	"time"
)

// schedule is the fixed-rate arrival plan of an open-loop run: arrival i
// is due at start + i/rate. Times are durations since the phase's base
// time (monotonic).
type schedule struct {
	start    time.Duration
	interval float64 // nanoseconds between arrivals
}

func newSchedule(start time.Duration, rate float64) schedule {
	return schedule{start: start, interval: 1e9 / rate}
}

// at returns the scheduled start of arrival i.
func (s schedule) at(i int64) time.Duration {
	return s.start + time.Duration(float64(i)*s.interval)
}

// due returns the number of arrivals scheduled at or before now.
func (s schedule) due(now time.Duration) int64 {
	if now < s.start {
		return 0
	}
	n := int64(float64(now-s.start)/s.interval) + 1
	for n > 0 && s.at(n-1) > now { // float rounding
		n--
	}
	for s.at(n) <= now {
		n++
	}
	return n
}

// limiter dispatches the arrivals of a schedule to workers, at most
// maxInFlight at a time; arrivals finding maxInFlight operations in flight
// are dropped and counted (the target cannot keep up with the rate).
type limiter struct {
	sched       schedule
	maxInFlight int64
	inFlight    atomic.Int64
	missed      atomic.Uint64
	sent        atomic.Uint64
	jobs        chan time.Duration // scheduled start of each dispatched arrival
}

func newLimiter(sched schedule, maxInFlight int) *limiter {
	return &limiter{sched: sched, maxInFlight: int64(maxInFlight), jobs: make(chan time.Duration, maxInFlight)}
}

// done is called by a worker when the operation of a job has finished.
func (l *limiter) done() { l.inFlight.Add(-1) }

// run dispatches arrivals until stop is closed, then closes jobs. now
// returns the current time since the base; it sleeps between batches, so
// at high rates arrivals go out in small bursts but each keeps its exact
// scheduled time.
func (l *limiter) run(stop <-chan struct{}, now func() time.Duration) {
	defer close(l.jobs)
	var next int64
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		n := l.sched.due(now())
		for ; next < n; next++ {
			if l.inFlight.Load() >= l.maxInFlight {
				l.missed.Add(1)
				continue
			}
			l.inFlight.Add(1)
			l.sent.Add(1)
			l.jobs <- l.sched.at(next) // never blocks: capacity is maxInFlight
		}
		wait := l.sched.at(next) - now()
		if wait < 0 {
			wait = 0
		}
		timer.Reset(wait)
		select {
		case <-stop:
			return
		case <-timer.C:
		}
	}
}
