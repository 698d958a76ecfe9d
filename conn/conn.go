package conn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-dev/redlock/resp"
)

// Defaults of [Config]; a zero field selects them.
const (
	DefaultDialTimeout    = time.Second            // connect + handshake
	DefaultKeepAlive      = 15 * time.Second       // TCP keepalive period
	DefaultWriteTimeout   = 5 * time.Second        // one batch write; longer means the socket is stuck
	DefaultReconnectMin   = 10 * time.Millisecond  // first reconnect backoff
	DefaultReconnectMax   = 2 * time.Second        // backoff cap
	DefaultMaxPending     = 1 << 16                // requests in flight per connection
	DefaultReadBufferSize = 64 << 10               // bytes
	DefaultStallTimeout   = time.Second            // see Config.StallTimeout
	maxRetainedWriteBuf   = 1 << 20                // write buffers above this are dropped after use
	fastReconnectWindow   = 100 * time.Millisecond // a session shorter than this does not reset backoff
)

// gatherThreshold is the number of requests in flight above which the
// writer yields once before a write to let runnable callers join the batch.
const gatherThreshold = 4

// Callback receives the outcome of one request. Complete is called exactly
// once per request accepted by [Conn.Do], on one of the Conn's goroutines; it
// must not block. The reply aliases a read buffer and is valid only during
// the call (use [resp.Reply.Clone] to keep it). err is nil when a reply
// arrived (which may itself be a server error reply).
type Callback interface {
	Complete(tag uint64, r resp.Reply, err error)
}

// Request is one command for [Conn.Do].
type Request struct {
	// Cmd is the encoded command (see [resp.AppendCommand]). Do copies it
	// unless Stable is set.
	Cmd []byte
	// Deadline, if non-zero, fails the request with [ErrTimeout] when no
	// reply arrived by then.
	Deadline time.Time
	// Callback is completed with the outcome; Tag is passed back to it.
	Callback Callback
	Tag      uint64
	// Script, if set, says Cmd is an EVALSHA of this script: a NOSCRIPT
	// reply makes the Conn re-send it as EVAL before completing.
	Script *Script
	// Stable promises that Cmd stays unchanged until the callback has been
	// called: the Conn then keeps a reference instead of a copy for a
	// Script's EVAL fallback (the engine's fan-outs share one buffer
	// across masters and keep it until every master answered).
	Stable bool
	// KeyHash, when non-zero, is a hash of the one key the command
	// touches: a request held for merging (see [Merge]) is never sent
	// after a later request with the same KeyHash, nor after one with
	// KeyHash 0 (which may touch any key).
	KeyHash uint64
	// Key is the key the command is on, for [Cluster] routing (by its
	// hash slot); a Conn ignores it.
	Key string
	// Merge, if set, makes the request a member that may be merged with
	// others of the same Merge queued for the same write. It requires
	// Stable, Script unset (the Merge's scripts are used) and a Cmd of
	// the Merge's shape; Do fails with [ErrBadCommand] otherwise. A merged
	// call has its members' earliest Deadline.
	Merge *Merge
}

// Conn is one auto-pipelined connection to one master. It is safe for
// concurrent use. Create it with [New] or [Dial]; Close it when done.
type Conn struct {
	addr   string
	cfg    Config
	cancel context.CancelFunc
	done   chan struct{} // closed by Close
	wake   chan struct{} // writer: the write buffer became non-empty
	rearm  chan struct{} // expirer: an earlier deadline was queued
	wg     sync.WaitGroup
	once   sync.Once

	firstOnce sync.Once
	firstTry  chan struct{} // closed once the first connect attempt is over
	firstErr  error         // its error (nil: connected); written before firstTry closes

	mu sync.Mutex
	// Guarded by mu:
	corks        int  // Cork calls not yet undone: Do does not wake the writer
	corkedWake   bool // a Do while corked would have woken the writer
	up           bool
	connecting   bool // the first connect attempt is in progress: Do queues
	closed       bool
	downErr      error         // returned by Do while !up
	upCh         chan struct{} // closed while up; replaced on disconnect
	nc           net.Conn
	q            queue
	wbuf         []byte
	wcmds        int       // requests in wbuf (a merged call counts its members)
	spare        []byte    // the other write buffer, while not being written
	nextDeadline time.Time // earliest deadline queued (may be stale-early)
	firstLive    uint64    // queue items before this sequence are done
	resentEnd    uint64    // queue end after the last NOSCRIPT re-send (Drain waits for re-sent requests)
	info         ServerInfo
	nativeOff    bool         // this session's server refused a native command: scripts only (native.go)
	scratch      []byte       // EVAL rewrite buffer (reader)
	kill         error        // why the expirer closed the session (ErrStalled), read by session
	nreq         uint64       // requests accepted by Do
	merges       []*mergeList // members held for the next write (merge.go), one list per Merge
	nmerge       int          // members held, over every list
	grouped      int          // members of merged calls in the queue beyond one per call
	bloom        [4]uint64    // KeyHash bits of the members held

	clock *clockWatch // the clock check (Config.OnClockJump); nil: off
	repl  *replWatch  // the replication check (Config.OnReplicationID); nil: off

	connects, timeouts, broken, writes atomic.Uint64
	// rdPending: the reader has replies in its buffer it has not
	// processed yet (set after each reply read; see readerBehind).
	rdPending atomic.Bool
}

