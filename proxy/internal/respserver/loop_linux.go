//go:build linux

package respserver

import (
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/redlock-dev/redlock/resp"
)

// The event loop (Config.EventLoops): plain-TCP clients are served by a
// few goroutines, each waiting in epoll(7) for all of its clients, instead
// of two goroutines per client.
//
//   - One readiness wait serves every ready client: the loop reads what
//     each sent (loop.go parses it), dispatches the commands as the
//     goroutine path does (table.go), and starts the asynchronous ones
//     (pool.go: the masters' answers complete them on the master
//     connections' readers, no goroutine per command).
//   - A completed command puts its client on the loop's ready list and
//     wakes the loop (an eventfd write, only when it sleeps); the loop
//     writes each client's ready replies in one write(2) per turn.
//   - A client is read only while its replies are written, its unanswered
//     commands are fewer than MaxPipeline and it holds at most
//     MaxRequestBytes: the goroutine path's backpressure.
//   - Deadlines (authentication, a request's arrival, idleness, a client
//     that does not read its replies) are checked by a sweep every
//     tenth of the shortest of them.
//   - What the loop does not serve moves the connection to the goroutine
//     path, with the bytes not yet parsed: TLS (never in a loop), a
//     command larger than LoopScratch, and subscriptions (pushed frames
//     are the writer goroutine's). It moves once its replies are written.

// LoopsSupported reports whether Config.EventLoops can be honoured here.
const LoopsSupported = true

type loop struct {
	s        *Server
	epfd     int
	efd      int // eventfd: completions and Shutdown wake the loop
	f        *Framer
	scratch  []byte
	events   []unix.EpollEvent
	clients  map[int32]*Conn // by fd (loop goroutine only)
	sleeping atomic.Bool

	mu     sync.Mutex
	readyQ []*Conn // clients with completions to write (guarded by mu)
	newQ   []*Conn // clients to register (guarded by mu)
	newB   []*Conn
	readyB []*Conn // the loop's copy of readyQ

	touched  []*Conn // clients to process this turn (loop only)
	corked   int     // commands dispatched since the last cork
	reads    int     // socket reads of the client whose turn it is
	again    []*Conn // clients whose turn ended before their bytes did
	nextScan time.Time
	stop     atomic.Bool
}

func (s *Server) startLoops() error {
	n := s.cfg.EventLoops
	for range n {
		l, err := newLoop(s)
		if err != nil {
			for _, l := range s.loops {
				l.close()
			}
			s.loops = nil
			return err
		}
		s.loops = append(s.loops, l)
	}
	for _, l := range s.loops {
		s.loopWG.Add(1)
		go func() {
			defer s.loopWG.Done()
			l.run()
		}()
	}
	return nil
}

func newLoop(s *Server) (*loop, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("event loop: epoll_create1: %w", err)
	}
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("event loop: eventfd: %w", err)
	}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, efd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(efd)}); err != nil {
		unix.Close(epfd)
		unix.Close(efd)
		return nil, fmt.Errorf("event loop: epoll_ctl: %w", err)
	}
	return &loop{s: s, epfd: epfd, efd: efd, f: NewFramer(), scratch: make([]byte, LoopScratch),
		events: make([]unix.EpollEvent, 256), clients: map[int32]*Conn{}}, nil
}

func (l *loop) close() {
	unix.Close(l.epfd)
	unix.Close(l.efd)
}

// wake makes the loop take a turn, if it sleeps in epoll_wait (or is
// about to: it re-checks its lists after it said so).
func (l *loop) wake() {
	if l.sleeping.Swap(false) {
		l.kick()
	}
}

// kick makes the loop take a turn, whatever it is doing.
func (l *loop) kick() {
	one := [8]byte{1}
	unix.Write(l.efd, one[:])
}

