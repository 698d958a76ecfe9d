package proxy

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/proxy/internal/respserver"
)

// commands is the lock commands' part of the server's command table (the
// server room adds connection plumbing and pub/sub).
func (s *Server) commands() []*respserver.Command {
	return []*respserver.Command{
		// Lock commands (lockcmds.go).
		{Name: "set", Arity: -3, First: 1, Last: 1, Step: 1, Flags: []string{"write"}, Run: s.cmdSet},
		{Name: "setnx", Arity: 3, First: 1, Last: 1, Step: 1, Flags: []string{"write"}, Run: func(*client, [][]byte) *call { return respserver.ErrCall(msgSetNoTTL) }},
		{Name: "get", Arity: 2, First: 1, Last: 1, Step: 1, Flags: []string{"readonly"}, Run: s.cmdGet},
		{Name: "pttl", Arity: 2, First: 1, Last: 1, Step: 1, Flags: []string{"readonly"}, Run: s.cmdPTTL},
		{Name: "ttl", Arity: 2, First: 1, Last: 1, Step: 1, Flags: []string{"readonly"}, Run: s.cmdTTL},
		{Name: "exists", Arity: -2, First: 1, Last: -1, Step: 1, Flags: []string{"readonly"}, Run: s.cmdCountKeys},
		{Name: "del", Arity: -2, First: 1, Last: -1, Step: 1, Flags: []string{"write"}, Run: s.cmdCountKeys},
		{Name: "delex", Arity: -2, First: 1, Last: 1, Step: 1, Flags: []string{"write", "fast"}, Run: s.cmdDelIfEq},
		{Name: "delifeq", Arity: 3, First: 1, Last: 1, Step: 1, Flags: []string{"write", "fast"}, Run: s.cmdDelIfEq},
		{Name: "hexists", Arity: 3, First: 1, Last: 1, Step: 1, Flags: []string{"readonly", "fast"}, Run: s.cmdHExists},
		{Name: "hget", Arity: 3, First: 1, Last: 1, Step: 1, Flags: []string{"readonly", "fast"}, Run: s.cmdHGet},
		{Name: "redlock.lock", Arity: 4, First: 1, Last: 1, Step: 1, Flags: []string{"write"}, Run: s.cmdRedlockLock},
		{Name: "pexpire", Arity: 3, First: 1, Last: 1, Step: 1, Flags: []string{"write"}, Run: s.cmdPExpire},
		{Name: "eval", Arity: -3, Flags: []string{"noscript", "movablekeys"}, Run: s.cmdEval},
		{Name: "evalsha", Arity: -3, Flags: []string{"noscript", "movablekeys"}, Run: s.cmdEval},
		{Name: "script", Arity: -2, Flags: []string{"noscript"}, Run: s.cmdScript},
		// Opted-in passthrough only (passthrough.go).
		{Name: "fcall", Arity: -3, Flags: []string{"noscript", "movablekeys"}, Run: s.cmdFcall},
		{Name: "fcall_ro", Arity: -3, Flags: []string{"noscript", "movablekeys"}, Run: s.cmdFcall},
	}
}

func init() {
	// The lock commands' names, options and subcommands: compared
	// without an allocation (respserver.Lower).
	respserver.Intern("set", "setnx", "get", "pttl", "ttl", "exists", "del", "delex", "delifeq", "hexists", "hget",
		"redlock.lock", "pexpire", "eval", "evalsha", "script", "fcall", "fcall_ro",
		"nx", "px", "ex", "ifeq", "load", "flush", "sync", "async")
}

// info appends the lock commands' INFO lines: the lock counters and the
// drift allowance to the proxy section, and the masters section.
func (s *Server) info(b []byte, section string) []byte {
	switch section {
	case "proxy":
		// The lock counters are the engine's plus the events the proxy
		// reports itself (lockCounts): those the engine's Observer is
		// told of.
		st, lc := s.eng.Stats(), &s.locks
		b = fmt.Appendf(b, "allow_scripts:%d\r\nallow_tokenless_writes:%d\r\n", b2i(s.cfg.AllowScripts), b2i(s.cfg.AllowTokenlessWrites))
		b = fmt.Appendf(b, "acquisitions_acquired:%d\r\nacquisitions_taken:%d\r\nacquisitions_no_quorum:%d\r\nextensions_extended:%d\r\nextensions_failed:%d\r\n",
			st.Acquired+lc.acquired.Load(), st.Failed+lc.taken.Load(), st.Unavailable+lc.noQuorum.Load(),
			st.Extended+lc.extended.Load(), st.ExtendFailed+lc.extendFailed.Load())
		b = fmt.Appendf(b, "releases_released:%d\r\nreleases_lost:%d\r\nreleases_cleanup:%d\r\nreleases_unavailable:%d\r\nlocks_lost:%d\r\nquorum:%d\r\n",
			st.Released+lc.releases[engine.ReleaseReleased].Load(), st.Lost+lc.releases[engine.ReleaseLost].Load(),
			lc.releases[engine.ReleaseCleanup].Load(), st.ReleaseUnavailable+lc.releases[engine.ReleaseUnavailable].Load(),
			st.LocksLost+lc.locksLost.Load(), s.eng.Quorum())
		// The drift allowance (ttl·factor + min) that a lock's validity
		// leaves out: `redlock lock --proxy` computes its validity with it.
		ec := s.eng.Config()
		b = fmt.Appendf(b, "drift_factor:%s\r\ndrift_min_us:%d\r\n",
			strconv.FormatFloat(ec.DriftFactor, 'g', -1, 64), ec.DriftMin.Microseconds())
	case "masters":
		st := s.eng.Stats()
		b = append(b, "# Masters\r\n"...)
		up, quarantined := 0, 0
		for i, m := range s.eng.Status() {
			state := "down"
			if m.Up {
				state = "up"
				up++
			}
			q := "0"
			if until := st.QuarantinedUntil[i]; !until.IsZero() {
				q = fmt.Sprintf("%.3fs", time.Until(until).Seconds()) // time left
				quarantined++
			}
			b = fmt.Appendf(b, "master%d:addr=%s,state=%s,run_id=%s,version=%s,errors=%d,quarantine_left=%s,native=%s\r\n",
				i, m.Addr, state, m.Info.RunID, m.Info.Version, st.MasterErrors[i], q, nativeOf(m.Info))
		}
		b = fmt.Appendf(b, "masters_up:%d\r\nmasters_total:%d\r\nmasters_quarantined:%d\r\n", up, len(s.eng.Masters()), quarantined)
	}
	return b
}

// nativeOf names the native commands a master's connection found at its
// latest connect (conn.ServerInfo): "DELEX+SETIFEQ", "SETIFEQ", "none".
func nativeOf(in conn.ServerInfo) string {
	var parts []string
	if in.DeleteIfEqual != "" {
		parts = append(parts, in.DeleteIfEqual)
	}
	if in.SetIfEqual {
		parts = append(parts, "SETIFEQ")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "+")
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
