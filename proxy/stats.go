package proxy

import (
	"context"
	"errors"
	"sync/atomic"

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
}

// Stats returns the server's counters. Safe for concurrent use.
func (s *Server) Stats() Stats {
	return Stats{
		ConnectedClients:    s.clients.Load(),
		AcceptedConnections: s.accepted.Load(),
		RejectedConnections: s.rejected.Load(),
		Commands:            s.commands.Load(),
		ProtocolErrors:      s.protoErrors.Load(),
		AuthFailures:        s.authFailures.Load(),
		MemoryRefusals:      s.memRefused.Load(),
		PanicsRecovered:     s.panics.Load(),
	}
}

// libCounts counts the lock operations the proxy runs itself as
// broadcasts (library scripts the engine has no call for: several keys,
// their own reply contracts), exactly as it reports them to the engine's
// Observer (observeLib): INFO adds them to the engine's counters, so that
// INFO's locks_* and /metrics count the same events.
type libCounts struct {
	acquired, taken, released, lost, extended, extendFailed atomic.Uint64
}

// add counts one operation op that ended with err, classified as
// observeLib reports it.
func (lc *libCounts) add(op scriptOp, err error) {
	switch op {
	case opAcquire:
		switch {
		case err == nil:
			lc.acquired.Add(1)
		case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
			errors.Is(err, engine.ErrClosed), errors.Is(err, engine.ErrUnavailable):
			// timeout, cancelled, no_quorum: not in INFO, as the engine's
		default:
			lc.taken.Add(1)
		}
	case opExtend:
		if err == nil {
			lc.extended.Add(1)
		} else {
			lc.extendFailed.Add(1)
		}
	case opRelease:
		if err == nil {
			lc.released.Add(1)
		} else {
			lc.lost.Add(1)
		}
	}
}
