package conn

import (
	"context"
	"crypto/tls"
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

// Config configures a [Conn]. The zero value is usable.
type Config struct {
	// DialTimeout bounds connect, TLS and handshake (default [DefaultDialTimeout]).
	DialTimeout time.Duration
	// KeepAlive is the TCP keepalive period (default [DefaultKeepAlive]; negative disables).
	KeepAlive time.Duration
	// WriteTimeout bounds one batch write (default [DefaultWriteTimeout]).
	WriteTimeout time.Duration
	// TLS, if non-nil, wraps the connection in TLS with this config.
	TLS *tls.Config
	// Username and Password are sent with AUTH on connect when Password is set.
	Username, Password string
	// DB is selected with SELECT on connect when non-zero.
	DB int
	// Scripts are loaded with SCRIPT LOAD on every connect.
	Scripts []*Script
	// ReconnectMin and ReconnectMax bound the reconnect backoff (defaults
	// [DefaultReconnectMin], [DefaultReconnectMax]).
	ReconnectMin, ReconnectMax time.Duration
	// MaxPending bounds requests in flight; Do fails with [ErrOverloaded]
	// above it (default [DefaultMaxPending]).
	MaxPending int
	// StallTimeout bounds how long a master may leave a timed-out request
	// unanswered: when the oldest request in flight is still unanswered
	// StallTimeout after its deadline, the session is closed (in-flight
	// requests fail with an error matching [ErrStalled] and [ErrBroken]) and
	// the Conn reconnects; until it is back, Do fails fast with [ErrDown].
	// A stalled master (SIGSTOP, a long blocking command, a dead host
	// behind a live TCP path) then costs a bounded amount of queued work
	// instead of one entry per request until MaxPending. Default
	// [DefaultStallTimeout]; negative disables it.
	StallTimeout time.Duration
	// ReadBufferSize is the reply read buffer size in bytes (default [DefaultReadBufferSize]).
	ReadBufferSize int
	// Dialer, if set, replaces the TCP dialer (tests use it for fakes).
	Dialer func(ctx context.Context, network, addr string) (net.Conn, error)
	// OnWrite, if set, is called on the Conn's writer goroutine after each
	// write with the number of requests it carried (auto-pipelining's
	// batch size; a merged call counts its members, see [Merge]). It must
	// be fast and not block.
	OnWrite func(commands int)
	// OnState, if set, is called on the Conn's goroutine each time it
	// comes up or goes down: once per change, not once per failed
	// reconnect attempt. It must not block.
	OnState func(StateChange)
}

// StateChange is a Conn's move between connected and not connected.
type StateChange struct {
	Addr string
	// Up reports whether the Conn is connected now.
	Up bool
	// Info is the server's identity, when Up.
	Info ServerInfo
	// Restarted is set, when Up, if the server's run_id differs from the
	// one of the previous connection: the master restarted (and may have
	// lost its data).
	Restarted bool
	// Err is why the Conn is down (the dial error, or what broke the
	// session), when not Up.
	Err error
}

func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.DialTimeout, DefaultDialTimeout)
	def(&c.KeepAlive, DefaultKeepAlive)
	def(&c.WriteTimeout, DefaultWriteTimeout)
	def(&c.ReconnectMin, DefaultReconnectMin)
	def(&c.ReconnectMax, DefaultReconnectMax)
	def(&c.StallTimeout, DefaultStallTimeout)
	if c.ReconnectMax < c.ReconnectMin {
		c.ReconnectMax = c.ReconnectMin
	}
	if c.MaxPending <= 0 {
		c.MaxPending = DefaultMaxPending
	}
	if c.ReadBufferSize <= 0 {
		c.ReadBufferSize = DefaultReadBufferSize
	}
	return c
}

// ServerInfo identifies the server process behind a connection, read with
// INFO at connect time. A changed RunID means the master restarted.
type ServerInfo struct {
	RunID   string
	Version string
	// Uptime is the server's uptime_in_seconds (whole seconds), zero when
	// the server did not say.
	Uptime time.Duration
	// ConnectedAt is when the INFO reply had been read: the server wrote
	// Uptime no later than this.
	ConnectedAt time.Time
}

// StartedBy returns the latest instant at which the server can have
// started: never earlier than its real start. Redis computes
// uptime_in_seconds as the difference of two wall-clock readings floored
// to whole seconds, which can exceed the real uptime by up to (not
// including) a second, so the start is at most ConnectedAt − Uptime + 1s.
// Restart quarantine counts from here, so that it can end late but never
// early.
func (i ServerInfo) StartedBy() time.Time {
	at := i.ConnectedAt
	if at.IsZero() {
		at = time.Now()
	}
	return at.Add(time.Second - i.Uptime)
}