// New returns a Conn to addr that connects in the background. Requests
// made during the first connect attempt are queued and sent once it
// succeeds (a dial in progress is not a refusal); they fail with its error
// if it fails, or with [ErrTimeout] at their deadline. Later, while the Conn
// is not connected, requests fail at once with [ErrDown]. See
// [Conn.WaitConnected].
func New(addr string, cfg Config) *Conn {
	c := &Conn{
		addr:     addr,
		cfg:      cfg.withDefaults(),
		done:     make(chan struct{}),
		wake:     make(chan struct{}, 1),
		rearm:    make(chan struct{}, 1),
		upCh:     make(chan struct{}),
		firstTry: make(chan struct{}),
		downErr:  fmt.Errorf("%w: %s: connecting", ErrDown, addr),

		connecting: true,
	}
	if c.cfg.OnClockJump != nil {
		c.clock = &clockWatch{c: c, epoch: time.Now()}
	}
	if c.cfg.OnReplicationID != nil {
		c.repl = &replWatch{c: c}
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	if c.clock != nil && c.cfg.ClockRefresh > 0 {
		c.wg.Add(1)
		go c.clockRefreshLoop()
	}
	c.wg.Add(2)
	go c.run(ctx)
	go c.expireLoop()
	return c
}

// Dial returns a connected Conn to addr, or an error if it cannot connect
// before ctx ends (or within the dial timeout, for the first attempt's error).
// The error of a failed first attempt matches [ErrDown] and wraps the cause
// (a [*resp.Error] for a rejected AUTH or SELECT, a net error for a refused
// dial), or matches [ErrConnectTimeout] when the attempt ran out of
// [Config.DialTimeout].
func Dial(ctx context.Context, addr string, cfg Config) (*Conn, error) {
	c := New(addr, cfg)
	err := c.WaitFirstAttempt(ctx)
	if err == nil {
		return c, nil
	}
	if !errors.Is(err, ErrDown) { // ctx ended first: say how far the connect got
		c.mu.Lock()
		down := c.downErr
		c.mu.Unlock()
		err = fmt.Errorf("%w (%w)", err, down)
	}
	c.Close()
	return nil, err
}

// firstAttemptDone records the outcome of the first connect attempt for Dial.
func (c *Conn) firstAttemptDone(err error) {
	c.firstOnce.Do(func() {
		c.firstErr = err
		close(c.firstTry)
	})
}

// Addr returns the master's address.
func (c *Conn) Addr() string { return c.addr }

// WaitFirstAttempt blocks until the Conn's first connect attempt is over
// and returns its error (nil: it connected; else an error matching
// [ErrDown] that wraps the dial or handshake error), or ctx's error.
func (c *Conn) WaitFirstAttempt(ctx context.Context) error {
	select {
	case <-c.firstTry: // checked first: an ended ctx must not hide an ended attempt
	default:
		select {
		case <-c.firstTry:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if c.firstErr != nil {
		return fmt.Errorf("%w: %s: %w", ErrDown, c.addr, c.firstErr)
	}
	return nil
}

// WaitConnected blocks until the Conn is connected, ctx ends (ctx.Err()) or
// the Conn is closed ([ErrClosed]).
func (c *Conn) WaitConnected(ctx context.Context) error {
	c.mu.Lock()
	ch, closed := c.upCh, c.closed
	c.mu.Unlock()
	if closed {
		return ErrClosed
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		err := c.downErr
		c.mu.Unlock()
		return fmt.Errorf("%w (%w)", ctx.Err(), err)
	case <-c.done:
		return ErrClosed
	}
}

// Connected reports whether the socket is up now.
func (c *Conn) Connected() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.up
}

// DownErr returns why the Conn is not connected (matching [ErrDown] and
// wrapping the last dial or session error, or matching [ErrConnectTimeout]
// when the last connect attempt timed out), or nil while it is connected.
func (c *Conn) DownErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.up {
		return nil
	}
	return c.downErr
}

// Info returns the identity of the server as of the latest connect.
func (c *Conn) Info() ServerInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.info
}