// ready puts c on the loop's ready list: one of its commands completed
// (or Close wants it closed). Any goroutine.
func (l *loop) ready(c *Conn) {
	if c.ls.moved.Load() {
		return // the goroutine path's writer writes its replies
	}
	l.mu.Lock()
	if !c.ls.queued {
		c.ls.queued = true
		l.readyQ = append(l.readyQ, c)
	}
	l.mu.Unlock()
	l.wake()
}

// enroll takes over tc: its descriptor is duplicated into the loop and tc
// is closed (the runtime's poller forgets it). False: tc is untouched.
func (s *Server) enroll(tc *net.TCPConn) bool {
	if len(s.loops) == 0 {
		return false
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return false
	}
	fd := -1
	rc.Control(func(sfd uintptr) {
		fd, err = unix.FcntlInt(sfd, unix.F_DUPFD_CLOEXEC, 0)
	})
	if err != nil || fd < 0 {
		return false
	}
	c := newClient(s, nil, tc.RemoteAddr().String())
	l := s.loops[int(c.id)%len(s.loops)]
	c.lp = l
	c.ls.fd = int32(fd)
	c.ls.readable = true // what arrived before the registration
	c.ls.lastRead = c.created
	s.mu.Lock()
	if s.shutting.Load() {
		s.mu.Unlock()
		unix.Close(fd)
		tc.Close()
		s.clients.Add(-1)
		return true
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	tc.Close() // the duplicate keeps the socket open
	s.accepted.Add(1)
	s.loopClients.Add(1)
	l.mu.Lock()
	l.newQ = append(l.newQ, c) // registered by the loop itself
	l.mu.Unlock()
	l.wake()
	return true
}

func (l *loop) run() {
	defer l.close()
	for {
		timeout := -1
		if len(l.again) > 0 {
			timeout = 0
		}
		if scan := l.scanEvery(); scan > 0 {
			ms := int(time.Until(l.nextScan)/time.Millisecond) + 1
			if timeout < 0 || ms < timeout {
				timeout = max(ms, 0)
			}
		}
		l.sleeping.Store(true)
		l.mu.Lock()
		pending := len(l.readyQ) > 0 || len(l.newQ) > 0
		l.mu.Unlock()
		if pending || l.stop.Load() {
			timeout = 0
		}
		n, err := unix.EpollWait(l.epfd, l.events, timeout)
		l.sleeping.Store(false)
		if err != nil && err != unix.EINTR {
			l.s.log.Error("proxy: event loop: epoll_wait failed", "err", err)
			time.Sleep(10 * time.Millisecond)
		}
		for _, ev := range l.events[:max(n, 0)] {
			if int(ev.Fd) == l.efd {
				var b [8]byte
				unix.Read(l.efd, b[:])
				continue
			}
			c := l.clients[ev.Fd]
			if c == nil {
				continue
			}
			if ev.Events&(unix.EPOLLIN|unix.EPOLLHUP|unix.EPOLLERR|unix.EPOLLRDHUP) != 0 {
				c.ls.readable = true
			}
			if ev.Events&(unix.EPOLLHUP|unix.EPOLLERR|unix.EPOLLRDHUP) != 0 {
				c.ls.hup = true // read to the end: a short read is not the end
			}
			l.touch(c)
		}
		l.mu.Lock()
		l.readyB, l.readyQ = l.readyQ, l.readyB[:0]
		for _, c := range l.readyB {
			c.ls.queued = false
		}
		l.newB, l.newQ = l.newQ, l.newB[:0]
		l.mu.Unlock()
		for _, c := range l.newB {
			l.register(c)
			l.touch(c)
		}
		clear(l.newB)
		for _, c := range l.readyB {
			l.touch(c)
		}
		clear(l.readyB)
		for _, c := range l.again {
			l.touch(c)
		}
		clear(l.again)
		l.again = l.again[:0]
		if !l.nextScan.IsZero() && !time.Now().Before(l.nextScan) || l.s.shutting.Load() {
			l.scan()
		}
		l.cork()
		for _, c := range l.touched {
			c.ls.touched = false
			l.process(c)
		}
		l.uncork()
		clear(l.touched)
		l.touched = l.touched[:0]
		if l.stop.Load() && len(l.clients) == 0 {
			return
		}
	}
}

// cork holds back the master connections' writers while the loop
// dispatches a turn's commands: they go out in one write per master
// (uncork), or per corkEvery commands.
func (l *loop) cork() {
	for _, mc := range l.s.cfg.Corks {
		mc.Cork()
	}
	l.corked = 0
}

func (l *loop) uncork() {
	for _, mc := range l.s.cfg.Corks {
		mc.Uncork()
	}
}

// maxReadsPerTurn bounds the socket reads of one client in one turn (of
// up to LoopScratch bytes each, and the commands they held): one that
// sends without pause does not keep the loop from the others.
const maxReadsPerTurn = 4

// corkEvery bounds the commands a turn holds back from the masters: the
// first one's per-master timeout runs meanwhile.
const corkEvery = 64

// register adds a new client's descriptor to the loop.
func (l *loop) register(c *Conn) {
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLET, Fd: c.ls.fd}
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, int(c.ls.fd), &ev); err != nil {
		l.s.log.Error("proxy: event loop: epoll_ctl failed; closing the client", "remote", c.remote, "err", err)
		c.ls.dead = true
	}
	l.clients[c.ls.fd] = c
}

