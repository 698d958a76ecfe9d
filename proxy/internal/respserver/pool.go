package respserver

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/tidwall/redcon"
)

// How asynchronous commands run.
//
// A command that touches the masters is an asynchronous call: its reply is
// computed by run. The reader decides where run runs:
//
//   - directly on the reader goroutine, when the connection has nothing
//     else in flight and nothing more buffered (a client that waits for
//     each reply: redis-benchmark -P 1, most lock libraries). The reader
//     then writes the reply itself, with no hand-off to a command
//     goroutine or to the writer, and reuses one call (client.dcall) for
//     every such command: nothing else ever refers to it;
//   - otherwise on a worker of the server's pool (Workers: a bounded
//     github.com/panjf2000/ants/v2 pool; it replaced a goroutine per
//     command, measured in docs/history/benchmarks-journal.md).
//
// Either way the command first takes one of MaxInFlight slots (the reader
// waits for it), so at most MaxInFlight commands run at once and the pool
// never has to queue. A command that must wait for an earlier in-flight
// command of its connection on the same key takes no slot and no worker:
// it is registered on that command (call.next) and run by the worker that
// finishes the last of its predecessors, on that worker and in its slot.
// No worker ever waits for a slot, a worker or another command, so a full
// pool cannot deadlock.
//
// Replies are built in bytebufferpool buffers: run appends to dst (a
// pooled buffer) and the buffer goes back to the pool once the reply has
// been copied to the connection's write buffer (itself pooled between
// writes) or written.

// Reply and batch buffers come from the server room's pools
// (GetBuffer, GetBatch): a small reply never gets a batch-sized
// buffer (its capacity is charged).

// AsyncFunc computes an asynchronous command's reply. It appends the reply
// to dst (a pooled buffer) or returns a slice of its own; never one it
// shares (the result becomes a pooled buffer).
type AsyncFunc func(ctx context.Context, dst []byte) []byte

// ReplyFunc builds a reply: appended to dst, or a slice of its own.
type ReplyFunc func(dst []byte) []byte

// AppendReply implements [Replier].
func (f ReplyFunc) AppendReply(dst []byte) []byte { return f(dst) }

// Replier builds a reply, as a ReplyFunc does: a value that already holds
// what the reply needs implements it without a closure.
type Replier interface {
	AppendReply(dst []byte) []byte
}

// AsyncCommand is an asynchronous command that can also start without a
// goroutine, as one value: the commands served at every request's rate
// (SET NX PX, the release and extension scripts) keep their state in one
// allocation. A command that has a start still runs by Run where it runs
// on a goroutine anyway (direct, or after an earlier command of its
// connection on the same key).
type AsyncCommand interface {
	// Run computes the reply on a goroutine, as an AsyncFunc does.
	Run(ctx context.Context, dst []byte) []byte
	// Start starts the command whose reply is computed where the masters'
	// answers complete it (engine.TryLockAsync): it calls done.Reply
	// exactly once (a later call is ignored), and must not block.
	Start(done Done)
}

// Expiring is implemented by an [AsyncCommand], or the [Replier] that
// completes one, whose reply is a lock's grant or renewal: true only until
// the lock's validity ends (Expires; the zero time: no end, as for a
// refusal). A connection's replies go out in request order, so a reply
// may wait for an earlier, slower command's; one still unwritten when its
// validity ended goes out as [MsgExpired] instead — a grant is answered
// only while it is valid (the grant rule's property c).
type Expiring interface {
	Expires() time.Time
}

// ExpireReply is [Expiring] for an [AsyncFunc]: called with the ctx the
// function was given, it marks the reply it returns as true only until
// deadline. With several calls the earliest counts; outside an
// asynchronous command it does nothing.
func ExpireReply(ctx context.Context, deadline time.Time) {
	if cc, ok := ctx.Value(callKey{}).(*callCtx); ok {
		cc.cl.expireAt(cc.s, deadline)
	}
}

// callKey finds the call an asynchronous command runs for in its ctx.
type callKey struct{}

// callCtx is the server's context with the call it runs for.
type callCtx struct {
	context.Context
	s  *Server
	cl *Call
}

func (c *callCtx) Value(k any) any {
	if k == (callKey{}) {
		return c
	}
	return c.Context.Value(k)
}

