package respserver

import (
	"crypto/tls"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"net"
	"runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tidwall/redcon"
	"github.com/valyala/bytebufferpool"

	"github.com/redlock-dev/redlock/resp"
)

// maxTrackedKeys bounds the per-key ordering state of one connection (see
// client.order): beyond it the reader waits for earlier commands.
const maxTrackedKeys = 4096

// client is one client connection: a reader goroutine (serve) parses and
// dispatches commands in order, a writer goroutine writes their replies in
// the same order.
type Conn struct {
	s       *Server
	nc      net.Conn
	remote  string
	id      int64
	created time.Time
	rd      *resp.CommandReader
	calls   chan *Call    // dispatched commands in request order; closed by the reader
	drained chan struct{} // the writer released bytes (cap 1)
	wdone   chan struct{} // closed when the writer returns
	wfail   chan struct{} // closed when the writer can no longer write (it panicked)

	held      atomic.Int64 // bytes of unanswered requests and unwritten replies
	wdlSet    atomic.Int64 // when the write deadline was last set, since created (armWrite)
	unwritten atomic.Int64 // calls queued for the writer and not yet written
	// msgs, once the connection subscribed (pubsub.go), queues pushed
	// frames for the writer.
	msgs atomic.Pointer[msgQueue]
	// resp3: the connection asked for RESP3 (HELLO 3). Set by the reader
	// (HELLO, RESET); read by publish, which builds its push frames.
	resp3 atomic.Bool

	// Owned by the reader goroutine:
	direct bool // the command being dispatched runs on the reader (pool.go)
	armed  bool // the next socket read starts RequestTimeout (deadlineReader)
	dlSet  bool // a read deadline may be set on the socket
	batch  int  // commands read since the buffer was last empty
	alone  bool // the last batch (commands until the buffer was empty) was one command
	// dcall and dstate are the call of the command that runs on the
	// reader (direct), reused from one such command to the next.
	dcall  Call
	dstate asyncState

	// Owned by the reader goroutine (commands that change them run there):
	authed    bool
	authFails int
	name, lib string
	lastByKey map[uint64]*Call // last command per key hash (see order)
	soloKey   uint64           // with solo: the one key tracked outside lastByKey (see order)
	solo      *Call
	sweepAt   int // len(lastByKey) at which finished entries are swept
	// orderPeak is the most entries lastByKey held since it was made:
	// a Go map keeps the tables it grew to. Entries beyond orderFree are
	// charged to MaxClientMemory (orderMem, bytes) until the map is dropped:
	// when the connection settles, or closes (giveBackOrder).
	orderPeak int
	orderMem  atomic.Int64
	authBy    time.Time // with a password: when an unauthenticated connection is closed
	sub       *subState // subscriptions (pubsub.go); nil before the first SUBSCRIBE

	// An event loop's client (loop_linux.go): lp is its loop (set at
	// creation, never changed), ls its state there; nc is nil until the
	// connection moves to the goroutine path (set under s.mu).
	lp     *loop
	ls     loopState
	growFn func(n int) bool // rd.Grow
}

