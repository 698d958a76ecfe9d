package respserver

// What the server's state looks like from outside: for tests of the
// rooms that drive it through clients, and for operators (INFO).

// MemCharged returns the bytes charged to Config.MaxClientMemory now.
func (s *Server) MemCharged() int64 { return s.mem.Load() }

// Channels returns the number of channels with a subscriber.
func (s *Server) Channels() int { return s.hub.Channels() }

// Conns returns the number of client connections registered (open, or
// ending).
func (s *Server) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// ConnState is one client connection's state at a moment.
type ConnState struct {
	ID         int64
	OnLoop     bool  // served by an event loop (not by goroutines)
	Held       int64 // bytes of unanswered requests and unwritten replies
	Unwritten  int64 // replies queued for the writer and not yet written
	Subscribed bool  // it subscribed at least once
	// LoopBuffers is what a loop's connection keeps in its input and
	// output buffers. It is read without the loop's lock: exact only
	// while the loop is idle.
	LoopBuffers int64
}

// ConnStates returns the state of every client connection. Subscribed
// and LoopBuffers are read without the reader's or the loop's
// synchronisation: call it only while the connections are idle (a test's
// quiet moment, or to log a stuck one).
func (s *Server) ConnStates() []ConnState {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ConnState, 0, len(s.conns))
	for c := range s.conns {
		st := ConnState{ID: c.id, OnLoop: c.nc == nil, Held: c.held.Load(), Unwritten: c.unwritten.Load(), Subscribed: c.sub != nil}
		if st.OnLoop {
			st.LoopBuffers = int64(cap(c.ls.in))
			if c.ls.out != nil {
				st.LoopBuffers += int64(cap(c.ls.out.B))
			}
		}
		out = append(out, st)
	}
	return out
}

// ServerCommands returns the server's own commands (connection plumbing
// and pub/sub), which every Server serves beside its handler's.
func ServerCommands() []Command {
	out := make([]Command, len(serverCommands))
	for i, c := range serverCommands {
		out[i] = *c
	}
	return out
}

// Wakeups returns the messages delivered to subscribers, and those lost
// to a full queue or the memory budget (INFO: wakeups_sent,
// wakeups_dropped).
func (s *Server) Wakeups() (sent, dropped uint64) { return s.wakesSent.Load(), s.wakeDropped.Load() }
