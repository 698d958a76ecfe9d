package respserver

import (
	"fmt"
	"sync"
	"time"
)

// Admission: how many pooled asynchronous commands (pipelined clients'
// on goroutines, every command of an event loop's clients: proxy's
// pool.go, loop_linux.go) are on the masters at once, and what happens to
// the rest. The proxy starts an admitted command, and answers a refused
// one -BUSY, itself; this is the decision.
//
// A command on the masters is judged by each master's answer within the
// per-master timeout, which starts at the fan-out. With more commands on
// the wire than the proxy can process within that timeout (thousands
// pipelined, or a host whose CPU is taken by others), every one of them
// ages past it while its answers wait to be read, and every one fails
// ("master i: timed out") although the masters answered in time: the
// proxy collapses instead of degrading. So the commands on the masters
// are limited, adaptively, and the others wait here, where waiting costs
// no master timeout:
//
//   - the limit grows while commands complete within half the per-master
//     timeout (target), and is cut by a quarter, at most once per target,
//     when one takes longer (AIMD, as TCP's congestion window);
//   - waiting commands start in arrival order as others complete;
//   - a command that would wait longer than Config.QueueTimeout — its
//     expected wait at arrival, or its actual wait when its turn comes —
//     is answered at once with -BUSY naming the proxy's queue; the
//     masters were not asked. The expected wait is the commands ahead
//     divided by the rate at which commands complete while some wait: a
//     measure of capacity (only 50ms windows in which the queue never
//     ran dry count), not of the load offered, so a burst after a quiet
//     spell is not refused for the quiet, and nothing is refused at
//     arrival before such windows were seen.
//
// The queue is bounded by MaxInFlight: every queued command holds one of
// its slots. Commands that run on the reader (direct) are bounded by the
// client count and not limited here.

// minAdmit is the least limit: the masters always see this much work.
const minAdmit = 16

// rateWindow is the period of the completion rate's samples; a command
// is refused at arrival only once minRateSamples saturated windows were
// seen.
const (
	rateWindow     = 50 * time.Millisecond
	minRateSamples = 2
)

// Admission is the adaptive limit above over commands of type T (the
// proxy's calls); arrived tells when a queued one arrived.
type Admission[T any] struct {
	target  time.Duration // latency above which the limit is cut
	budget  time.Duration // Config.QueueTimeout
	max     float64
	arrived func(T) time.Time

	mu       sync.Mutex
	limit    float64
	inflight int
	queue    []T // waiting, oldest first (from head)
	head     int
	lastCut  time.Time
	winStart time.Time // the current rate window's
	winDone  int       // completions in it
	winSat   bool      // commands waited at every completion in it
	rate     float64   // completions per second of saturated windows (moving average)
	samples  int       // saturated windows in rate
}

// NewAdmission returns an Admission whose latency target is target, whose
// queue timeout is budget, and whose limit is at most maxInFlight.
func NewAdmission[T any](target, budget time.Duration, maxInFlight int, arrived func(T) time.Time) *Admission[T] {
	return &Admission[T]{target: target, budget: budget, max: float64(maxInFlight), limit: float64(min(maxInFlight, 64)), arrived: arrived}
}

// waiting is the number of queued commands (guarded by mu).
func (a *Admission[T]) waiting() int { return len(a.queue) - a.head }

// Submit admits x (which holds a MaxInFlight slot: admit, the caller
// starts it), queues it (neither: a later Done returns it), or refuses it
// (refuse says why: the caller answers -BUSY).
func (a *Admission[T]) Submit(x T, now time.Time) (admit bool, refuse string) {
	a.mu.Lock()
	if a.waiting() == 0 && float64(a.inflight) < a.limit {
		a.inflight++
		a.mu.Unlock()
		return true, ""
	}
	if w := a.waiting(); a.samples >= minRateSamples && a.rate > 0 {
		if wait := time.Duration(float64(w+1) / a.rate * float64(time.Second)); wait > a.budget {
			a.mu.Unlock()
			return false, fmt.Sprintf("this request would wait about %v in the proxy's queue (%d ahead)", wait.Round(time.Millisecond), w)
		}
	}
	a.queue = append(a.queue, x)
	a.mu.Unlock()
	return false, ""
}

// Done ends an admitted command that started at started (now: its end):
// the limit learns from its latency, and it returns the queued commands
// whose turn came (run: admitted, the caller starts them) and those that
// waited past the budget (late: the caller refuses them).
func (a *Admission[T]) Done(started, now time.Time) (run, late []T) {
	lat := now.Sub(started)
	var zero T
	a.mu.Lock()
	a.inflight--
	if a.winStart.IsZero() || now.Sub(a.winStart) >= rateWindow {
		if !a.winStart.IsZero() && a.winSat {
			r := float64(a.winDone) / now.Sub(a.winStart).Seconds()
			if a.samples == 0 {
				a.rate = r
			} else {
				a.rate = 0.7*a.rate + 0.3*r
			}
			a.samples++
		}
		a.winStart, a.winDone, a.winSat = now, 0, true
	}
	a.winDone++
	if a.waiting() == 0 {
		a.winSat = false
	}
	switch {
	case lat > a.target:
		if now.Sub(a.lastCut) > a.target {
			a.limit = max(minAdmit, a.limit*0.75)
			a.lastCut = now
		}
	case a.waiting() > 0:
		a.limit = min(a.max, a.limit+4/a.limit)
	}
	for a.waiting() > 0 && float64(a.inflight) < a.limit {
		x := a.queue[a.head]
		a.queue[a.head] = zero
		a.head++
		if now.Sub(a.arrived(x)) > a.budget {
			late = append(late, x)
			continue
		}
		a.inflight++
		run = append(run, x)
	}
	if a.head > 1024 && a.head*2 > len(a.queue) {
		a.queue = append(a.queue[:0], a.queue[a.head:]...)
		a.head = 0
	}
	a.mu.Unlock()
	return run, late
}