// call is one command's reply slot.
type Call struct {
	done       chan struct{} // closed when out is final (nil for a direct call: nothing waits for it)
	out        []byte
	bb         *bytebufferpool.ByteBuffer // out's pooled buffer, if any (call.release)
	size       int64                      // bytes of the request, held with len(out) until the writer took the reply
	closeAfter bool                       // QUIT, protocol error, panic: close after writing
	resp3      bool                       // an asynchronous reply goes out in RESP3 (built in RESP2: resp.ToRESP3)
	a          *asyncState                // asynchronous commands only (pool.go)
	// expires, when not 0, is when out stops being true, as time since
	// the server's start: a lock's grant or renewal, whose validity ends
	// then (ExpireReply, Expiring). A reply still unwritten by then —
	// held behind the connection's earlier replies — goes out as
	// MsgExpired instead (Call.reply).
	expires atomic.Int64
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// newClient returns the client of nc (nil: an event loop's, whose
// address is remote).
func newClient(s *Server, nc net.Conn, remote string) *Conn {
	c := &Conn{s: s, nc: nc, remote: remote, id: s.nextID.Add(1), created: time.Now(),
		authed: s.cfg.RequirePass == ""}
	c.growFn = func(n int) bool {
		if !c.authed && c.held.Load()+int64(n) > freeClientBytes {
			return false // unauthenticated: the free allowance only
		}
		return c.hold(int64(n), true)
	}
	if nc != nil {
		c.initGoroutines(deadlineReader{c})
	}
	if !c.authed {
		c.authBy = c.created.Add(s.cfg.AuthTimeout)
	}
	return c
}

// initGoroutines prepares the goroutine path: a reader of src, and the
// channels between the reader and the writer.
func (c *Conn) initGoroutines(src io.Reader) {
	c.calls = make(chan *Call, c.s.cfg.MaxPipeline)
	c.drained, c.wdone, c.wfail = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
	c.rd = resp.NewCommandReader(src, ReadBufferSize)
	c.rd.Grow = c.growFn
}

// hold adds n bytes (n < 0: gives them back) to what the connection holds;
// the part beyond its free allowance is charged to MaxClientMemory. A
// refusable growth fails, changing nothing, when the budget is exhausted.
// Lock-free: each change of held applies exactly its own share to the
// server's count, so concurrent changes add up.
func (c *Conn) hold(n int64, refusable bool) bool {
	now := c.held.Add(n)
	delta := max(0, now-freeClientBytes) - max(0, now-n-freeClientBytes)
	if delta == 0 {
		return true
	}
	if c.s.mem.Add(delta) > int64(c.s.cfg.MaxClientMemory) && refusable && delta > 0 {
		c.s.memRefused.Add(1)
		c.hold(-n, false) // gives back delta too
		return false
	}
	return true
}

func (c *Conn) serve() {
	if tc, ok := c.nc.(*tls.Conn); ok {
		// A TLS listener: finish the handshake first, within the request
		// timeout, so that a client that never sends its hello (or no
		// acceptable certificate) cannot hold a client slot.
		tc.SetDeadline(time.Now().Add(min(c.s.cfg.RequestTimeout, c.s.cfg.AuthTimeout)))
		if err := tc.Handshake(); err != nil {
			c.s.logLimited("proxy: TLS handshake failed; closing the client", "remote", c.remote, "err", err)
			c.nc.Close()
			c.done()
			return
		}
		tc.SetDeadline(time.Time{})
	}
	c.run()
}

// done unregisters a client that ended.
func (c *Conn) done() {
	s := c.s
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.clients.Add(-1)
	s.wg.Done()
}

// run serves the connection on the goroutine path: a reader and a writer.
func (c *Conn) run() {
	defer c.done()
	go c.writeLoop()
	c.guard("reader", c.readLoop)
	c.unsubscribeAll()
	close(c.calls)
	<-c.wdone
	c.nc.Close()
	c.hold(-c.held.Load(), false) // whatever a panic left accounted
	c.giveBackOrder()
}

// guard runs f; a panic in it is logged with the client's address, counted,
// and ends this connection only.
func (c *Conn) guard(where string, f func()) {
	defer func() {
		if p := recover(); p != nil {
			c.panicked(where, p)
			if where == "reader" {
				// The writer sends this, then closes the connection.
				c.push(ErrReply("ERR redlock proxy internal error; closing the connection", true))
				return
			}
			c.nc.Close()
		}
	}()
	f()
}

func (c *Conn) panicked(where string, p any) {
	c.s.panics.Add(1)
	c.s.log.Error("proxy: recovered a panic; closing that client's connection",
		"remote", c.remote, "client", c.id, "in", where, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
}

func (c *Conn) readLoop() {
	s := c.s
	for {
		shutting := s.shutting.Load()
		if shutting && c.rd.Buffered() == 0 {
			return
		}
		// Backpressure: a client holding more than one request's worth of
		// unanswered requests and unwritten replies is not read until the
		// writer catches up (a client that pipelines without reading).
		for c.held.Load() > int64(s.cfg.MaxRequestBytes) {
			select {
			case <-c.drained:
			case <-c.wdone:
				return
			case <-c.wfail:
				return
			case <-s.baseCtx.Done(): // Close: never kept waiting here
				return
			}
		}
		c.setLimits()
		if shutting {
			// Commands already received still run (Shutdown lets them
			// finish); the socket is not read again.
			c.nc.SetReadDeadline(time.Now())
			c.dlSet = true
		} else if c.rd.Buffered() == 0 {
			// Wait for the next request (IdleTimeout), then give it
			// RequestTimeout to arrive whole (slow-loris): the deadline is
			// set by the first read the request needs beyond what Wait
			// read (deadlineReader), so a request that came in one read
			// costs no deadline change.
			if s.cfg.IdleTimeout > 0 || c.dlSet || !c.authed {
				c.setDeadline(s.cfg.IdleTimeout)
			}
			if err := c.rd.Wait(); err != nil {
				return
			}
		}
		c.armed = true
		cmd, err := c.rd.ReadCommand()
		c.armed = false
		if err != nil {
			c.hold(-int64(cmd.Size), false)
			if msg := c.readErr(err); msg != "" {
				c.push(ErrReply(msg, true))
			}
			return
		}
		s.commands.Add(1)
		// Nothing of this connection in flight and nothing more sent, by a
		// client whose last batch was one command too (a pipelining
		// client's batch can arrive split, its first part one command):
		// the command runs here and the reader writes its reply (pool.go).
		c.batch++
		end := c.rd.Buffered() == 0
		// (Never once subscribed: the writer may be writing a pushed
		// message at any moment.)
		c.direct = end && c.batch == 1 && c.alone && c.unwritten.Load() == 0 && c.sub == nil
		if c.direct {
			// Settled, and a direct command enters no ordering state: what
			// is left goes now, or it stayed charged while the client waits
			// for each reply (CI's red run of 2026-11-29).
			c.forgetOrder()
		}
		if end {
			c.alone, c.batch = c.batch == 1, 0
		}
		cl := c.dispatch(cmd.Args)
		cl.size += int64(cmd.Size) // dispatch set what it charged beyond the request
		switch {
		case c.direct && cl.a != nil:
			if !c.runDirect(cl) {
				return
			}
		case c.direct:
			c.hold(cl.replyBytes(), false)
			if !c.writeDirect(cl) {
				return
			}
		case cl.a != nil:
			c.queue(cl)
			c.start(cl)
		default:
			c.push(cl)
			if cl.closeAfter {
				return
			}
		}
	}
}

// deadlineReader is what the connection's CommandReader reads: a read
// inside a request (armed) sets the request's deadline first.
type deadlineReader struct{ c *Conn }

func (r deadlineReader) Read(p []byte) (int, error) {
	c := r.c
	if c.armed {
		c.armed = false
		c.setDeadline(c.s.cfg.RequestTimeout)
	}
	return c.nc.Read(p)
}

// setDeadline sets the read deadline d from now (0: none), never later
// than the authentication deadline, and at once when Shutdown began.
func (c *Conn) setDeadline(d time.Duration) {
	var dl time.Time
	if d > 0 {
		dl = time.Now().Add(d)
	}
	if !c.authed && !c.authBy.IsZero() && (dl.IsZero() || c.authBy.Before(dl)) {
		dl = c.authBy
	}
	c.nc.SetReadDeadline(dl)
	c.dlSet = !dl.IsZero()
	if c.s.shutting.Load() { // Shutdown's deadline may just have been overwritten
		c.nc.SetReadDeadline(time.Now())
		c.dlSet = true
	}
}

// setLimits applies the request limits of the connection's auth state.
func (c *Conn) setLimits() { c.limit(c.rd) }

// setLoopLimits makes f parse for c: its limits and its memory.
func (c *Conn) setLoopLimits(f *Framer) {
	c.limit(f.Reader())
	f.Reader().Grow = c.growFn
}

func (c *Conn) limit(rd *resp.CommandReader) {
	cfg := &c.s.cfg
	rd.MaxArgs, rd.MaxBulkLen = cfg.MaxArgs, cfg.MaxRequestBytes
	if !c.authed {
		rd.MaxArgs, rd.MaxBulkLen = min(cfg.MaxArgs, unauthMaxArgs), min(cfg.MaxRequestBytes, unauthMaxBulkLen)
	}
	rd.MaxCommandLen = cfg.MaxRequestBytes
	rd.MaxInlineLen = min(cfg.MaxRequestBytes, resp.DefaultMaxInlineLen)
}

// readErr returns the error reply for a failed read ("" to close silently).
func (c *Conn) readErr(err error) string {
	var ne net.Error
	var pe *resp.ProtocolError
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed), errors.As(err, &ne):
		return ""
	case errors.As(err, &pe):
		if pe.Reason != resp.ReasonMemory || !c.authed {
			// An authenticated client's ReasonMemory is a refusal at
			// MaxClientMemory, counted as such by hold.
			c.s.protoErrors.Add(1)
		}
		c.s.logLimited("proxy: protocol error; closing the client", "remote", c.remote, "reason", pe.Reason)
		reason := pe.Reason
		switch {
		case pe.Reason == resp.ReasonMemory && !c.authed:
			return "ERR Protocol error: unauthenticated requests larger than 16 KiB"
		case pe.Reason == resp.ReasonMemory:
			return MsgMemory + "; closing the connection"
		case !c.authed && pe.Limit && pe.Reason == resp.ReasonMultibulkLen:
			reason = "unauthenticated multibulk length"
		case !c.authed && pe.Limit && pe.Reason == resp.ReasonBulkLen:
			reason = "unauthenticated bulk length"
		case pe.Limit:
			reason += " (max-request-bytes / max-args)"
		}
		return "ERR Protocol error: " + reason
	}
	// Anything else: a TLS handshake that failed (plain text on a TLS
	// listener, a missing or untrusted client certificate), ...
	c.s.logLimited("proxy: client connection failed", "remote", c.remote, "err", err)
	return ""
}