// Stats returns the Conn's counters.
func (c *Conn) Stats() Stats {
	c.mu.Lock()
	pend, up, nreq := c.pendingLocked(), c.up, c.nreq
	c.mu.Unlock()
	return Stats{
		Connects: c.connects.Load(), Timeouts: c.timeouts.Load(), Broken: c.broken.Load(),
		Writes: c.writes.Load(), Requests: nreq, Pending: pend, Connected: up,
	}
}

// framed reports whether cmd begins as a RESP array of one or more
// words. A server sends no reply to an array of no words (*0), to a
// negative count (*-1) or to an empty inline line: queued, such a command
// would take the next command's reply, and every later request its
// predecessor's (found by the review of the conn layer, issue #46).
func framed(cmd []byte) bool {
	return len(cmd) > 1 && cmd[0] == '*' && cmd[1] >= '1' && cmd[1] <= '9'
}

// Do queues req for the next write batch. On a nil return the callback
// will be called exactly once; on an error ([ErrDown], [ErrClosed],
// [ErrOverloaded], [ErrBadCommand]) it will not be called. Do never blocks
// on the network.
func (c *Conn) Do(req Request) error {
	if !framed(req.Cmd) || req.Callback == nil {
		return ErrBadCommand
	}
	var keyAt, argsAt int
	if req.Merge != nil {
		var err error
		if keyAt, argsAt, err = parseMember(&req); err != nil || req.Script != nil {
			return fmt.Errorf("%w: %v", ErrBadCommand, errBadMember)
		}
	}
	c.mu.Lock()
	if err := c.admitLocked(1); err != nil {
		c.mu.Unlock()
		return err
	}
	c.nreq++
	var wake bool
	if req.Merge != nil && c.up && c.nativeForLocked(req.Merge.single) == NativeNone {
		wake = c.mergeLocked(&req, keyAt, argsAt)
	} else {
		// Connecting (no writer to flush it yet), or a member whose
		// server has the script's native command: one command per key
		// costs the server less than a script over many.
		if req.Merge != nil {
			req.Script = req.Merge.single
		}
		wake = c.pushLocked(&req)
	}
	if wake && c.corks > 0 {
		c.corkedWake, wake = true, false
	}
	c.mu.Unlock()
	if wake {
		c.wakeWriter()
	}
	return nil
}

// Cork holds back the writer: requests queued by Do until the matching
// Uncork are written together, in one write, when it comes. An event
// loop corks the connections while it dispatches the commands of one turn
// (one write per master per turn, not one per command). Calls nest; the
// writer may still write a batch it was already woken for. Every Cork
// must be undone by Uncork, soon: a request's deadline runs from Do.
func (c *Conn) Cork() {
	c.mu.Lock()
	c.corks++
	c.mu.Unlock()
}

// Uncork undoes one Cork; the last wakes the writer for what was queued.
func (c *Conn) Uncork() {
	c.mu.Lock()
	c.corks--
	wake := c.corks == 0 && c.corkedWake
	if c.corks == 0 {
		c.corkedWake = false
	}
	c.mu.Unlock()
	if wake {
		c.wakeWriter()
	}
}

// admitLocked returns why n more requests cannot be accepted now
// (closed, down, overloaded), or nil.
func (c *Conn) admitLocked(n int) error {
	switch {
	case c.closed:
		return ErrClosed
	case !c.up && !c.connecting:
		return c.downErr
	case c.pendingLocked()+n > c.cfg.MaxPending:
		return ErrOverloaded
	}
	return nil
}

// pendingLocked is the number of requests in flight: queued, held for
// merging, or members of a merged call.
func (c *Conn) pendingLocked() int { return c.q.len() + c.nmerge + c.grouped }

// popLocked removes the oldest queue item.
func (c *Conn) popLocked() {
	c.grouped -= c.q.front().extra
	c.q.pop()
}

// wakeWriter signals the writer that the write buffer became non-empty.
func (c *Conn) wakeWriter() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// pushLocked queues req's pending entry and its bytes for the writer,
// after the members held for merging when req may not overtake them. It
// reports whether nothing was queued for writing: then the caller must
// wakeWriter once it released mu (signalling outside the lock keeps the
// critical section, which every caller contends for, short).
func (c *Conn) pushLocked(req *Request) (wake bool) {
	wake = len(c.wbuf) == 0 && c.nmerge == 0
	if c.conflictsLocked(req.KeyHash) {
		c.flushMergesLocked()
	}
	c.writeLocked(req)
	return wake
}