// Stats are counters of one Conn since it was created.
type Stats struct {
	Connects  uint64 // successful connects (first one included)
	Timeouts  uint64 // requests failed with ErrTimeout
	Broken    uint64 // requests failed because the socket broke
	Writes    uint64 // write syscalls (batches)
	Requests  uint64 // requests accepted by Do
	Pending   int    // requests in flight now
	Connected bool
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
	scratch      []byte       // EVAL rewrite buffer (reader)
	kill         error        // why the expirer closed the session (ErrStalled), read by session
	nreq         uint64       // requests accepted by Do
	merges       []*mergeList // members held for the next write (merge.go), one list per Merge
	nmerge       int          // members held, over every list
	grouped      int          // members of merged calls in the queue beyond one per call
	bloom        [4]uint64    // KeyHash bits of the members held

	connects, timeouts, broken, writes atomic.Uint64
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
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.wg.Add(2)
	go c.run(ctx)
	go c.expireLoop()
	return c
}

// Dial returns a connected Conn to addr, or an error if it cannot connect
// before ctx ends (or within the dial timeout, for the first attempt's error).
// The error of a failed first attempt matches [ErrDown] and wraps the cause
// (a [*resp.Error] for a rejected AUTH or SELECT, a net error for a refused
// dial).
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
// wrapping the last dial or session error), or nil while it is connected.
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

// Do queues req for the next write batch. On a nil return the callback
// will be called exactly once; on an error ([ErrDown], [ErrClosed],
// [ErrOverloaded], [ErrBadCommand]) it will not be called. Do never blocks
// on the network.
func (c *Conn) Do(req Request) error {
	if len(req.Cmd) == 0 || req.Callback == nil {
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
	if req.Merge != nil && c.up {
		wake = c.mergeLocked(req, keyAt, argsAt)
	} else {
		if req.Merge != nil { // connecting: no writer to flush it yet
			req.Script = req.Merge.single
		}
		wake = c.pushLocked(req)
	}
	c.mu.Unlock()
	if wake {
		c.wakeWriter()
	}
	return nil
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
func (c *Conn) pushLocked(req Request) (wake bool) {
	wake = len(c.wbuf) == 0 && c.nmerge == 0
	if c.conflictsLocked(req.KeyHash) {
		c.flushMergesLocked()
	}
	c.pushQueueLocked(req)
	c.wbuf = append(c.wbuf, req.Cmd...)
	c.wcmds++
	return wake
}

// pushQueueLocked queues req's pending entry and arms its deadline.
func (c *Conn) pushQueueLocked(req Request) {
	p := c.q.push()
	p.cb, p.tag, p.deadline, p.script, p.done, p.extra, p.asking = req.Callback, req.Tag, req.Deadline, req.Script, false, 0, false
	if req.Script != nil {
		if req.Stable {
			p.cmd = req.Cmd
		} else {
			p.own = append(p.own[:0], req.Cmd...)
			p.cmd = p.own
		}
	}
	c.armLocked(req.Deadline)
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
	c.nc, c.up, c.info = nc, true, info
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
	for {
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
		c.mu.Lock()
		if c.q.len() == 0 {
			c.mu.Unlock()
			return fmt.Errorf("%w: unexpected reply %s with no request pending", resp.ErrProtocol, rep)
		}
		p := c.q.front()
		cb, tag, done := p.cb, p.tag, p.done
		if !done && p.script != nil && rep.HasErrorPrefix("NOSCRIPT") {
			var ok bool
			if g, isGroup := cb.(*group); isGroup && p.cmd == nil {
				c.scratch, ok = g.appendCall(c.scratch[:0], true), true
			} else {
				c.scratch, ok = p.script.appendEvalFromEvalSha(c.scratch[:0], p.cmd)
			}
			if ok {
				req := Request{Cmd: c.scratch, Deadline: p.deadline, Callback: cb, Tag: tag}
				extra, asking := p.extra, p.asking
				c.popLocked() // p is not read after this
				var wake bool
				if asking { // the target of an ASK serves the slot right after ASKING only
					wake = c.pushLocked(Request{Cmd: askingCmd, Deadline: req.Deadline, Callback: discard{}})
					c.pushLocked(req)
					c.q.at(c.q.end() - 1).asking = true
				} else {
					wake = c.pushLocked(req)
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
	for {
		select {
		case <-c.done:
			t.Stop()
			return
		case <-c.rearm:
		case <-t.C:
		}
		var next time.Time
		var stalled error
		fired, next, stalled = c.expire(time.Now(), fired[:0])
		if stalled != nil {
			c.breakSession(stalled)
		}
		for i := range fired {
			fired[i].cb.Complete(fired[i].tag, resp.Reply{}, ErrTimeout)
			fired[i].cb = nil
		}
		c.timeouts.Add(uint64(len(fired)))
		if !next.IsZero() {
			t.Reset(time.Until(next))
		}
	}
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
