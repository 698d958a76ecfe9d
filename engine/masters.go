package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redlock-dev/redlock/conn"
)

// Config returns the engine's configuration with every default filled in.
func (e *Engine) Config() Config {
	c := e.cfg
	c.Addrs = append([]string(nil), c.Addrs...)
	c.Clusters = append([]ClusterMember(nil), c.Clusters...)
	for i := range c.Clusters {
		c.Clusters[i].Seeds = append([]string(nil), c.Clusters[i].Seeds...)
	}
	return c
}

// MasterStatus is one master's connection state, as [Engine.WaitReady] and
// [Engine.Status] report it.
type MasterStatus struct {
	Index int
	Addr  string
	Up    bool
	Info  conn.ServerInfo // identity of the server, when Up
	Err   error           // why it is down, when not Up (the dial error)
	// Quarantined: it may have started less than the quarantine period ago: its
	// grants do not count yet (docs/safety.md).
	Quarantined bool
	// QuarantinedUntil is when its quarantine ends, when Quarantined.
	QuarantinedUntil time.Time
}

// Status returns every master's state now.
func (e *Engine) Status() []MasterStatus {
	out := make([]MasterStatus, e.n)
	for i, cs := range e.conns {
		if cl := e.cluster(i); cl != nil {
			out[i] = MasterStatus{Index: i, Addr: e.addrs[i]}
			out[i].Up, out[i].Err = cl.Up() // slot map loaded and a node connected
		} else {
			out[i] = MasterStatus{Index: i, Addr: e.addrs[i], Up: cs[0].Connected(), Info: cs[0].Info()}
			if !out[i].Up {
				out[i].Err = cs[0].DownErr()
			}
		}
		if e.quarantined(i) {
			out[i].Quarantined, out[i].QuarantinedUntil = true, e.quarantineEnd(i)
		}
	}
	return out
}

// WaitReady waits until every master's first connect attempt is over
// (each bounded by its dial timeout) or ctx ends, and returns every
// master's state. It is the one call that waits for masters: use it at
// start-up to report each master's dial result and refuse to run on a bad
// topology. Operations need no such wait (they wait for a master's first
// dial within their per-master timeout).
//
// Its error is nil when a quorum of masters is up and every address
// reaches a server of its own. Otherwise it is an errors.Join of what is
// wrong, each matchable with errors.Is/As: an error matching
// [ErrDuplicateMaster] when two addresses reach the same server (the same
// run_id: it would vote twice; exact duplicate addresses are refused by
// [New] already, but "localhost:6379" and "127.0.0.1:6379" only by asking
// the servers); one matching [ErrUnavailable] when fewer than a quorum
// are up, joined with a [*MasterError] for each master that is down (its
// dial error) and ctx's error if ctx ended first.
func (e *Engine) WaitReady(ctx context.Context) ([]MasterStatus, error) {
	for i, cs := range e.conns {
		if cl := e.cluster(i); cl != nil {
			waitCluster(ctx, cl)
			continue
		}
		if err := cs[0].WaitFirstAttempt(ctx); err != nil && ctx.Err() != nil {
			break // the rest are reported as they are now
		}
	}
	if e.closed.Load() {
		return nil, ErrClosed
	}
	st := e.Status()
	type where struct {
		member int
		addr   string
	}
	seen := map[string]where{}
	var errs []error
	up := 0
	for i, m := range st {
		if !m.Up {
			continue
		}
		up++
		// Every server a member reaches (a cluster member: each node)
		// belongs to that member alone, or it would vote twice.
		for id, addr := range e.serverIDs(i, m) {
			if w, ok := seen[id]; ok && w.member != i {
				errs = append(errs, fmt.Errorf("%w: masters %d (%s) and %d (%s) are the same server (run_id %s)",
					ErrDuplicateMaster, w.member, w.addr, i, addr, id))
				continue
			}
			seen[id] = where{i, addr}
		}
	}
	if up < e.q {
		refused := 0
		for _, m := range st {
			if !m.Up && errors.Is(m.Err, conn.ErrAuth) {
				refused++
			}
		}
		if refused > 0 {
			errs = append(errs, fmt.Errorf("%w: %d/%d masters up, quorum %d: %d refused the credentials", ErrUnavailable, up, e.n, e.q, refused))
		} else {
			errs = append(errs, fmt.Errorf("%w: %d/%d masters reachable, quorum %d", ErrUnavailable, up, e.n, e.q))
		}
		for _, m := range st {
			if !m.Up {
				errs = append(errs, &MasterError{Master: m.Index, Addr: m.Addr, Err: m.Err})
			}
		}
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
		}
	}
	return st, errors.Join(errs...)
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
	// quarTimer fires when the master's quarantine ends (made at its
	// first quarantine, reset at each later one); quarOpen: a quarantine
	// was logged and its end not yet.
	quarTimer *time.Timer
	quarOpen  bool
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
	if sc.Up {
		e.quarantineFrom(i, sc)
	}
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
	e.checkQuorum(!sc.Up)
}

