package proxy

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
	// ExpiredReplies: grants and extensions answered as expired — their
	// reply waited for the connection's earlier, slower replies past the
	// lock's validity (MsgExpired).
	ExpiredReplies uint64
}

// Stats returns the server's counters. Safe for concurrent use.
func (s *Server) Stats() Stats { return Stats(s.rs.Stats()) }