func (l *loop) touch(c *Conn) {
	if !c.ls.touched {
		c.ls.touched = true
		l.touched = append(l.touched, c)
	}
}

// scanEvery is the period of the deadline sweep (0: none needed).
func (l *loop) scanEvery() time.Duration {
	cfg := &l.s.cfg
	d := cfg.WriteTimeout
	for _, t := range []time.Duration{cfg.IdleTimeout, cfg.RequestTimeout, cfg.AuthTimeout} {
		if t > 0 {
			d = min(d, t)
		}
	}
	d = min(max(d/10, 5*time.Millisecond), 250*time.Millisecond)
	if l.nextScan.IsZero() {
		l.nextScan = time.Now().Add(d)
	}
	return d
}

// scan applies the deadlines, and takes every client's turn once Shutdown
// began. A request's and an idle client's clocks run only while the
// goroutine path's reader would wait on the socket: not while the client
// is paused, stalled or has a command in flight. A client past its
// authentication, request or idle deadline is not read again: the replies
// it is due are written, then it is closed (as the goroutine path's
// writer does after its reader's deadline); one that does not read its
// replies (writeTimeout) is closed at once.
func (l *loop) scan() {
	s := l.s
	now := time.Now()
	l.nextScan = now.Add(l.scanEvery())
	shutting := s.shutting.Load()
	for _, c := range l.clients {
		ls := &c.ls
		if l.paused(c) || ls.stallCl != nil || ls.stallCmd != nil || ls.qHead < len(ls.q) {
			ls.lastRead = now
			if !ls.partSince.IsZero() {
				ls.partSince = now
			}
		}
		switch {
		case ls.blocked && now.Sub(ls.outSince) > l.s.cfg.WriteTimeout+WriteSlack:
			ls.dead = true // also during Shutdown
			l.touch(c)
		case shutting || c.ls.killed.Load():
			l.touch(c)
		case ls.eof:
		case !c.authed && !c.authBy.IsZero() && now.After(c.authBy),
			!ls.partSince.IsZero() && now.Sub(ls.partSince) > s.cfg.RequestTimeout,
			// Not idle with bytes waiting to be read: a loop that ran late
			// (a starved or stopped process) finds the deadline past before
			// it learns of the bytes (TestLoopIdleNotWithBytesWaiting). The
			// socket is asked only when the deadline passed.
			s.cfg.IdleTimeout > 0 && len(ls.in) == 0 && !ls.readable && now.Sub(ls.lastRead) > s.cfg.IdleTimeout && !inputWaiting(ls.fd):
			ls.eof, ls.in, ls.partSince = true, nil, time.Time{} // closed silently, as a read deadline closes it
			l.touch(c)
		}
	}
}