// writeLocked queues req's pending entry and appends its bytes to the
// write buffer: the script's native command instead of its EVALSHA when
// this session's server has it.
func (c *Conn) writeLocked(req *Request) {
	c.beginBatchLocked(req.Deadline)
	if n := c.nativeForLocked(req.Script); n != NativeNone {
		if out, ok := req.Script.appendNative(c.wbuf, req.Cmd, c.info.DeleteIfEqual); ok {
			c.wbuf = out
			c.wcmds++
			req.Script = nil // no NOSCRIPT fallback to keep the command for
			c.pushQueueLocked(req).native = n
			return
		}
	}
	c.pushQueueLocked(req)
	c.wbuf = append(c.wbuf, req.Cmd...)
	c.wcmds++
}

// pushQueueLocked queues req's pending entry, arms its deadline and
// returns the entry.
func (c *Conn) pushQueueLocked(req *Request) *pending {
	p := c.q.push()
	p.cb, p.tag, p.deadline, p.script, p.done, p.extra, p.asking, p.native, p.keyHash = req.Callback, req.Tag, req.Deadline, req.Script, false, 0, false, NativeNone, req.KeyHash
	if req.Script != nil {
		if req.Stable {
			p.cmd = req.Cmd
		} else {
			p.own = append(p.own[:0], req.Cmd...)
			p.cmd = p.own
		}
	}
	c.armLocked(req.Deadline)
	return p
}

// armLocked makes the expirer fire at d if that is earlier than planned.
func (c *Conn) armLocked(d time.Time) {
	if !d.IsZero() && (c.nextDeadline.IsZero() || d.Before(c.nextDeadline)) {
		c.nextDeadline = d
		select {
		case c.rearm <- struct{}{}:
		default:
		}
	}
}

// Exec sends one command and waits for its reply: a convenience for
// non-hot paths (tests, tools). A server error reply is returned as the
// reply and as an error matching *resp.Error. The deadline comes from ctx.
func (c *Conn) Exec(ctx context.Context, args ...string) (resp.Reply, error) {
	if len(args) == 0 {
		return resp.Reply{}, ErrBadCommand
	}
	ch := make(chanCallback, 1)
	dl, _ := ctx.Deadline()
	if err := c.Do(Request{Cmd: resp.AppendCommandStrings(nil, args...), Deadline: dl, Callback: ch}); err != nil {
		return resp.Reply{}, err
	}
	select {
	case r := <-ch:
		if r.err == nil {
			r.err = r.rep.Err()
		}
		return r.rep, r.err
	case <-ctx.Done():
		return resp.Reply{}, ctx.Err()
	}
}

type result struct {
	rep resp.Reply
	err error
}

type chanCallback chan result

func (ch chanCallback) Complete(_ uint64, r resp.Reply, err error) { ch <- result{r.Clone(), err} }

// Drain waits until every request accepted by Do before the call has its
// outcome: a reply read, a failure, or its deadline passed (its callback
// may still be running when Drain returns). It returns
// nil then, or ctx's error if ctx ends first. It does not stop new
// requests; call it before Close to let replies already on their way
// arrive (the engine does, so that a release sent just before Close
// reaches every master and not only a quorum).
func (c *Conn) Drain(ctx context.Context) error {
	c.mu.Lock()
	if c.nmerge > 0 {
		c.flushMergesLocked() // the writer is awake already
	}
	target := c.q.end()
	c.mu.Unlock()
	wait := 100 * time.Microsecond
	t := time.NewTimer(wait)
	defer t.Stop()
	for !c.drainedTo(&target) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.done:
			return nil // Close failed what was left
		case <-t.C:
		}
		wait = min(2*wait, 5*time.Millisecond)
		t.Reset(wait)
	}
	return nil
}

// drainedTo reports whether every request with a sequence number below
// *target is complete. A request answered NOSCRIPT leaves the queue and
// comes back at its end as EVAL: *target then moves past the re-sent
// requests, so that they are waited for too (and a request made after
// Drain began may be waited for with them).
func (c *Conn) drainedTo(target *uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		for s := max(c.firstLive, c.q.seq); s < *target; s++ {
			if p := c.q.at(s); p != nil && !p.done {
				return false
			}
		}
		if c.resentEnd <= *target {
			return true
		}
		*target = c.resentEnd
	}
}

// Close closes the connection, fails pending requests with [ErrClosed] and
// waits for the Conn's goroutines to exit. It is idempotent and always
// returns nil.
func (c *Conn) Close() error {
	c.once.Do(func() {
		c.mu.Lock()
		c.closed = true
		nc := c.nc
		c.mu.Unlock()
		close(c.done)
		c.cancel()
		if nc != nil {
			nc.Close()
		}
	})
	c.wg.Wait()
	return nil
}