// expireAt sets when cl's reply stops being true (the earliest of
// several).
func (cl *Call) expireAt(s *Server, deadline time.Time) {
	if deadline.IsZero() {
		return
	}
	at := max(int64(deadline.Sub(s.start)), 1)
	for cur := cl.expires.Load(); cur == 0 || at < cur; cur = cl.expires.Load() {
		if cl.expires.CompareAndSwap(cur, at) {
			return
		}
	}
}

// reply is what to write for cl now: its reply, or MsgExpired once a
// grant's validity ended (Expiring).
func (cl *Call) reply(s *Server) []byte {
	if at := cl.expires.Load(); at != 0 && int64(time.Since(s.start)) >= at {
		s.expiredReplies.Add(1)
		return expiredReply // an error reads the same in RESP2 and RESP3
	}
	return cl.out
}

var expiredReply = redcon.AppendError(nil, MsgExpired)

// Done completes a started [AsyncCommand].
type Done struct {
	c  *Conn
	cl *Call
}

// Reply completes the command with the reply r builds (completeCB runs it
// under its recover); only the first call counts.
func (d Done) Reply(r Replier) {
	if d.cl.a.completed.CompareAndSwap(false, true) {
		d.c.completeCB(d.cl, r, nil)
	}
}

// fixed is a ReplyFunc of a reply already built.
func Fixed(out []byte) ReplyFunc { return func([]byte) []byte { return out } }

// asyncState is the part of a call used by asynchronous commands.
type asyncState struct {
	c       *Conn
	run     AsyncFunc    // nil once run (it holds the request's arguments)
	cmd     AsyncCommand // instead of run (AsyncCmd): it can start; nil once run or started
	arrived time.Time    // when the reader started it (admission.go)
	started time.Time    // when admitted to the masters (zero: not admitted)
	pending atomic.Int32 // predecessors not finished, +1 while the reader sets it up
	// completed is set by the first completion of a call started by its
	// AsyncCommand (startCB): a second is ignored, and so is a panic after
	// it (but counted and logged).
	completed atomic.Bool
	mu        sync.Mutex // guards next, and closing done
	next      []*Call    // commands waiting for this one (guarded by mu)
}

// asyncCall is an asynchronous call with its state.
type asyncCall struct {
	call  Call
	state asyncState
}

// Async returns an asynchronous call of f, not started: the reader starts
// it (start or runDirect). Commands of one connection run concurrently,
// except that a command waits for the connection's earlier in-flight
// commands on the same keys (so a pipelined SET then release of one key
// keep their order).
func (c *Conn) Async(keys [][]byte, f AsyncFunc) *Call {
	if c.direct {
		// Nothing of this connection is in flight, and nothing will wait
		// for this command (it enters no ordering map): the reader's own
		// call is reused, with no done channel (runDirect).
		c.dstate = asyncState{c: c, run: f}
		c.dcall = Call{a: &c.dstate}
		return &c.dcall
	}
	ac := &asyncCall{} // the call and its state in one allocation
	cl := &ac.call
	cl.done, cl.a = make(chan struct{}), &ac.state
	cl.a.c, cl.a.run = c, f
	cl.a.pending.Store(1)
	for _, p := range c.order(keys, cl) {
		p.a.mu.Lock()
		if !ready(p) {
			p.a.next = append(p.a.next, cl)
			cl.a.pending.Add(1)
		}
		p.a.mu.Unlock()
	}
	return cl
}

// drop forgets how to run the command (what it holds: the request's
// arguments), once it ran, started or was answered without running.
func (a *asyncState) drop() { a.run, a.cmd = nil, nil }

// AsyncCmd is Async for a command that can also start without a goroutine
// (cmd.Start): started by the reader with no predecessor in flight, it
// holds its in-flight slot until the masters' answers complete it, and no
// worker waits for it.
func (c *Conn) AsyncCmd(keys [][]byte, cmd AsyncCommand) *Call {
	cl := c.Async(keys, nil)
	cl.a.cmd = cmd
	return cl
}

