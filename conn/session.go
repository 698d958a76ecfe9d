package conn

// The session loop of a Conn: connect, serve a session (writer, reader and
// expiry goroutines), break it on a stall or error, reconnect. conn.go
// holds the API callers use.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-dev/redlock/resp"
)

// run owns the connection: connect, serve a session until it breaks,
// back off, reconnect; until Close.
func (c *Conn) run(ctx context.Context) {
	defer c.wg.Done()
	defer c.failAll(ErrClosed) // requests queued while connecting, after Close
	backoff := c.cfg.ReconnectMin
	downReported := false
	var runID string
	for {
		nc, rd, info, err := c.connect(ctx)
		if err == nil {
			start := time.Now()
			c.connects.Add(1)
			c.notify(StateChange{Up: true, Info: info, Restarted: runID != "" && info.RunID != runID})
			runID, downReported = info.RunID, false
			if cause := c.session(nc, rd, info); cause != nil {
				c.notify(StateChange{Err: cause})
				downReported = true
			}
			if time.Since(start) > fastReconnectWindow {
				backoff = c.cfg.ReconnectMin
			}
		} else {
			err = c.attemptErr(ctx, err)
			c.mu.Lock()
			c.downErr = fmt.Errorf("%w: %s: %w", ErrDown, c.addr, err)
			first := c.connecting
			c.connecting = false
			down := c.downErr
			c.mu.Unlock()
			c.firstAttemptDone(err)
			if first {
				c.failAll(down) // what was queued for the first attempt
			}
			if !downReported && ctx.Err() == nil {
				c.notify(StateChange{Err: err})
				downReported = true
			}
		}
		// Full jitter in [backoff/2, backoff).
		d := backoff/2 + rand.N(backoff/2+1)
		backoff = min(2*backoff, c.cfg.ReconnectMax)
		t := time.NewTimer(d)
		select {
		case <-c.done:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

func (c *Conn) notify(sc StateChange) {
	if c.cfg.OnState != nil {
		sc.Addr = c.addr
		c.cfg.OnState(sc)
	}
}

// session runs reader and writer on nc until either fails or Close. It
// returns what ended it (nil for Close).
func (c *Conn) session(nc net.Conn, rd *resp.Reader, info ServerInfo) error {
	c.mu.Lock()
	c.connecting = false
	if c.closed {
		c.mu.Unlock()
		nc.Close()
		c.firstAttemptDone(ErrClosed)
		return nil
	}
	c.nc, c.up, c.info, c.nativeOff = nc, true, info, false
	close(c.upCh)
	c.mu.Unlock()
	c.firstAttemptDone(nil)

	stop := make(chan struct{})
	errc := make(chan error, 2)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); errc <- c.readLoop(rd) }()
	go func() { defer wg.Done(); errc <- c.writeLoop(nc, stop) }()
	var cause error
	select {
	case cause = <-errc:
	case <-c.done:
	}

	c.mu.Lock()
	if c.kill != nil {
		cause, c.kill = c.kill, nil
	}
	c.up = false
	c.nc = nil
	c.upCh = make(chan struct{})
	closed := c.closed
	if cause == nil {
		cause = errors.New("writer stopped")
	}
	c.downErr = fmt.Errorf("%w: %s: %w", ErrDown, c.addr, cause)
	c.mu.Unlock()
	close(stop)
	nc.Close()
	wg.Wait()

	failErr := error(&BrokenError{Addr: c.addr, Err: cause})
	if closed {
		failErr = ErrClosed
	}
	c.failAll(failErr)
	if closed {
		return nil
	}
	return cause
}

// failAll completes every queued request with err and empties the queue.
func (c *Conn) failAll(err error) {
	c.mu.Lock()
	var fail []pending
	for c.q.len() > 0 {
		p := *c.q.front()
		if !p.done {
			fail = append(fail, pending{cb: p.cb, tag: p.tag})
		}
		c.q.pop()
	}
	c.grouped = 0
	fail = c.failMergesLocked(fail)
	c.wbuf, c.wcmds = c.wbuf[:0], 0
	c.firstLive = c.q.seq
	c.nextDeadline = time.Time{}
	c.mu.Unlock()
	if len(fail) > 0 && !errors.Is(err, ErrClosed) {
		c.broken.Add(uint64(len(fail)))
	}
	for _, p := range fail {
		p.cb.Complete(p.tag, resp.Reply{}, err)
	}
}

func (c *Conn) writeLoop(nc net.Conn, stop <-chan struct{}) error {
	for {
		c.mu.Lock()
		for len(c.wbuf) == 0 && c.nmerge == 0 {
			c.mu.Unlock()
			select {
			case <-c.wake:
			case <-stop:
				return nil
			}
			// Under load, let goroutines that are runnable right now enqueue
			// too, so they share this write: the queue has "run dry" only
			// when nobody else is about to add to it. With only a handful
			// of requests in flight write at once: no added latency at low
			// load (measured: yielding there costs ~10% at concurrency 1).
			c.mu.Lock()
			if c.q.len()+c.nmerge > gatherThreshold {
				c.mu.Unlock()
				runtime.Gosched()
				c.mu.Lock()
			}
			continue
		}
		if c.nmerge > 0 {
			c.flushMergesLocked()
		}
		buf, n := c.wbuf, c.wcmds
		c.wbuf, c.spare, c.wcmds = c.spare[:0], nil, 0
		c.mu.Unlock()
		err := nc.SetWriteDeadline(time.Now().Add(c.cfg.WriteTimeout))
		if err == nil {
			_, err = nc.Write(buf)
		}
		c.mu.Lock()
		if cap(buf) <= maxRetainedWriteBuf {
			c.spare = buf[:0]
		}
		c.mu.Unlock()
		if err != nil {
			return err
		}
		c.writes.Add(1)
		if c.cfg.OnWrite != nil {
			c.cfg.OnWrite(n)
		}
	}
}

func (c *Conn) readLoop(rd *resp.Reader) error {
	// pending is what rdPending holds: only this loop stores it, and only
	// when it changes (a store is an atomic exchange; in a batch of replies
	// the value stays true).
	pending := c.rdPending.Load()
	setPending := func(v bool) {
		if v != pending {
			c.rdPending.Store(v)
			pending = v
		}
	}
	for {
		setPending(rd.Buffered() > 0)
		if h := readHook.Load(); h != nil {
			(*h)()
		}
		rep, err := rd.ReadReply()
		if errors.Is(err, resp.ErrTooLarge) {
			// The reader dropped the oversized reply whole and kept its
			// place: fail that one request, keep the connection.
			if !c.failFront(err) {
				return fmt.Errorf("%w: oversized reply with no request pending", resp.ErrProtocol)
			}
			continue
		}
		if err != nil {
			return err
		}
		setPending(true) // until delivered (readerBehind)
		c.mu.Lock()
		if c.q.len() == 0 {
			c.mu.Unlock()
			return fmt.Errorf("%w: unexpected reply %s with no request pending", resp.ErrProtocol, rep)
		}
		p := c.q.front()
		cb, tag, done := p.cb, p.tag, p.done
		if p.native != NativeNone {
			rep = nativeReply(p.native, rep)
			if refusesNative(rep) {
				c.nativeOff = true // this request fails; the next go as scripts
			}
		}
		if !done && p.script != nil && rep.HasErrorPrefix("NOSCRIPT") {
			var ok bool
			if g, isGroup := cb.(*group); isGroup && p.cmd == nil {
				c.scratch, ok = g.appendCall(c.scratch[:0], true), true
			} else {
				c.scratch, ok = p.script.appendEvalFromEvalSha(c.scratch[:0], p.cmd)
			}
			if ok && !c.resendReordersLocked(p) {
				req := Request{Cmd: c.scratch, Deadline: p.deadline, Callback: cb, Tag: tag}
				extra, asking := p.extra, p.asking
				c.popLocked() // p is not read after this
				var wake bool
				if asking { // the target of an ASK serves the slot right after ASKING only
					wake = c.pushLocked(&Request{Cmd: askingCmd, Deadline: req.Deadline, Callback: discard{}})
					c.pushLocked(&req)
					c.q.at(c.q.end() - 1).asking = true
				} else {
					wake = c.pushLocked(&req)
				}
				c.q.at(c.q.end() - 1).extra = extra // a merged call stays one
				c.grouped += extra
				c.resentEnd = c.q.end()
				c.mu.Unlock()
				if wake {
					c.wakeWriter()
				}
				continue
			}
		}
		c.popLocked()
		c.mu.Unlock()
		if !done {
			cb.Complete(tag, rep, nil)
		} else if w, ok := cb.(*clockWatch); ok {
			// A batch's TIME that timed out is still read before the
			// batch's later replies: a request of the batch with a later
			// deadline must not be delivered unchecked.
			w.Complete(tag, rep, nil)
		} else if w, ok := cb.(*replWatch); ok {
			w.Complete(tag, rep, nil) // the same for its INFO replication
		}
	}
}

// failFront completes the oldest pending request with err. It reports
// false when nothing was pending.
func (c *Conn) failFront(err error) bool {
	c.mu.Lock()
	if c.q.len() == 0 {
		c.mu.Unlock()
		return false
	}
	p := c.q.front()
	cb, tag, done := p.cb, p.tag, p.done
	c.popLocked()
	c.mu.Unlock()
	if !done {
		cb.Complete(tag, resp.Reply{}, err)
	}
	return true
}

// expireLoop fails requests whose deadline passed, even when the master
// sends nothing at all.
func (c *Conn) expireLoop() {
	defer c.wg.Done()
	t := time.NewTimer(time.Hour)
	t.Stop()
	var fired []pending
	var lagSince time.Time
	for {
		select {
		case <-c.done:
			t.Stop()
			return
		case <-c.rearm:
		case <-t.C:
		}
		// Replies that arrived are read before anything times out: a
		// reader that is behind (a process short of CPU: its timers fire
		// as it is scheduled again, before its sockets are read) would
		// otherwise see answers that came in time fail as timed out. The
		// deferral is bounded (maxReadLag); a master that sends nothing is
		// not deferred.
		if c.readerBehind() {
			now := time.Now()
			if lagSince.IsZero() {
				lagSince = now
			}
			if now.Sub(lagSince) < maxReadLag {
				t.Reset(readLagStep)
				continue
			}
		} else {
			lagSince = time.Time{}
		}
		var next time.Time
		var stalled error
		fired, next, stalled = c.expire(time.Now(), fired[:0])
		if stalled != nil {
			c.breakSession(stalled)
		}
		// Counted before the callbacks run: whoever sees a timeout sees
		// it in Stats (TestRealMasterPaused read Stats between the two).
		c.timeouts.Add(uint64(len(fired)))
		for i := range fired {
			fired[i].cb.Complete(fired[i].tag, resp.Reply{}, ErrTimeout)
			fired[i].cb = nil
		}
		if !next.IsZero() {
			t.Reset(time.Until(next))
		}
	}
}

// maxReadLag bounds how long expiries wait for a reader that is behind;
// readLagStep is how often it is looked at again meanwhile.
const (
	maxReadLag  = 250 * time.Millisecond
	readLagStep = time.Millisecond
)

// readHook, when set by a test, runs before each reply is read (a reader
// short of CPU).
var readHook atomic.Pointer[func()]

// readerBehind reports whether replies wait to be processed: read and not
// delivered yet, in the reader's buffer, or unread in the current
// session's socket.
func (c *Conn) readerBehind() bool {
	if c.rdPending.Load() {
		return true
	}
	c.mu.Lock()
	nc := c.nc
	c.mu.Unlock()
	return nc != nil && unreadBytes(nc) > 0
}

// breakSession closes the current session's socket for cause (the reader
// fails, the session ends with cause, everything in flight fails, the Conn
// reconnects).
func (c *Conn) breakSession(cause error) {
	c.mu.Lock()
	nc := c.nc
	if nc != nil && c.kill == nil {
		c.kill = cause
	}
	c.mu.Unlock()
	if nc != nil {
		nc.Close()
	}
}

// expire marks the requests whose deadline is not after now as done and
// returns them, with the earliest deadline still queued (or the instant
// the oldest unanswered request makes the session stalled). stalled is
// non-nil when the oldest request is unanswered StallTimeout after its
// deadline.
func (c *Conn) expire(now time.Time, fired []pending) (_ []pending, next time.Time, stalled error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	prefixDone := true
	start := max(c.firstLive, c.q.seq)
	for s := start; s < c.q.end(); s++ {
		p := c.q.at(s)
		switch {
		case p.done:
		case p.deadline.IsZero():
			prefixDone = false
		case !p.deadline.After(now):
			p.done = true
			fired = append(fired, pending{cb: p.cb, tag: p.tag})
		default:
			prefixDone = false
			if next.IsZero() || p.deadline.Before(next) {
				next = p.deadline
			}
		}
		if prefixDone {
			c.firstLive = s + 1
		}
	}
	// Members held for merging (their write may wait for a slow one).
	fired, next = c.expireMergesLocked(now, fired, next)
	if st := c.cfg.StallTimeout; st > 0 && c.q.len() > 0 && c.up {
		// The front is the oldest request; done means it timed out and is
		// still waiting for its reply.
		if f := c.q.front(); f.done && !f.deadline.IsZero() {
			at := f.deadline.Add(st)
			if !at.After(now) {
				stalled = fmt.Errorf("%w: no reply for %v after a request's deadline (%d requests in flight)", ErrStalled, st, c.q.len())
			} else if next.IsZero() || at.Before(next) {
				next = at
			}
		}
	}
	c.nextDeadline = next
	return fired, next, stalled
}

// resendReordersLocked reports whether re-sending p — the front request,
// answered NOSCRIPT — as EVAL at the end of the queue would put it behind
// a later request of its key that the server has not run yet: one
// written after it (queued behind it), or one held for merging. The
// server would then apply the two in the wrong order (an extension to 8 s
// after one to 30 s: the master keeps the shorter while the engine counts
// the longer; found by the review of issue #46). Then p fails with its
// NOSCRIPT reply (no vote) instead; the last request of the script's run
// re-sends it, which loads it again. A later request of unknown key
// (KeyHash 0) may be of p's key. A request of unknown key itself is
// re-sent as before, as a client's own EVALSHA fallback would be (the
// proxy's opted-in scripts; the engine loads all of its scripts at each
// connect, so a NOSCRIPT there needs a SCRIPT FLUSH); a merged call is
// judged by its members' keys. A batch's TIME and INFO order with nothing.
func (c *Conn) resendReordersLocked(p *pending) bool {
	conflict := false
	eachKeyHash(p, func(h uint64) {
		conflict = conflict || h != 0 && c.conflictsLocked(h)
	})
	for s := c.q.seq + 1; s < c.q.end() && !conflict; s++ {
		o := c.q.at(s)
		switch o.cb.(type) {
		case *clockWatch, *replWatch:
			continue
		}
		eachKeyHash(p, func(mine uint64) {
			eachKeyHash(o, func(h uint64) {
				conflict = conflict || mine != 0 && (h == 0 || h == mine)
			})
		})
	}
	return conflict
}

// eachKeyHash calls f with the KeyHash of each key p's request touches:
// its own, or a merged call's members' (a call that timed out: 0, its
// group may be another call's by now).
func eachKeyHash(p *pending, f func(uint64)) {
	if g, ok := p.cb.(*group); ok && p.cmd == nil {
		if p.done {
			f(0)
			return
		}
		for i := range g.members {
			f(g.members[i].hash)
		}
		return
	}
	f(p.keyHash)
}