// checkQuorum logs regaining the quorum when a quorum of masters votes
// again — up and out of quarantine: a master that came back quarantined
// does not vote, so a quorum up is not yet a quorum — and, after a master
// went down (down), losing it. Called with logMu held.
func (e *Engine) checkQuorum(down bool) {
	voting := 0
	for i := range e.mlog {
		if e.mlog[i].up && !e.quarantined(i) {
			voting++
		}
	}
	switch {
	case voting >= e.q && e.quorumLost:
		e.quorumLost = false
		e.cfg.Logger.Info("engine: quorum regained", "up", e.upCount, "voting", voting, "masters", e.n, "quorum", e.q)
	case voting >= e.q && !e.quorumSeen:
		e.quorumSeen = true
		e.cfg.Logger.Info("engine: a quorum of masters votes: locks can be taken", "up", e.upCount, "voting", voting, "masters", e.n, "quorum", e.q)
	case voting < e.q && !e.quorumLost && down && e.quorumSeen:
		// (Never before a quorum voted: there was none to lose.)
		e.quorumLost = true
		e.cfg.Logger.Error("engine: quorum lost: locks cannot be taken until a quorum of masters is up and out of quarantine",
			"up", e.upCount, "voting", voting, "masters", e.n, "quorum", e.q)
	}
}

// armQuarantineEnd makes master i's quarantine end be logged when it
// comes (and the quorum checked then): the end is a moment, not an event
// any connection reports. Called with logMu held, after the quarantine
// was raised.
func (e *Engine) armQuarantineEnd(i int) {
	m := &e.mlog[i]
	m.quarOpen = true
	d := time.Duration(e.quar[i].Load()) - time.Since(e.epoch)
	if m.quarTimer == nil {
		m.quarTimer = time.AfterFunc(d, func() { e.quarantineEnded(i) })
		return
	}
	m.quarTimer.Reset(d)
}

// quarantineEnded runs on master i's quarantine timer: it logs the end of
// the quarantine, unless it was raised again meanwhile (then it waits for
// the new end), and whether the quorum is back. After Close it does
// nothing (the timer may fire then; it holds no goroutine until it does).
func (e *Engine) quarantineEnded(i int) {
	if e.closed.Load() {
		return
	}
	e.logMu.Lock()
	defer e.logMu.Unlock()
	m := &e.mlog[i]
	if e.quarantined(i) {
		m.quarTimer.Reset(time.Duration(e.quar[i].Load()) - time.Since(e.epoch))
		return
	}
	if !m.quarOpen {
		return
	}
	m.quarOpen = false
	e.cfg.Logger.Info("engine: master quarantine ended: its grants count again", "master", i, "addr", e.addrs[i], "up", m.up)
	e.checkQuorum(false)
}

