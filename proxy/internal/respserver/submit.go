package respserver

import (
	"fmt"
	"time"

	"github.com/tidwall/redcon"
)

// The admission of pooled asynchronous commands to the backends: the
// decision is Admission's (its doc says how the limit adapts);
// starting an admitted command and refusing one are here.

// callArrived is when a queued call arrived (the admission's clock).
func callArrived(cl *Call) time.Time { return cl.a.arrived }

// submit admits cl (holding a MaxInFlight slot), queues it, or refuses it.
func (s *Server) submit(cl *Call) {
	now := time.Now()
	admit, why := s.adm.Submit(cl, now)
	switch {
	case admit:
		s.launch(cl, now)
	case why != "":
		s.busy(cl, why)
	}
}

// launch starts an admitted command — unless Close began: a command that
// waited here has not reached the masters, and does not after Close (as
// runOne's sends nothing once the server's context ended).
func (s *Server) launch(cl *Call, now time.Time) {
	cl.a.started = now
	if err := s.baseCtx.Err(); err != nil {
		cl.a.drop()
		cl.a.c.completeCB(cl, Fixed(s.cfg.ClosedReply(err)), nil)
		return
	}
	if cl.a.cmd != nil {
		cl.a.c.startCB(cl)
		return
	}
	s.invoke(cl)
}

// admitted ends an admitted command that started at t: the limit learns
// from its latency, and the commands whose turn came start (or are
// refused, when they waited past the budget).
func (s *Server) admitted(started time.Time) {
	now := time.Now()
	run, late := s.adm.Done(started, now)
	for _, cl := range late {
		s.busy(cl, fmt.Sprintf("this request waited %v in the proxy's queue", now.Sub(cl.a.arrived).Round(time.Millisecond)))
	}
	for _, cl := range run {
		s.launch(cl, now)
	}
}

// busy refuses cl, which did not reach the masters within
// Config.QueueTimeout.
func (s *Server) busy(cl *Call, why string) {
	s.overloaded.Add(1)
	s.logLimited("proxy: overloaded: a request was refused before reaching the masters", "why", why, "queue_timeout", s.cfg.QueueTimeout)
	msg := "BUSY redlock proxy: overloaded: " + why + ", longer than its queue timeout " + s.cfg.QueueTimeout.String() + "; the masters were not asked: retry later"
	cl.a.drop()
	cl.a.c.completeCB(cl, Fixed(redcon.AppendError(nil, msg)), nil)
}
