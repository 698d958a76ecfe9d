package proxy

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/redlock-dev/redlock/engine"
)

// Stats are a [Server]'s own counters, since [New] (ConnectedClients: now):
// what INFO's clients and proxy sections report and `redlock proxy
// --metrics-addr` exports (metrics.ProxyStats has the same fields, so that
// cmd/redlock converts one into the other). The locks' counters are the
// engine's ([engine.Engine.Stats], and its Observer).
type Stats struct {
	ConnectedClients    int64  // client connections open
	AcceptedConnections uint64 // client connections accepted
	RejectedConnections uint64 // client connections refused at MaxClients
	Commands            uint64 // commands read
	// ProtocolErrors: requests that could not be parsed or broke a
	// request limit (MaxRequestBytes, MaxArgs, the unauthenticated
	// limits); the connection was closed. Memory refusals are not in it.
	ProtocolErrors uint64
	AuthFailures   uint64 // wrong passwords (AUTH, HELLO AUTH)
	// MemoryRefusals: requests refused because MaxClientMemory was
	// reached (while being read: the connection was then closed).
	MemoryRefusals  uint64
	PanicsRecovered uint64 // panics recovered while serving a connection
	// OverloadRefusals: pipelined commands answered -BUSY because they
	// would have waited longer than QueueTimeout for the masters.
	OverloadRefusals uint64
	// LoopClients: client connections on event loops now (of
	// ConnectedClients; the others are on goroutines).
	LoopClients int64
	// LoopMoves: connections an event loop handed to goroutines (a
	// subscription, a request larger than 16 KiB).
	LoopMoves uint64
}

// Stats returns the server's counters. Safe for concurrent use.
func (s *Server) Stats() Stats {
	st := s.rs.Stats()
	return Stats{
		ConnectedClients:    st.ConnectedClients,
		AcceptedConnections: st.AcceptedConnections,
		RejectedConnections: st.RejectedConnections,
		Commands:            st.Commands,
		ProtocolErrors:      st.ProtocolErrors,
		AuthFailures:        st.AuthFailures,
		MemoryRefusals:      st.MemoryRefusals,
		PanicsRecovered:     st.PanicsRecovered,
		OverloadRefusals:    st.OverloadRefusals,
		LoopClients:         st.LoopClients,
		LoopMoves:           st.LoopMoves,
	}
}

// lockCounts counts the lock events the proxy reports to the engine's
// Observer itself, exactly as it reports them: library scripts run as
// broadcasts (acquisitions, extensions), every release of a client's lock
// (the engine counts no attached lock's Unlock), and the locks lost to a
// failed client extension. INFO adds them to the engine's own counters
// ([engine.Stats]), so that each INFO lock counter and its /metrics series
// count the same events (docs/operations.md, Monitoring).
type lockCounts struct {
	acquired, taken, noQuorum atomic.Uint64
	extended, extendFailed    atomic.Uint64
	releases                  [4]atomic.Uint64 // by engine.ReleaseResult
	locksLost                 atomic.Uint64
}

// observeAcquire reports a library acquisition sent at t1 for ttl that
// ended with err (nil: acquired; ErrNotAcquired: taken; ErrUnavailable: no
// quorum; a context error), margin grants − quorum; and remembers a
// refusal of key with token, or forgets it at a grant (refusals).
func (s *Server) observeAcquire(key, token []byte, t1 time.Time, ttl time.Duration, err error, margin int) {
	if err == nil {
		s.refused.granted(key, token)
	} else {
		s.refused.refused(key, token)
	}
	ev := engine.AcquireEvent{Result: engine.AcquireTaken, Latency: time.Since(t1), Margin: margin, TTL: ttl}
	switch {
	case err == nil:
		ev.Result, ev.ValidityLeft = engine.AcquireGranted, ttl-ev.Latency-s.drift(ttl)
		s.locks.acquired.Add(1)
	case errors.Is(err, context.DeadlineExceeded):
		ev.Result = engine.AcquireTimeout
	case errors.Is(err, context.Canceled), errors.Is(err, engine.ErrClosed):
		ev.Result = engine.AcquireCancelled
	case errors.Is(err, engine.ErrUnavailable):
		ev.Result = engine.AcquireNoQuorum
		s.locks.noQuorum.Add(1)
	default:
		s.locks.taken.Add(1)
	}
	if s.obs != nil {
		s.obs.Acquire(ev)
	}
}

// observeExtend reports a library extension of key with token run as a
// broadcast: ok, or failed with err. A failed extension whose err matches
// ErrLockLost (a quorum answered no, or too few answered) ends the
// client's lock, as it ends an engine lock (Observer.Lost).
func (s *Server) observeExtend(key, token []byte, err error) {
	if err == nil {
		s.refused.granted(key, token)
		s.locks.extended.Add(1)
	} else {
		s.locks.extendFailed.Add(1)
	}
	if s.obs != nil {
		s.obs.Extend(err == nil, false)
	}
	if errors.Is(err, engine.ErrLockLost) {
		s.lockLost(err)
	}
}

// lockLost reports a client's lock ended by a failed extension.
func (s *Server) lockLost(err error) {
	s.locks.locksLost.Add(1)
	if s.obs != nil {
		s.obs.Lost(err)
	}
}

// observeRelease reports a client's release of key with token that ended
// with err: nil when a quorum deleted it; matching ErrUnavailable when too
// few masters answered; matching ErrLockLost when a quorum answered and
// fewer held it — a cleanup when this proxy refused that key and token, or
// released them, lately and has not granted them since (refusals: a
// client's second release of a value is not a lost lock), else a lost
// lock.
// Any other error (the client or the proxy went away) decided nothing and
// is not counted, as the engine counts its own Unlock.
func (s *Server) observeRelease(key, token []byte, err error) {
	var r engine.ReleaseResult
	switch {
	case err == nil:
		r = engine.ReleaseReleased
		s.refused.refused(key, token) // released: a repeat is no loss
	case errors.Is(err, engine.ErrUnavailable):
		r = engine.ReleaseUnavailable
	case !errors.Is(err, engine.ErrLockLost):
		return
	case s.refused.remembered(key, token):
		r = engine.ReleaseCleanup
	default:
		r = engine.ReleaseLost
	}
	s.locks.releases[r].Add(1)
	if s.obs != nil {
		s.obs.Release(r)
	}
}