// inputWaiting reports whether the socket fd has bytes to read (SIOCINQ).
func inputWaiting(fd int32) bool {
	n, err := unix.IoctlGetInt(int(fd), unix.SIOCINQ)
	return err == nil && n > 0
}

// process takes c's turn: its ready replies are collected, its requests
// read and dispatched while it may be read, its output written (one
// write per turn), and it is closed or moved when its time came.
func (l *loop) process(c *Conn) {
	defer func() {
		if p := recover(); p != nil {
			c.panicked("event loop", p)
			ls := &c.ls
			func() {
				defer func() {
					if recover() != nil {
						ls.dead = true
					}
				}()
				// Earlier replies first, as the goroutine path's writer.
				l.queue(c, ErrReply("ERR redlock proxy internal error; closing the connection", true))
				ls.eof = true
				l.flush(c)
				l.write(c)
			}()
			if ls.dead || (ls.qHead == len(ls.q) && ls.out == nil) {
				l.finish(c)
			}
		}
	}()
	ls := &c.ls
	if ls.moved.Load() || ls.closed() {
		return
	}
	if ls.killed.Load() {
		ls.dead = true
	}
	if !ls.dead {
		l.write(c) // what the socket did not take before (EPOLLOUT)
		l.flush(c)
		l.reads = 0
		for !ls.dead && l.readable(c) {
			if l.reads == maxReadsPerTurn {
				// Fair to the others: the rest next turn.
				l.again = append(l.again, c)
				break
			}
			if !l.read(c) {
				break
			}
			l.flush(c)
		}
		l.flush(c)
		l.write(c)
	}
	ending := ls.closeAfter || ls.moveData != nil ||
		((ls.eof || l.s.shutting.Load()) && !(len(ls.in) > 0 && l.mayHaveCommand(c)))
	if ls.dead || (ending && ls.qHead == len(ls.q) && ls.out == nil) {
		if ls.moveData != nil && !ls.dead && !l.s.shutting.Load() {
			l.move(c)
			return
		}
		l.finish(c)
	}
}

// paused reports whether c's commands are not parsed now: its output
// waits for the socket, it has MaxPipeline commands unanswered or holds
// more than MaxRequestBytes (the goroutine path's backpressure), or it
// ends (QUIT, a protocol error) or moves.
func (l *loop) paused(c *Conn) bool {
	s := l.s
	ls := &c.ls
	return ls.closeAfter || ls.moveData != nil || ls.blocked ||
		len(ls.q)-ls.qHead >= s.cfg.MaxPipeline || c.held.Load() > int64(s.cfg.MaxRequestBytes)
}

// readable reports whether c has a command to dispatch or may be read.
// Commands it sent before its end (EOF) or before Shutdown still run.
func (l *loop) readable(c *Conn) bool {
	ls := &c.ls
	switch {
	case l.paused(c):
		return false
	case ls.stallCl != nil:
		return l.startStalled(c)
	case ls.stallCmd != nil:
		return l.dispatchStalled(c)
	}
	if len(ls.in) > 0 && l.mayHaveCommand(c) {
		return true
	}
	if ls.eof || l.s.shutting.Load() {
		return false
	}
	if len(ls.in) > 0 && ls.partSince.IsZero() {
		ls.partSince = time.Now() // its end is awaited from now: RequestTimeout runs
	}
	return ls.readable
}

// mayHaveCommand reports whether c's leftover bytes may hold a whole
// command (or one the reader refuses): its frame scan, which reads only
// the headers it did not read before.
func (l *loop) mayHaveCommand(c *Conn) bool {
	c.setLoopLimits(l.f)
	return c.ls.scan.MayEnd(c.ls.in, l.f.Reader())
}

