package conn

// The clock check (Config.OnClockJump): every write batch starts with
// TIME, and its reply — read before any reply of the batch's requests —
// is compared with this process's monotonic clock since the previous
// reading on this server. A server whose clock ran ahead by more than the
// allowance is reported before the batch's replies are delivered: its
// caller can discard the votes in them (a key on that server may have
// expired early, docs/safety.md).

import (
	"strconv"
	"time"

	"github.com/redlock-dev/redlock/resp"
)

// ClockJump is what the clock check found: the server's clock moved
// Ahead of this process's monotonic clock (negative: behind) between two
// readings, beyond the allowance.
type ClockJump struct {
	Addr string
	// Ahead is by how much the server's clock advanced more than this
	// process's clock can have between the two readings (the readings'
	// round trips counted in the server's favour); negative for a
	// backward jump: by how much it advanced less than this process's
	// clock must have.
	Ahead time.Duration
	// Between is the interval of this process's clock between the two
	// readings (the later reply's arrival minus the earlier request's
	// send).
	Between time.Duration
	// Allowed is the allowance the jump exceeded (Config.ClockAllowance of
	// Between).
	Allowed time.Duration
	// Refused, when set, is the server's error reply to the handshake's
	// TIME (an ACL without +time): this session takes no readings, and
	// jumps on it go unseen. Ahead is then 0.
	Refused error
}

var (
	timeCmd = resp.AppendCommandStrings(nil, "TIME")
	pingCmd = resp.AppendCommandStrings(nil, "PING")
)

// DefaultClockRefresh is the default Config.ClockRefresh.
const DefaultClockRefresh = 5 * time.Second

// clockRefreshLoop sends a PING — a batch, so a TIME before it — when the
// connection wrote nothing for Config.ClockRefresh: the readings of an
// idle master stay that close, and with them the allowance a jump must
// exceed to be seen. It ends with the Conn.
func (c *Conn) clockRefreshLoop() {
	defer c.wg.Done()
	// Ticks at half the period, pinging when a whole tick passed without
	// a write: readings are then at most about ClockRefresh apart.
	t := time.NewTicker(c.cfg.ClockRefresh / 2)
	defer t.Stop()
	last := c.writes.Load()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
		}
		if w := c.writes.Load(); w != last {
			last = w
			continue
		}
		if c.Connected() {
			c.Do(Request{Cmd: pingCmd, Deadline: time.Now().Add(c.cfg.ClockRefresh), Callback: discard{}}) // refused when down or full: no matter
		}
	}
}

// clockWatch is a Conn's clock check state. It is touched by the reader
// goroutine only (the TIME replies), and by the handshake while no
// session runs.
type clockWatch struct {
	c     *Conn
	epoch time.Time // sends and arrivals are monotonic ns since epoch
	runID string    // the server of the readings
	// The latest readings, newest last (at most clockReadings): the
	// forward check compares with the newest; the backward one with the
	// newest whose reply came back before this TIME was sent.
	readings []clockReading
}

// clockReading is one TIME: the server's clock (µs), when it was queued
// and when its reply arrived.
type clockReading struct{ server, sent, recv int64 }

// clockReadings bounds the readings kept: pipelined batches whose TIMEs
// are all in flight at once need the one before them for a backward check.
const clockReadings = 8

// beginBatchLocked starts a write batch with the clock check's TIME when
// the check is on and nothing is waiting to be written yet: its reply
// then precedes every reply of the batch. deadline is the batch's first
// request's (TIME must not keep a stalled server undetected).
func (c *Conn) beginBatchLocked(deadline time.Time) {
	if len(c.wbuf) != 0 {
		return
	}
	if c.clock != nil {
		c.pushCheckLocked(c.clock, uint64(time.Since(c.clock.epoch)), deadline, timeCmd)
	}
	if c.repl != nil { // after TIME: the replication check (repl.go)
		c.pushCheckLocked(c.repl, 0, deadline, replInfoCmd)
	}
}

