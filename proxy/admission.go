package proxy

import (
	"fmt"
	"sync"
	"time"

	"github.com/tidwall/redcon"
)

// Admission: how many pooled asynchronous commands (pipelined clients'
// on goroutines, every command of an event loop's clients: pool.go,
// loop_linux.go) are on the masters at once, and what happens to the rest.
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

type admission struct {
	target time.Duration // latency above which the limit is cut
	budget time.Duration // Config.QueueTimeout
	max    float64

	mu       sync.Mutex
	limit    float64
	inflight int
	queue    []*call // waiting, oldest first (from head)
	head     int
	lastCut  time.Time
	winStart time.Time // the current rate window's
	winDone  int       // completions in it
	winSat   bool      // commands waited at every completion in it
	rate     float64   // completions per second of saturated windows (moving average)
	samples  int       // saturated windows in rate
}

func newAdmission(target, budget time.Duration, maxInFlight int) *admission {
	return &admission{target: target, budget: budget, max: float64(maxInFlight), limit: float64(min(maxInFlight, 64))}
}

// waiting is the number of queued commands (guarded by mu).
func (a *admission) waiting() int { return len(a.queue) - a.head }

// submit admits cl (holding a MaxInFlight slot), queues it, or refuses it.
func (s *Server) submit(cl *call) {
	a := s.adm
	now := time.Now()
	a.mu.Lock()
	if a.waiting() == 0 && float64(a.inflight) < a.limit {
		a.inflight++
		a.mu.Unlock()
		s.launch(cl, now)
		return
	}
	if w := a.waiting(); a.samples >= minRateSamples && a.rate > 0 {
		if wait := time.Duration(float64(w+1) / a.rate * float64(time.Second)); wait > a.budget {
			a.mu.Unlock()
			s.busy(cl, fmt.Sprintf("this request would wait about %v in the proxy's queue (%d ahead)", wait.Round(time.Millisecond), w))
			return
		}
	}
	a.queue = append(a.queue, cl)
	a.mu.Unlock()
}

// launch starts an admitted command — unless Close began: a command that
// waited here has not reached the masters, and does not after Close (as
// runOne's sends nothing once the server's context ended).
func (s *Server) launch(cl *call, now time.Time) {
	cl.a.started = now
	if err := s.baseCtx.Err(); err != nil {
		cl.a.cb, cl.a.run = nil, nil
		cl.a.c.completeCB(cl, fixed(s.engineErr(err)), nil)
		return
	}
	if cl.a.cb != nil {
		cl.a.c.startCB(cl)
		return
	}
	s.invoke(cl)
}

// admitted ends an admitted command that started at t: the limit learns
// from its latency, and the commands whose turn came start (or are
// refused, when they waited past the budget).
func (s *Server) admitted(started time.Time) {
	a := s.adm
	now := time.Now()
	lat := now.Sub(started)
	var run, late []*call
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
		cl := a.queue[a.head]
		a.queue[a.head] = nil
		a.head++
		if now.Sub(cl.a.arrived) > a.budget {
			late = append(late, cl)
			continue
		}
		a.inflight++
		run = append(run, cl)
	}
	if a.head > 1024 && a.head*2 > len(a.queue) {
		a.queue = append(a.queue[:0], a.queue[a.head:]...)
		a.head = 0
	}
	a.mu.Unlock()
	for _, cl := range late {
		s.busy(cl, fmt.Sprintf("this request waited %v in the proxy's queue", now.Sub(cl.a.arrived).Round(time.Millisecond)))
	}
	for _, cl := range run {
		s.launch(cl, now)
	}
}

// busy refuses cl, which did not reach the masters within
// Config.QueueTimeout.
func (s *Server) busy(cl *call, why string) {
	s.overloaded.Add(1)
	s.logLimited("proxy: overloaded: a request was refused before reaching the masters", "why", why, "queue_timeout", s.cfg.QueueTimeout)
	msg := "BUSY redlock proxy: overloaded: " + why + ", longer than its queue timeout " + s.cfg.QueueTimeout.String() + "; the masters were not asked: retry later"
	cl.a.cb, cl.a.run = nil, nil
	cl.a.c.completeCB(cl, fixed(redcon.AppendError(nil, msg)), nil)
}