// read reads what c sent, behind its leftover bytes, and dispatches the
// complete commands until c is paused; false when nothing more can be
// done now. With nothing to read, the leftover is parsed where it is.
func (l *loop) read(c *Conn) bool {
	s := l.s
	ls := &c.ls
	var data []byte
	got := 0
	if ls.readable && !ls.eof && !s.shutting.Load() && len(ls.in) < len(l.scratch) &&
		(len(ls.in) == 0 || !l.mayHaveCommand(c)) {
		// (A leftover that holds a command is parsed first, where it is.)
		l.reads++
		data = append(l.scratch[:0], ls.in...)
		n, err := unix.Read(int(ls.fd), l.scratch[len(data):])
		switch {
		case err == unix.EAGAIN || err == unix.EINTR:
			ls.readable = false
		case err != nil:
			ls.dead = true
			return false
		case n == 0:
			ls.eof = true
			ls.readable = false
		default:
			got = n
			if len(data)+n < len(l.scratch) && !ls.hup {
				ls.readable = false // a short read: the socket is drained
			}
			ls.lastRead = time.Now()
		}
		data = l.scratch[:len(data)+got]
	} else {
		data = ls.in
	}
	if len(data) == 0 {
		return false
	}
	c.setLoopLimits(l.f)
	authed := c.authed
	rest, size, more, err := l.f.Parse(data, len(ls.in) > 0, &ls.scan, func(cmd resp.Command, start int) bool {
		if movesToGoroutines(cmd.Args[0]) {
			c.hold(-int64(cmd.Size), false)
			l.moveTo(c, data[start:]) // (the goroutine path counts it)
			return false
		}
		s.commands.Add(1)
		l.dispatch(c, cmd.Args, cmd.Size)
		// (A command that changed the connection's authentication ends
		// the batch: the next is parsed within the new limits.)
		return ls.stallCl == nil && ls.stallCmd == nil && !l.paused(c) && c.authed == authed
	})
	switch {
	case ls.moveData != nil:
		return false
	case err != nil:
		c.hold(-int64(size), false)
		ls.in = nil
		if msg := c.readErr(err); msg != "" {
			l.queue(c, ErrReply(msg, true))
		} else {
			ls.dead = true
		}
		ls.eof = true
		return false
	case !more:
		// Stopped: what follows is parsed when the client may be read
		// again (readable says when).
		l.keepIn(c, data, rest)
		ls.partSince = time.Time{}
		return true
	}
	c.hold(-int64(size), false)
	switch part := data[rest:]; {
	case len(part) == len(l.scratch):
		l.moveTo(c, part) // a command larger than a loop parses
	case len(part) == 0:
		ls.in, ls.partSince = nil, time.Time{}
	default:
		if ls.partSince.IsZero() || rest > 0 {
			ls.partSince = time.Now() // this command's first bytes came now
		}
		l.keepIn(c, data, rest)
	}
	return got > 0 && ls.readable
}

// keepIn keeps data[rest:], what c sent and was not parsed, as its
// leftover: the tail of the leftover itself when data is it (no copy),
// else a copy in a buffer of about its size (an idle connection keeps
// none).
func (l *loop) keepIn(c *Conn, data []byte, rest int) {
	ls := &c.ls
	b := data[rest:]
	switch {
	case len(b) == 0:
		ls.in = nil
	case len(ls.in) > 0 && &data[0] == &ls.in[0]:
		ls.in = b
	case cap(ls.in) >= len(b) && cap(ls.in) <= 2*len(b)+512:
		ls.in = append(ls.in[:0], b...)
	default:
		ls.in = append(make([]byte, 0, len(b)), b...)
	}
}

// moveTo makes c move to the goroutine path once its replies are written,
// reading data first.
func (l *loop) moveTo(c *Conn, data []byte) {
	c.ls.moveData = append([]byte{}, data...)
	c.ls.in = nil
}

// movesToGoroutines reports whether a command moves its connection to
// the goroutine path: subscribed mode's pushed frames are the writer
// goroutine's.
func movesToGoroutines(name []byte) bool {
	if len(name) < 9 || len(name) > 12 {
		return false
	}
	switch Lower(name) {
	case "subscribe", "ssubscribe", "psubscribe", "unsubscribe", "sunsubscribe", "punsubscribe":
		return true
	}
	return false
}