// clockJumped runs on a connection's reader when the clock check saw
// master i's clock jump (conn.Config.OnClockJump), before the replies of
// the batch it read it in are delivered. Forward: every key the master
// held may expire early, so the master is quarantined for the quarantine
// period from now — each lock it may have cut short ends (in real time)
// within MaxTTL of the jump — and the batch's grants, counted after this
// returns, do not count. Backward: keys last longer than their TTL (locks
// held longer, never shorter): logged and counted.
func (e *Engine) clockJumped(i int, j conn.ClockJump) {
	if e.closed.Load() {
		return
	}
	if j.Refused != nil {
		e.cfg.Logger.Warn("engine: master refused TIME: its clock cannot be checked on this connection, a jump of its clock goes unseen (grant the ACL user +time)",
			"master", i, "addr", j.Addr, "err", j.Refused)
		return
	}
	if j.Ahead < 0 {
		e.jumpsBack.Add(1)
		e.cfg.Logger.Warn("engine: master clock jumped backward: its keys outlive their TTLs (locks end late, never early)",
			"master", i, "addr", j.Addr, "behind", -j.Ahead, "over", j.Between, "allowed", j.Allowed)
		return
	}
	e.jumpsAhead.Add(1)
	until := time.Now().Add(e.quarantinePeriod())
	e.logMu.Lock()
	defer e.logMu.Unlock()
	e.raiseQuarantine(i, until)
	e.armQuarantineEnd(i)
	e.cfg.Logger.Warn("engine: master clock jumped forward: its keys may have expired early; its grants do not count until the quarantine ends",
		"master", i, "addr", j.Addr, "ahead", j.Ahead, "over", j.Between, "allowed", j.Allowed, "until", until.Format(time.RFC3339Nano))
}

// quarantinePeriod is how long after its start a master may not vote: the
// longest TTL any client may use (Config.MaxTTL), or QuarantineFor when
// longer.
func (e *Engine) quarantinePeriod() time.Duration {
	return max(e.cfg.QuarantineFor, e.cfg.MaxTTL)
}

// quarantined reports whether master i is in restart quarantine now. On
// the hot path it costs one atomic load for a master that is not.
func (e *Engine) quarantined(i int) bool {
	until := e.quar[i].Load()
	if until == 0 {
		return false
	}
	if int64(time.Since(e.epoch)) < until {
		return true
	}
	e.quar[i].CompareAndSwap(until, 0)
	return false
}

// serverAt names a server address of member i: the master's own, or one
// of its cluster nodes'.
type serverAt struct {
	member int
	addr   string
}

// serverUp runs when any connection of member i — each of a standalone
// master's connections, each node of a cluster member — comes up, on that
// connection's goroutine before its session serves a request: a reply of
// that session can then only be counted after the quarantine it calls for
// exists.
func (e *Engine) serverUp(i int, sc conn.StateChange) {
	e.logMu.Lock()
	defer e.logMu.Unlock()
	e.quarantineFrom(i, sc)
}

// quarantineFrom quarantines member i when the server of sc (a master, or
// a node of a cluster member) may lack locks that are still held:
//
//   - it may have started less than the quarantine period ago: until its
//     latest possible start plus the period (the delayed-restart rule,
//     enforced by the client). This applies to every session, the first
//     this engine has with the server too: another process may hold locks
//     the server lost;
//   - another server than the last one answers at the address (a new
//     run_id, whatever its uptime: a restart, or a failover to a replica
//     that may miss grants made until the failover): until this session
//     began plus the period.
//
// With Config.FreshMasters, sessions with the server first met at an
// address are trusted. Called with logMu held.
func (e *Engine) quarantineFrom(i int, sc conn.StateChange) {
	if e.cfg.DisableQuarantine {
		if sc.Restarted {
			e.cfg.Logger.Warn("engine: master restarted; quarantine is off: it votes at once", "master", i, "addr", sc.Addr)
		}
		return
	}
	where := serverAt{i, sc.Addr}
	prev, met := e.lastRun[where]
	if e.lastRun == nil {
		e.lastRun = map[serverAt]string{}
	}
	e.lastRun[where] = sc.Info.RunID
	changed := met && prev != sc.Info.RunID
	if e.cfg.FreshMasters && !changed {
		// (A server that reports no run_id — an embedded test master —
		// is the same one on every session here: its restarts are not
		// seen. FreshMasters is for masters the caller runs itself.)
		return
	}
	period := e.quarantinePeriod()
	until := sc.Info.StartedBy().Add(period)
	why := "it started less than the quarantine period ago (it may have lost locks)"
	if changed {
		at := sc.Info.ConnectedAt
		if at.IsZero() {
			at = time.Now()
		}
		if swapped := at.Add(period); swapped.After(until) {
			until = swapped
			why = "another server answers at its address (new run_id: it may miss locks granted until now)"
		}
	}
	if !until.After(time.Now()) {
		return
	}
	e.raiseQuarantine(i, until)
	e.armQuarantineEnd(i)
	e.cfg.Logger.Warn("engine: master quarantined: "+why+"; its grants do not count until the quarantine ends",
		"master", i, "addr", sc.Addr, "run_id", sc.Info.RunID, "uptime", sc.Info.Uptime, "until", until.Format(time.RFC3339Nano), "period", period)
}