// armWrite makes sure the socket's write deadline is at least
// writeTimeout away: it sets it writeTimeout+WriteSlack ahead, and again
// only once that setting is WriteSlack old. (Setting it for every write
// updates a runtime timer per reply.) The reader and the writer both call it.
func (c *Conn) armWrite() {
	now := time.Since(c.created) // monotonic
	if set := c.wdlSet.Load(); set != 0 && now-time.Duration(set) < WriteSlack {
		return
	}
	c.wdlSet.Store(int64(max(now, 1)))
	c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.WriteTimeout + WriteSlack))
}

// push queues a reply that is ready (a synchronous command's), holding its
// bytes until the writer takes it.
func (c *Conn) push(cl *Call) {
	c.hold(cl.replyBytes(), false)
	c.queue(cl)
}

// queue hands cl to the writer.
func (c *Conn) queue(cl *Call) {
	c.unwritten.Add(1)
	c.calls <- cl
}

// Reply is the Call of a reply already built.
func Reply(out []byte) *Call { return &Call{done: closedChan, out: out} }

// ErrReply is the Call of the error reply msg; closeAfter closes the
// connection once it is written.
func ErrReply(msg string, closeAfter bool) *Call {
	return &Call{done: closedChan, out: redcon.AppendError(nil, msg), closeAfter: closeAfter}
}

