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
	t := time.NewTicker(c.cfg.ClockRefresh)
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
// goroutine only (the TIME replies), and by the reset at a new server.
type clockWatch struct {
	c     *Conn
	epoch time.Time // sends and arrivals are monotonic ns since epoch
	have  bool      // a previous reading exists
	runID string    // the server of the previous reading
	// The previous reading: the server's clock (µs), when its TIME was
	// queued and when its reply arrived.
	server     int64
	sent, recv int64
}

// beginBatchLocked starts a write batch with the clock check's TIME when
// the check is on and nothing is waiting to be written yet: its reply
// then precedes every reply of the batch. deadline is the batch's first
// request's (TIME must not keep a stalled server undetected).
func (c *Conn) beginBatchLocked(deadline time.Time) {
	if c.clock == nil || len(c.wbuf) != 0 {
		return
	}
	p := c.q.push()
	p.cb, p.tag, p.deadline, p.script, p.done, p.extra, p.cmd, p.asking, p.native = c.clock, uint64(time.Since(c.clock.epoch)), deadline, nil, false, 0, nil, false, NativeNone
	c.armLocked(deadline)
	c.wbuf = append(c.wbuf, timeCmd...)
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
	if w.have && runID == w.runID {
		w.check(time.Duration(server-w.server)*time.Microsecond, time.Duration(recv-w.sent), time.Duration(sent-w.recv))
	}
	w.have, w.runID, w.server, w.sent, w.recv = true, runID, server, sent, recv
}

// check compares the server's elapsed time between two readings with
// this process's: at most hi (the later reply's arrival minus the earlier
// TIME's send), at least lo (the later send minus the earlier arrival;
// negative when the later TIME was queued before the earlier reply came
// back — pipelined batches —, and then nothing can be told backward).
func (w *clockWatch) check(server, hi, lo time.Duration) {
	cfg := &w.c.cfg
	if allow := cfg.ClockAllowance(hi); server > hi+allow {
		cfg.OnClockJump(ClockJump{Addr: w.c.addr, Ahead: server - hi, Between: hi, Allowed: allow})
	} else if allow := cfg.ClockAllowance(lo); lo > 0 && server < lo-allow {
		cfg.OnClockJump(ClockJump{Addr: w.c.addr, Ahead: server - lo, Between: lo, Allowed: allow})
	}
}