// dispatch runs one command of c, as the goroutine path's reader does.
func (l *loop) dispatch(c *Conn, args [][]byte, size int) {
	if n := len(args); c.tracked()+n > maxTrackedKeys && !c.orderRoom(n) {
		c.ls.stallCmd, c.ls.stallSize = args, size
		return
	}
	c.direct = false
	if l.corked++; l.corked >= corkEvery {
		l.uncork()
		l.cork()
	}
	cl := c.dispatch(args)
	cl.size += int64(size)
	if cl.a == nil {
		c.hold(cl.replyBytes(), false)
		l.queue(c, cl)
		return
	}
	l.queue(c, cl)
	if cl.a.pending.Add(-1) != 0 {
		return // the last predecessor to finish runs it
	}
	cl.a.arrived = time.Now()
	c.ls.stallCl = cl
	l.startStalled(c)
}

// startStalled starts c's call that waits for an in-flight slot, if it
// has one; it reports whether c may be read on. With no slot free, a
// goroutine waits for one in the semaphore's queue, with the goroutine
// path's readers (first come, first served), and hands it to the loop.
func (l *loop) startStalled(c *Conn) bool {
	if !l.slot(c) {
		return false
	}
	cl := c.ls.stallCl
	c.ls.stallCl = nil
	l.s.submit(cl)
	return true
}

// slot reports whether c holds an in-flight slot for its stalled call:
// one free now, or the one its waiting goroutine got (which then brings c
// back to the loop).
func (l *loop) slot(c *Conn) bool {
	ls := &c.ls
	if ls.slotWait {
		if !ls.slotGot.Load() {
			return false
		}
		ls.slotWait = false
		ls.slotGot.Store(false)
		return true
	}
	select {
	case l.s.inflight <- struct{}{}:
		return true
	default:
		ls.slotWait = true
		go func() {
			l.s.inflight <- struct{}{}
			ls.slotGot.Store(true)
			l.ready(c)
		}()
		return false
	}
}

// dispatchStalled dispatches c's command that waits for room in its
// ordering map, if there is room; it reports whether c may be read on.
func (l *loop) dispatchStalled(c *Conn) bool {
	args := c.ls.stallCmd
	if !c.orderRoom(len(args)) {
		return false // each of c's commands that completes brings it back (ready)
	}
	c.ls.stallCmd = nil
	l.dispatch(c, args, c.ls.stallSize)
	return c.ls.stallCl == nil && c.ls.stallCmd == nil
}

// queue appends cl to c's replies in request order.
func (l *loop) queue(c *Conn, cl *Call) {
	c.ls.q = append(c.ls.q, cl)
	if cl.closeAfter {
		c.ls.closeAfter = true
	}
}

// flush moves c's ready replies to its output, in order; the output is
// written at the end of the turn (write), or here once it reaches FlushAt.
func (l *loop) flush(c *Conn) {
	ls := &c.ls
	for ls.qHead < len(ls.q) {
		cl := ls.q[ls.qHead]
		if !ready(cl) {
			break
		}
		if !ls.dead && len(cl.out) > 0 {
			if ls.out == nil {
				ls.out = GetBatch()
			}
			ls.out.B = append(ls.out.B, cl.reply(c.s)...)
		}
		c.hold(-cl.size-cl.replyBytes(), false)
		cl.release()
		ls.q[ls.qHead] = nil
		ls.qHead++
		if cl.closeAfter {
			ls.closeAfter = true
			ls.eof = true
			break
		}
		if ls.out != nil && len(ls.out.B) >= FlushAt {
			l.write(c)
			if ls.blocked {
				break
			}
		}
	}
	if ls.qHead == len(ls.q) {
		ls.q, ls.qHead = ls.q[:0], 0
		if cap(ls.q) > 64 {
			ls.q = nil
		}
	}
}

