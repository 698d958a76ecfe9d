package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redlock-dev/redlock/conn"
)

// MasterTimeout returns the per-master timeout of an operation on a lock
// of ttl: [Config.MasterTimeout] when set, else max(5ms, min(50ms,
// ttl/100)); for ttl ≤ 0 (reads, other commands) the 50ms cap.
func (e *Engine) MasterTimeout(ttl time.Duration) time.Duration {
	if ttl <= 0 {
		ttl = 100 * MaxMasterTimeout
	}
	return e.cfg.masterTimeout(ttl)
}

// Config returns the engine's configuration with every default filled in.
func (e *Engine) Config() Config {
	c := e.cfg
	c.Addrs = append([]string(nil), c.Addrs...)
	return c
}

// MasterStatus is one master's connection state, as [Engine.Probe] and
// [Engine.Status] report it.
type MasterStatus struct {
	Index int
	Addr  string
	Up    bool
	Info  conn.ServerInfo // identity of the server, when Up
	Err   error           // why it is down, when not Up (the dial error)
}

// Status returns every master's state now.
func (e *Engine) Status() []MasterStatus {
	out := make([]MasterStatus, e.n)
	for i, cs := range e.conns {
		out[i] = MasterStatus{Index: i, Addr: e.addrs[i], Up: cs[0].Connected(), Info: cs[0].Info()}
		if !out[i].Up {
			out[i].Err = cs[0].DownErr()
		}
	}
	return out
}

// Probe waits until every master's first connect attempt is over (or ctx
// ends) and returns their states. Its error matches [ErrDuplicateMaster]
// when two addresses reached the same server (the same run_id: it would
// vote twice; exact duplicate addresses are already refused by [New], but
// "localhost:6379" and "127.0.0.1:6379" only by asking the servers), or
// [ErrUnavailable] when fewer than a quorum are up. Call it at start-up to
// report every master's dial result and refuse to run on a bad topology.
func (e *Engine) Probe(ctx context.Context) ([]MasterStatus, error) {
	for _, cs := range e.conns {
		if err := cs[0].WaitFirstAttempt(ctx); err != nil && ctx.Err() != nil {
			break // the rest are reported as they are now
		}
	}
	if e.closed.Load() {
		return nil, ErrClosed
	}
	st := e.Status()
	seen := map[string]int{}
	up := 0
	for i, m := range st {
		if !m.Up {
			continue
		}
		up++
		if m.Info.RunID == "" {
			continue
		}
		if j, ok := seen[m.Info.RunID]; ok {
			return st, fmt.Errorf("%w: masters %d (%s) and %d (%s) are the same server (run_id %s)",
				ErrDuplicateMaster, j, e.addrs[j], i, e.addrs[i], m.Info.RunID)
		}
		seen[m.Info.RunID] = i
	}
	if up < e.q {
		var errs []error
		for _, m := range st {
			if !m.Up {
				errs = append(errs, m.Err)
			}
		}
		return st, fmt.Errorf("%w: %d/%d masters reachable, quorum %d: %w", ErrUnavailable, up, e.n, e.q, errors.Join(errs...))
	}
	return st, nil
}

// Log rate limit for master state changes: at most logBurst lines per
// master in each logWindow; the rest are counted and the count goes with
// the next line logged.
const (
	logBurst  = 5
	logWindow = 10 * time.Second
)

// masterLog is the log state of one master (guarded by Engine.logMu).
type masterLog struct {
	up         bool
	window     time.Time
	lines      int
	suppressed int
}

// watch is called by master i's connection on every state change: it logs
// the change (rate-limited per master) and logs losing and regaining the
// quorum (always).
func (e *Engine) watch(i int, sc conn.StateChange) {
	e.logMu.Lock()
	defer e.logMu.Unlock()
	m := &e.mlog[i]
	switch {
	case sc.Up && !m.up:
		e.upCount++
	case !sc.Up && m.up:
		e.upCount--
	}
	m.up = sc.Up
	log := e.cfg.Logger
	now := time.Now()
	if now.Sub(m.window) >= logWindow {
		m.window, m.lines = now, 0
	}
	if m.lines < logBurst {
		m.lines++
		attrs := []any{"master", i, "addr", sc.Addr}
		if m.suppressed > 0 {
			attrs = append(attrs, "suppressed_changes", m.suppressed)
			m.suppressed = 0
		}
		switch {
		case sc.Up && sc.Restarted:
			log.Warn("engine: master restarted (new run_id: it may have lost its keys)", append(attrs, "run_id", sc.Info.RunID, "uptime", sc.Info.Uptime)...)
		case sc.Up:
			log.Info("engine: master up", append(attrs, "run_id", sc.Info.RunID, "version", sc.Info.Version)...)
		default:
			log.Warn("engine: master down", append(attrs, "err", sc.Err)...)
		}
	} else {
		m.suppressed++
	}
	switch {
	case e.upCount >= e.q && e.quorumLost:
		e.quorumLost = false
		log.Info("engine: quorum regained", "up", e.upCount, "masters", e.n, "quorum", e.q)
	case e.upCount < e.q && !e.quorumLost && !sc.Up:
		e.quorumLost = true
		log.Error("engine: quorum lost: locks cannot be taken until masters come back", "up", e.upCount, "masters", e.n, "quorum", e.q)
	}
}