// ErrCall is the Call of the error reply msg.
func ErrCall(msg string) *Call { return ErrReply(msg, false) }

// order records cl as the last command on keys and returns the earlier
// in-flight commands cl must wait for. Keys are tracked by a 64-bit hash
// (a collision only orders two commands that need not be), so the state
// is a few words per key whatever the keys' size; finished entries are
// swept whenever the map doubled since the last sweep, so it holds about
// twice the keys in flight; beyond maxTrackedKeys keys in flight the reader
// waits for earlier commands.
//
// A connection whose earlier commands all finished (settled: a client
// that waits for each reply) has nothing to wait for: its one-key command
// is tracked in soloKey/solo, not in the map, whose entries are all
// finished and dropped. (The map's lookups and sweeps cost about a
// microsecond per command with a thousand clients, their maps out of
// the CPU's caches.) The next command, if it comes before that one
// finished, moves it to the map.
func (c *Conn) order(keys [][]byte, cl *Call) []*Call {
	if len(keys) == 0 {
		return nil
	}
	if c.settled() {
		c.forgetOrder()
		if len(keys) == 1 {
			c.soloKey, c.solo = maphash.Bytes(keySeed, keys[0]), cl
			return nil
		}
	}
	if c.lastByKey == nil {
		c.lastByKey = map[uint64]*Call{}
		c.sweepAt = 64
	}
	if c.solo != nil {
		c.lastByKey[c.soloKey] = c.solo
		c.solo = nil
	}
	if len(c.lastByKey)+len(keys) > c.sweepAt {
		c.sweepOrder()
		for k, prev := range c.lastByKey {
			if len(c.lastByKey)+len(keys) <= maxTrackedKeys {
				break
			}
			<-prev.done
			delete(c.lastByKey, k)
		}
		c.sweepAt = max(64, 2*(len(c.lastByKey)+len(keys)))
	}
	var after []*Call
	for _, k := range keys {
		h := maphash.Bytes(keySeed, k)
		if prev := c.lastByKey[h]; prev != nil && prev != cl && !ready(prev) { // a key named twice: not itself
			after = append(after, prev)
		}
		c.lastByKey[h] = cl
	}
	if n := len(c.lastByKey); n > c.orderPeak {
		if grown := max(0, n-orderFree) - max(0, c.orderPeak-orderFree); grown > 0 {
			b := int64(grown) * orderEntryBytes
			c.orderMem.Add(b)
			c.s.mem.Add(b) // accounted, not refused: the command was admitted
		}
		c.orderPeak = n
	}
	return after
}