// write writes c's output, as much as the socket takes; what it does not
// take blocks c (paused) until EPOLLOUT says it may take more. A client
// whose output stays blocked writeTimeout+WriteSlack is closed (scan).
func (l *loop) write(c *Conn) {
	ls := &c.ls
	if ls.out == nil {
		return
	}
	if ls.dead {
		ls.dropOut()
		return
	}
	n, err := unix.Write(int(ls.fd), ls.out.B)
	switch {
	case err == unix.EAGAIN || err == unix.EINTR:
		n = 0
	case err != nil:
		ls.dead = true
		ls.dropOut()
		return
	}
	if n == len(ls.out.B) {
		// Written: an idle connection keeps no buffer (the goroutine
		// path's writer returns its batch buffer likewise).
		ls.dropOut()
		ls.blocked, ls.outSince = false, time.Time{}
		return
	}
	if !ls.blocked {
		ls.blocked, ls.outSince = true, time.Now()
	}
	ls.out.B = append(ls.out.B[:0], ls.out.B[n:]...)
}

// finish closes c once every command it started ended (their replies'
// memory is given back as they end).
func (l *loop) finish(c *Conn) {
	ls := &c.ls
	if ls.fd >= 0 {
		delete(l.clients, ls.fd)
		unix.Close(int(ls.fd))
		ls.fd = -1
	}
	ls.dead = true
	l.flush(c) // gives back what is ready
	ls.dropOut()
	if ls.qHead < len(ls.q) || ls.stallCl != nil {
		if cl := ls.stallCl; cl != nil {
			// Never started: completed (unanswered) without reaching the
			// masters, so that nothing waits for it, in the slot it
			// needs to give back or hand on (which the loop must not wait
			// for: the slot's goroutine brings c back here).
			if !l.slot(c) {
				return
			}
			ls.stallCl = nil
			cl.a.drop()
			c.completeCB(cl, Fixed(nil), nil) // brings c back here
		}
		return // the last completion brings c back here (ready)
	}
	if ls.stallCmd != nil {
		c.hold(-int64(ls.stallSize), false)
		ls.stallCmd = nil
	}
	if ls.q == nil && ls.closed() {
		return
	}
	ls.q, ls.in = nil, nil
	ls.dropOut()
	c.hold(-c.held.Load(), false)
	c.giveBackOrder()
	l.s.loopClients.Add(-1)
	c.done()
	ls.fd = -2 // finished
}

func (ls *loopState) closed() bool { return ls.fd == -2 }

// move hands c to the goroutine path: it reads c.ls.moveData first.
func (l *loop) move(c *Conn) {
	s := l.s
	fd := int(c.ls.fd)
	delete(l.clients, c.ls.fd)
	unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, fd, nil)
	f := os.NewFile(uintptr(fd), "client")
	nc, err := net.FileConn(f)
	f.Close()
	c.ls.fd = -1
	if err != nil {
		s.logLimited("proxy: event loop: could not hand a client to a goroutine; closing it", "remote", c.remote, "err", err)
		c.ls.dead = true
		l.finish(c)
		return
	}
	data := c.ls.moveData
	c.ls.moveData, c.ls.q, c.ls.in = nil, nil, nil
	c.ls.dropOut()
	c.ls.moved.Store(true)
	s.mu.Lock()
	c.nc = nc
	c.initGoroutines(&prefixReader{pre: data, c: c})
	s.mu.Unlock()
	s.loopMoves.Add(1)
	s.loopClients.Add(-1)
	go c.run()
}

// stopLoops ends the loops once every client is gone (Close).
func (s *Server) stopLoops() {
	for _, l := range s.loops {
		l.stop.Store(true)
		l.kick()
	}
	s.loopWG.Wait()
}

// interruptLoops makes the loops take every client's turn (Shutdown).
func (s *Server) interruptLoops() {
	for _, l := range s.loops {
		l.kick()
	}
}