// Voting returns nil when a quorum of masters vote now — up, and out of
// restart quarantine —, and otherwise an error matching [ErrUnavailable]
// that says how many vote, when a quorum will if the quarantine is what
// stands in the way, and for each master that does not vote why: down
// (with the dial error) or in quarantine (a [*QuarantineError], matching
// [ErrQuarantined], with its end), each in a [*MasterError]. It is what a
// readiness probe asks (`redlock proxy --metrics` serves it at /readyz);
// it does not contact the masters.
func (e *Engine) Voting() error {
	st := e.Status()
	voting := 0
	var errs []error
	for i, m := range st {
		switch {
		case !m.Up:
			errs = append(errs, &MasterError{Master: i, Addr: m.Addr, Err: fmt.Errorf("down: %w", m.Err)})
		case m.Quarantined:
			errs = append(errs, &MasterError{Master: i, Addr: m.Addr, Err: &QuarantineError{Until: m.QuarantinedUntil}})
		default:
			voting++
		}
	}
	if voting >= e.q {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d/%d masters vote (quorum %d)", voting, e.n, e.q)
	at, hint := e.outlook(st)
	if !at.IsZero() {
		fmt.Fprintf(&b, "; a quorum votes from %s (in %s)", at.UTC().Format(time.RFC3339), untilNow(at))
	}
	if hint != "" {
		b.WriteString("; " + hint)
	}
	writeMasters(&b, errs)
	return &votingError{msg: b.String(), masters: errs}
}

// VoteMargin says, when a quorum of masters votes (Voting is nil), how
// many vote and how many more failures locking survives: "5/5 vote,
// quorum 3: 2 more failures are tolerated", or "3/5 vote, quorum 3: one
// more failure stops locking". It does not contact the masters.
func (e *Engine) VoteMargin() string {
	voting := 0
	for _, m := range e.Status() {
		if m.Up && !m.Quarantined {
			voting++
		}
	}
	s := fmt.Sprintf("%d/%d vote, quorum %d: ", voting, e.n, e.q)
	switch spare := voting - e.q; {
	case spare < 0:
		return s + "locking is stopped"
	case spare == 0:
		return s + "one more failure stops locking"
	case spare == 1:
		return s + "1 more failure is tolerated"
	default:
		return s + fmt.Sprintf("%d more failures are tolerated", spare)
	}
}

// QuarantineOutlook says when a quorum of the masters that are up votes,
// if restart quarantine is what keeps it from voting now (zero otherwise:
// a quorum votes now, or too few masters are up for any time to be
// told), and hint, the advice to declare the masters fresh where it could
// be true (every master started less than the quarantine period ago), or
// "". It does not contact the masters.
func (e *Engine) QuarantineOutlook() (votesAt time.Time, hint string) {
	return e.outlook(e.Status())
}

func (e *Engine) outlook(st []MasterStatus) (time.Time, string) {
	now := time.Now()
	at := make([]time.Time, 0, len(st))
	quarantined := false
	for _, m := range st {
		switch {
		case m.Quarantined:
			quarantined = true
			at = append(at, m.QuarantinedUntil)
		case m.Up:
			at = append(at, now)
		}
	}
	if !quarantined {
		return time.Time{}, ""
	}
	return quorumAt(at, e.q), e.freshHint(st)
}

// votingError is Voting's error: it matches ErrUnavailable and unwraps to
// the per-master errors.
type votingError struct {
	msg     string
	masters []error
}

func (e *votingError) Error() string        { return ErrUnavailable.Error() + ": " + e.msg }
func (e *votingError) Is(target error) bool { return target == ErrUnavailable }
func (e *votingError) Unwrap() []error      { return e.masters }

// quorumEnd is when master i's quarantine ends (now if it has).
func (e *Engine) quarantineEnd(i int) time.Time {
	if until := e.quar[i].Load(); until != 0 {
		return e.epoch.Add(time.Duration(until))
	}
	return time.Now()
}

// quarantineErr is the cause recorded for master i's answer in quarantine.
func (e *Engine) quarantineErr(i int) error { return &QuarantineError{Until: e.quarantineEnd(i)} }

// quorumAt returns when q of the masters whose vote times are at vote —
// now for those that vote, the quarantine's end for those in it — vote:
// the q-th earliest; zero when fewer than q are listed (the others are
// down or failed: no time can be told).
func quorumAt(at []time.Time, q int) time.Time {
	if len(at) < q {
		return time.Time{}
	}
	slices.SortFunc(at, time.Time.Compare)
	if !at[q-1].After(time.Now()) {
		return time.Time{}
	}
	return at[q-1]
}

// explainQuarantine fills in qe, with masters quar answering in
// quarantine, when a quorum of the masters that answered votes, and the
// hint to declare fresh masters where it could be true.
func (e *Engine) explainQuarantine(qe *QuorumError, quar []int) {
	now := time.Now()
	at := make([]time.Time, 0, qe.Answered)
	for range qe.Granted + qe.Held {
		at = append(at, now)
	}
	for _, i := range quar {
		at = append(at, e.quarantineEnd(i))
	}
	qe.VotesAt = quorumAt(at, qe.Quorum)
	qe.hint = e.cachedFreshHint()
}

// hintFor is how long a fresh-masters hint is reused: failed operations
// while a master is quarantined would otherwise each read every master's
// status.
const hintFor = 100 * time.Millisecond

type cachedHint struct {
	at   time.Time
	hint string
}

// cachedFreshHint is freshHint of the masters' status, at most hintFor old.
func (e *Engine) cachedFreshHint() string {
	if c := e.hint.Load(); c != nil && time.Since(c.at) < hintFor {
		return c.hint
	}
	h := e.freshHint(e.Status())
	e.hint.Store(&cachedHint{at: time.Now(), hint: h})
	return h
}

// freshHint is the hint to declare the masters fresh, when it could be
// true (the caller saw a master in quarantine): the engine does not trust fresh
// masters yet, and every master is up and started less than the
// quarantine period ago (a deployment started a moment ago). A master
// that has run longer may have served locks: then restarted ones must
// wait, and nothing is hinted.
func (e *Engine) freshHint(st []MasterStatus) string {
	if e.cfg.FreshMasters || e.cfg.DisableQuarantine {
		return ""
	}
	period := e.quarantinePeriod()
	since := time.Now().Add(-period)
	for _, m := range st {
		if !m.Up || m.Info.RunID == "" || m.Info.ConnectedAt.Add(-m.Info.Uptime).Before(since) {
			return ""
		}
	}
	return fmt.Sprintf("every master started less than %v ago: if they were started empty and have never served locks, "+
		"declare them fresh (%s) and they vote at once; otherwise they vote when the quarantine ends", period, e.cfg.Names.FreshMasters)
}