// pushCheckLocked queues one of a batch's checks — the clock check's TIME,
// the replication check's INFO — answered to cb before the batch's
// requests: no key, no script, the batch's first deadline.
func (c *Conn) pushCheckLocked(cb Callback, tag uint64, deadline time.Time, cmd []byte) {
	p := c.q.push()
	p.cb, p.tag, p.deadline, p.script, p.done, p.extra, p.cmd, p.asking, p.native, p.keyHash = cb, tag, deadline, nil, false, 0, nil, false, NativeNone, 0
	c.armLocked(deadline)
	c.wbuf = append(c.wbuf, cmd...)
}

// Complete implements Callback for the batch's TIME: tag is when it was
// queued. It runs on the reader goroutine, before the replies that follow.
func (w *clockWatch) Complete(tag uint64, r resp.Reply, err error) {
	recv := int64(time.Since(w.epoch))
	server, ok := parseTime(r)
	if err != nil || !ok {
		return // no reading (timed out, refused by an ACL, …)
	}
	w.c.mu.Lock()
	runID := w.c.info.RunID
	w.c.mu.Unlock()
	w.observe(server, int64(tag), recv, runID)
}

// parseTime reads a TIME reply as µs.
func parseTime(r resp.Reply) (int64, bool) {
	if r.Type != resp.TypeArray || len(r.Elems) != 2 {
		return 0, false
	}
	sec, err1 := strconv.ParseInt(string(r.Elems[0].Str), 10, 64)
	usec, err2 := strconv.ParseInt(string(r.Elems[1].Str), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return sec*1e6 + usec, true
}

// observe takes one reading — the server's clock (µs), when its TIME was
// sent and when the reply arrived (ns since epoch) — checks it against
// the previous reading of the same server (run_id), and keeps it as the
// next one's baseline. The reader goroutine calls it, and the handshake
// (on the connection's goroutine, while no session runs): one at a time.
func (w *clockWatch) observe(server, sent, recv int64, runID string) {
	if runID != w.runID {
		w.readings, w.runID = w.readings[:0], runID
	}
	if n := len(w.readings); n > 0 {
		prev := w.readings[n-1]
		fwd := time.Duration(server-prev.server) * time.Microsecond
		hi := time.Duration(recv - prev.sent)
		// The newest reading whose reply arrived before this TIME left.
		var back *clockReading
		for i := n - 1; i >= 0; i-- {
			if w.readings[i].recv < sent {
				back = &w.readings[i]
				break
			}
		}
		w.check(fwd, hi, back, server, sent)
	}
	if len(w.readings) == clockReadings {
		copy(w.readings, w.readings[1:])
		w.readings = w.readings[:clockReadings-1]
	}
	w.readings = append(w.readings, clockReading{server, sent, recv})
}

// check reports a jump: forward when the server's clock advanced fwd
// since the newest reading while this process's clock can have advanced
// at most hi (this reply's arrival minus that TIME's send), beyond the
// allowance; backward when, since back (a reading whose reply arrived
// before this TIME was sent: this process's clock advanced at least this
// send minus its arrival), the server's advanced less than that minus the
// allowance. Without such a reading (pipelined batches all in flight)
// nothing is told backward.
func (w *clockWatch) check(fwd, hi time.Duration, back *clockReading, server, sent int64) {
	cfg := &w.c.cfg
	if allow := cfg.ClockAllowance(hi); fwd > hi+allow {
		cfg.OnClockJump(ClockJump{Addr: w.c.addr, Ahead: fwd - hi, Between: hi, Allowed: allow})
		return
	}
	if back == nil {
		return
	}
	lo := time.Duration(sent - back.recv)
	elapsed := time.Duration(server-back.server) * time.Microsecond
	if allow := cfg.ClockAllowance(lo); elapsed < lo-allow {
		cfg.OnClockJump(ClockJump{Addr: w.c.addr, Ahead: elapsed - lo, Between: lo, Allowed: allow})
	}
}