// start runs cl on the pool once its predecessors finished: the reader
// calls it after queueing cl for the writer.
func (c *Conn) start(cl *Call) {
	if cl.a.pending.Add(-1) != 0 {
		return // the last predecessor to finish runs it
	}
	cl.a.arrived = time.Now()
	c.s.inflight <- struct{}{}
	c.s.submit(cl)
}

// startCB starts cl (holding a slot) by its AsyncCommand's Start;
// completeCB finishes it where its reply is computed.
func (c *Conn) startCB(cl *Call) {
	bb := GetBuffer()
	if cap(bb.B) == 0 {
		bb.B = make([]byte, 0, 64)
	}
	cl.bb = bb
	cmd := cl.a.cmd
	cl.a.drop() // (Run is a dependent's way only)
	completed := &cl.a.completed
	func() {
		defer func() {
			p := recover()
			switch {
			case p == nil:
			case completed.CompareAndSwap(false, true):
				c.completeCB(cl, nil, p)
			default: // after its reply, which stands: counted and logged
				c.s.panics.Add(1)
				c.s.logLimited("proxy: recovered a panic after a command's reply; the connection stays open",
					"remote", c.remote, "client", c.id, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			}
		}()
		cmd.Start(Done{c, cl})
	}()
}

// completeCB completes a call started by startCB with its reply (or the
// panic that took its place), gives its slot back or hands it to the
// first of the commands that were waiting for it, and runs those on the
// pool: the goroutine that completes it (a master connection's reader)
// never waits for a slot or runs a command.
func (c *Conn) completeCB(cl *Call, build Replier, panicked any) {
	s := c.s
	var next []*Call
	var out []byte
	func() {
		// As runOne's: the reply (or the panic's) is charged, done closed.
		defer func() {
			if p := recover(); p != nil {
				panicked = p
			}
			if panicked != nil {
				c.panicked("command", panicked)
				out = redcon.AppendError(nil, "ERR redlock proxy internal error; closing the connection")
				cl.closeAfter = true
			}
			if bb := cl.bb; bb != nil {
				if cap(out) > 0 && cap(bb.B) > 0 && unsafe.SliceData(out) == unsafe.SliceData(bb.B) {
					bb.B = out
				} else {
					PutBuffer(bb)
					cl.bb = nil
				}
			}
			cl.out = out
			next = c.completed(cl)
		}()
		if h := testHook.Load(); h != nil {
			(*h)("async", nil)
		}
		if panicked == nil && build != nil {
			var dst []byte
			if cl.bb != nil {
				dst = cl.bb.B[:0]
			}
			out = build.AppendReply(dst)
			if x, ok := build.(Expiring); ok {
				cl.expireAt(s, x.Expires())
			}
		}
	}()
	var ready []*Call
	for _, d := range next {
		if d.a.pending.Add(-1) == 0 {
			ready = append(ready, d)
		}
	}
	if !cl.a.started.IsZero() {
		s.admitted(cl.a.started)
	}
	if len(ready) == 0 {
		<-s.inflight
		return
	}
	s.invoke(ready[0]) // in this call's slot
	for _, d := range ready[1:] {
		go func() { // rare: a command waiting for several keys' predecessors
			s.inflight <- struct{}{}
			s.invoke(d)
		}()
	}
}

// execute runs cl, which holds an in-flight slot, then the commands that
// were waiting for it and are now free to run, in that same slot; then it
// gives the slot back. Pool workers run it.
func execute(cl *Call) {
	s := cl.a.c.s
	// Deferred: even a panic escaping runOne (its own recovery calls the
	// user's logger) gives the slot back.
	started := cl.a.started
	defer func() {
		if !started.IsZero() {
			s.admitted(started)
		}
		<-s.inflight
	}()
	var buf [4]*Call
	queue := append(buf[:0], cl)
	for len(queue) > 0 {
		cl := queue[0]
		queue = queue[1:]
		for _, d := range cl.a.c.runOne(cl) {
			if d.a.pending.Add(-1) == 0 {
				queue = append(queue, d)
			}
		}
	}
}

// runOne computes cl's reply, recovering a panic (which costs this
// connection only), and completes cl: it returns the commands that were
// waiting for it.
func (c *Conn) runOne(cl *Call) (next []*Call) {
	defer func() {
		if p := recover(); p != nil {
			c.panicked("command", p)
			cl.out = redcon.AppendError(nil, "ERR redlock proxy internal error; closing the connection")
			cl.closeAfter = true
		}
		cl.a.drop()
		next = c.completed(cl)
	}()
	if h := testHook.Load(); h != nil {
		(*h)("async", nil)
	}
	bb := GetBuffer()
	if cap(bb.B) == 0 {
		bb.B = make([]byte, 0, 64) // a fresh buffer: room for the usual replies
	}
	// Every engine operation ends by its per-master deadlines, so the
	// server's context (cancelled by Close) is the only one needed.
	if cmd := cl.a.cmd; cmd != nil {
		cl.out = cmd.Run(c.s.baseCtx, bb.B[:0])
		if x, ok := cmd.(Expiring); ok {
			cl.expireAt(c.s, x.Expires())
		}
	} else {
		cl.out = cl.a.run(&callCtx{c.s.baseCtx, c.s, cl}, bb.B[:0]) // ExpireReply finds cl in it
	}
	if cap(cl.out) > 0 && cap(bb.B) > 0 && unsafe.SliceData(cl.out) == unsafe.SliceData(bb.B) {
		bb.B = cl.out
		cl.bb = bb
	} else {
		// A reply in memory of its own (grown past the buffer, or a
		// slice run did not build in dst): it never enters the pool.
		PutBuffer(bb)
	}
	return nil
}

// completed makes cl's reply final: in the connection's protocol,
// charged to the connection, done closed (nil for a direct call, which
// nothing waits for); a loop's connection goes back to its loop, which
// writes it. It returns the commands that were waiting for cl.
func (c *Conn) completed(cl *Call) (next []*Call) {
	if cl.resp3 {
		cl.out = toRESP3(cl.out)
	}
	c.hold(cl.replyBytes(), false)
	cl.a.mu.Lock()
	if cl.done != nil {
		close(cl.done)
	}
	next, cl.a.next = cl.a.next, nil
	cl.a.mu.Unlock()
	if c.lp != nil {
		c.lp.ready(c) // its loop writes the reply
	}
	return next
}

// runDirect runs cl on the reader goroutine and writes its reply (the
// connection has nothing else in flight, so the writer is idle). It
// reports whether the connection stays open.
func (c *Conn) runDirect(cl *Call) bool {
	c.s.inflight <- struct{}{}
	c.runOne(cl) // no command can wait for it: it is not in the ordering map
	<-c.s.inflight
	return c.writeDirect(cl)
}

// writeDirect writes a ready reply from the reader goroutine, which may do
// so only while no earlier reply is unwritten (c.unwritten == 0). It
// reports whether the connection stays open.
func (c *Conn) writeDirect(cl *Call) bool {
	var err error
	if len(cl.out) > 0 { // empty: SUBSCRIBE's, whose frames the writer writes
		c.armWrite()
		_, err = c.nc.Write(cl.reply(c.s))
	}
	c.hold(-cl.size-cl.replyBytes(), false)
	cl.release()
	if err != nil || cl.closeAfter {
		c.nc.Close()
		return false
	}
	return true
}

// replyBytes is what cl's reply is charged to the client's memory: its
// pooled buffer's capacity, or its length.
func (cl *Call) replyBytes() int64 {
	if cl.bb != nil {
		return int64(cap(cl.bb.B))
	}
	return int64(len(cl.out))
}

// release gives cl's reply buffer back; cl.out is no longer used.
func (cl *Call) release() {
	if cl.bb != nil {
		PutBuffer(cl.bb)
		cl.bb = nil
	}
	cl.size, cl.out = 0, nil // the ordering map may keep the call a while
	cl.expires.Store(0)
}

// startPool creates the server's worker pool (Workers).
func (s *Server) startPool() error {
	p, err := NewWorkers(s.cfg.MaxInFlight, execute)
	if err != nil {
		return err
	}
	s.workers = p
	return nil
}

// invoke runs cl (holding a slot) on the pool.
func (s *Server) invoke(cl *Call) {
	if err := s.workers.Invoke(cl); err != nil {
		// Only a released pool refuses, and it is released after every
		// reader returned; run it anyway rather than lose a reply.
		go execute(cl)
	}
}