// forgetOrder drops the ordering state of a settled connection, whose
// entries are all finished. A grown map is dropped, not cleared: its
// tables would stay with an idle connection (found by the review of issue
// #46), charged to it.
func (c *Conn) forgetOrder() {
	c.solo = nil
	if c.orderPeak > orderFree {
		c.lastByKey, c.orderPeak = nil, 0
		c.giveBackOrder()
	} else if len(c.lastByKey) > 0 {
		clear(c.lastByKey)
	}
}

// orderFree is how many ordering entries a connection keeps uncharged;
// orderEntryBytes what each one beyond costs (a map entry, 16 bytes, in
// tables that double as they grow).
const (
	orderFree       = 64
	orderEntryBytes = 48
)

// giveBackOrder gives back what the ordering map was charged.
func (c *Conn) giveBackOrder() {
	if b := c.orderMem.Swap(0); b != 0 {
		c.s.mem.Add(-b)
	}
}

// settled reports whether every command the connection dispatched before
// finished: on a loop, every reply was moved to the output (the loop
// moves only finished ones); on goroutines, every reply was written.
func (c *Conn) settled() bool {
	if c.nc == nil {
		return c.ls.qHead == len(c.ls.q)
	}
	return c.unwritten.Load() == 0
}

// tracked is the number of keys in the ordering state.
func (c *Conn) tracked() int {
	if c.solo != nil {
		return len(c.lastByKey) + 1
	}
	return len(c.lastByKey)
}

// sweepOrder drops the finished commands from the ordering state.
func (c *Conn) sweepOrder() {
	if c.solo != nil && ready(c.solo) {
		c.solo = nil
	}
	for k, prev := range c.lastByKey {
		if ready(prev) {
			delete(c.lastByKey, k)
		}
	}
}

// orderRoom reports whether n more keys fit in the ordering map without
// waiting for earlier commands (an event loop never waits in order).
func (c *Conn) orderRoom(n int) bool {
	if c.tracked()+n <= maxTrackedKeys {
		return true
	}
	c.sweepOrder()
	c.sweepAt = max(64, 2*(len(c.lastByKey)+n))
	// Nothing tracked: nothing to wait for, whatever n (a command of more
	// than maxTrackedKeys arguments, with MaxArgs above it, waited for
	// ever: TestLoopManyArgsFirstCommand).
	return c.tracked()+n <= maxTrackedKeys || c.tracked() == 0
}

// forceClose closes c's connection at once (Close, after its bound;
// s.mu held).
func (c *Conn) forceClose() {
	if c.nc != nil {
		c.nc.Close()
		return
	}
	c.ls.killed.Store(true)
	c.lp.ready(c)
}

// interrupt wakes c's reader, which sees Shutdown (s.mu held); a loop's
// client is woken by its loop (Server.interruptLoops).
func (c *Conn) interrupt() {
	if c.nc != nil {
		c.nc.SetReadDeadline(time.Now())
	}
}

// keySeed seeds the ordering map's key hashes.
var keySeed = maphash.MakeSeed()

// writeLoop writes replies in request order. It writes as soon as a reply
// and every earlier one are ready, and flushes when it has nothing more
// ready: when the next command has no reply yet or none is queued (or
// FlushAt bytes are pending). Before such a flush it yields once, so that
// replies completing at that moment (goroutines already runnable) join
// the write: replies that complete together go out in one write. Its
// buffer comes from batchPool for each batch and goes back after the
// write, so an idle connection holds none.
func (c *Conn) writeLoop() {
	defer close(c.wdone)
	var bb *bytebufferpool.ByteBuffer
	batched := int64(0) // calls taken since the last flush
	broken := false
	flush := func() {
		if bb != nil && len(bb.B) > 0 && !broken {
			c.armWrite()
			if _, err := c.nc.Write(bb.B); err != nil {
				broken = true
				c.nc.Close() // unblocks the reader
			}
		}
		switch {
		case bb == nil:
		case cap(bb.B) > FlushAt:
			bb = nil // shrink back after a large reply
		default:
			PutBatch(bb)
			bb = nil
		}
		// Written: the reader may write the next reply itself.
		c.unwritten.Add(-batched)
		batched = 0
		select { // a reader waiting for every reply to be written (waitWritten)
		case c.drained <- struct{}{}:
		default:
		}
	}
	c.guard("writer", func() {
		for {
			var cl *Call
			var ok bool
			select {
			case cl, ok = <-c.calls:
			default:
				if batched > 0 {
					runtime.Gosched() // a reader about to queue a ready reply
				}
				select {
				case cl, ok = <-c.calls:
				default:
					flush()
					if q := c.msgs.Load(); q == nil {
						cl, ok = <-c.calls
					} else {
						select {
						case cl, ok = <-c.calls:
						case frame := <-q.ch:
							// A pushed frame (subscribed mode): written with
							// whatever else is ready.
							if !broken {
								if bb == nil {
									bb = GetBatch()
								}
								bb.B = append(bb.B, frame...)
							}
							c.hold(-int64(len(frame)), false)
							select {
							case c.drained <- struct{}{}:
							default:
							}
							continue
						}
					}
				}
			}
			if !ok {
				break
			}
			if !ready(cl) {
				if batched > 0 {
					runtime.Gosched() // completions already runnable
				}
				if !ready(cl) {
					flush()
					<-cl.done
				}
			}
			if !broken {
				if bb == nil {
					bb = GetBatch()
				}
				bb.B = append(bb.B, cl.reply(c.s)...)
			}
			batched++
			c.hold(-cl.size-cl.replyBytes(), false)
			cl.release()
			select {
			case c.drained <- struct{}{}:
			default:
			}
			if cl.closeAfter {
				// Frames queued before this reply (subscribed mode) go
				// out before the connection closes.
				if q := c.msgs.Load(); q != nil && !broken {
					for n := len(q.ch); n > 0; n-- {
						frame := <-q.ch
						if bb == nil {
							bb = GetBatch()
						}
						bb.B = append(bb.B, frame...)
						c.hold(-int64(len(frame)), false)
					}
				}
			}
			if cl.closeAfter || (bb != nil && len(bb.B) >= FlushAt) {
				flush()
			}
			if cl.closeAfter && !broken {
				broken = true
				c.nc.Close()
			}
		}
		flush()
	})
	// After a panic: keep taking replies so the reader is never stuck
	// pushing, and wake it if it waits for the writer to drain.
	select {
	case <-c.wfail:
	default:
		close(c.wfail)
	}
	for cl := range c.calls {
		<-cl.done
		c.hold(-cl.size-cl.replyBytes(), false)
		cl.release()
	}
}

func ready(cl *Call) bool {
	select {
	case <-cl.done:
		return true
	default:
		return false
	}
}

// Lower returns the ASCII lower-case form of a command name or option.
// The words the proxy compares against (lowerWords) come back without an
// allocation, whatever their case: a SET NX PX costs three lookups.
func Lower(b []byte) string {
	var buf [maxWordLen]byte
	if len(b) <= len(buf) {
		l := buf[:len(b)]
		for i, ch := range b {
			if ch >= 'A' && ch <= 'Z' {
				ch += 'a' - 'A'
			}
			l[i] = ch
		}
		if w, ok := lowerWords[string(l)]; ok {
			return w
		}
		return string(l)
	}
	return strings.ToLower(string(b))
}

// maxWordLen is the longest word lower interns.
const maxWordLen = 16

// lowerWords interns the command names and the options and subcommands
// the handlers compare against (a word missing here still works: Lower
// then allocates it): the server's own, and those a handler package gives
// Intern in its init. It is only written during package initialisation.
var lowerWords = map[string]string{}

// Intern adds words to those Lower returns without an allocation. Call it
// only from a package's init (Lower reads the words unlocked).
func Intern(words ...string) {
	for _, w := range words {
		if len(w) <= maxWordLen {
			lowerWords[w] = w
		}
	}
}

func init() {
	for _, c := range serverCommands {
		Intern(c.Name)
	}
	Intern("setname", "getname", "setinfo", "id", "lib-name", "lib-ver", "auth", "count", "docs", "info",
		"all", "default", "everything", "get", "optin", "on", "off", "tracking", "caching")
	Intern(infoSections...)
}

// Printable shortens a client-supplied name for an error message.
func Printable(b []byte) string {
	if len(b) > 64 {
		b = b[:64]
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, string(b))
}
