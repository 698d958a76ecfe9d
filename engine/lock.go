package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/resp"
)

// Lock is an acquired lock. Its methods are safe for concurrent use.
type Lock struct {
	e          *Engine
	key        string
	token      string
	ttl        time.Duration
	fence      int64  // fencing token (WithFencing), 0 without
	read       bool   // an RWLock's read lock: key is the readers' set, token its member
	cix        uint32 // connection index on every master (see Engine.connFor)
	khash      uint64 // Engine.keyHash(key)
	first      int    // master every fan-out starts with (see Engine.firstMaster)
	tokenBuf   [TokenLen]byte
	until      atomic.Int64 // validity deadline, ns since e.epoch (monotonic)
	extensions atomic.Int64 // successful extensions
	unlocked   atomic.Bool  // Unlock was called: not Valid, no Extend
	// attached: a handle on a token granted elsewhere (transport.Attach):
	// its Unlock and its end are reported by the caller, not in Stats or
	// to the Observer (its Extend is).
	attached bool
	// uncounted: a grant found past its validity when its owner collected
	// it (finish), released without being handed out: its release is not
	// counted in Stats or to the Observer.
	uncounted bool
	// partial: some master did not grant the acquisition (a waited
	// writer's intent may be left there: RWLock drops it).
	partial bool

	// callerToken: the token came from the caller (WithToken), so it may
	// also be the value of a lock the caller already holds, or of the
	// caller's next attempt: the cleanup of a failed attempt releases only
	// where this attempt's SET NX answered that it created the key and
	// its mark is still this attempt's (acquisition.cleanup).
	callerToken bool
	// marked: an acquisition with the caller's token that marks the key
	// (scripts.AppendMark, encoded in place where sent: appendBulkMark)
	// with its nonce, kept in tokenBuf (nonce); false for a random token,
	// or when no mark can share the key's slot on a Redis Cluster member.
	marked bool

	// Watchdog (WithAutoExtend), fixed at acquisition.
	auto    bool
	holdEnd int64 // ns since e.epoch after which the watchdog stops; 0: never
	// granted is when the last successful acquire or extend started, ns
	// since e.epoch: the watchdog extends a third of the TTL after it.
	granted atomic.Int64
	// extSent numbers the extensions sent (Extend and the watchdog's): a
	// decided extension moves the deadline up only if no later one was
	// sent, since the masters apply them in the order sent.
	extSent atomic.Uint64
	// extMu orders an extension's sending (its number and the deadline
	// it lowers) against a decision's check that it is the latest and its
	// store of the deadline: without it an older extension could see
	// itself latest, a newer one be sent and lower the deadline, and the
	// older store its later deadline over the lowered one.
	extMu sync.Mutex
	// Guarded by e.keep.mu: when the watchdog may try again after an
	// extension too few masters answered (ns since e.epoch; 0: no retry
	// pending), and that extension's error.
	retryAt  int64
	retryErr error
	maxed    atomic.Bool // the watchdog stopped at holdEnd
	watched  atomic.Bool // the keeper has (or had) it scheduled
	// Guarded by e.keep.mu: heap position + 1 (0: not scheduled), when the
	// keeper acts on it next, and whether an extension is in flight.
	kIdx      int
	kAt       int64
	extending bool

	life lockLife

	relMu sync.Mutex // serialises Unlock calls
	// Guarded by relMu: per master, what its release answered (0 unknown:
	// not answered, timed out, failed; 1 deleted; -1 did not hold it), nil
	// before the first Unlock; released: a quorum confirmed the release.
	relState []int8
	released bool
	relBuf   [8]int8 // relState's storage for up to 8 masters
}

// lockLife is the end of a lock's life as its holder sees it.
type lockLife struct {
	mu    sync.Mutex
	ended atomic.Bool            // err is set (read without mu: Valid)
	done  chan struct{}          // made by the first Done, closed at the end
	err   error                  // why it ended; nil while held
	hooks map[uint64]func(error) // onEnd hooks (Context cancellations, LockSet)
	next  uint64
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Key returns the locked key, as passed to Lock or TryLock (without
// [Config.KeyPrefix]).
func (l *Lock) Key() string {
	if l.read {
		return strings.TrimSuffix(l.key, readersSuffix)[len(l.e.cfg.KeyPrefix):]
	}
	return l.key[len(l.e.cfg.KeyPrefix):]
}

// Token returns the lock's token: the value stored on the masters.
func (l *Lock) Token() string { return l.token }

// nonce is the attempt's nonce its mark holds (marked), "" without a mark.
func (l *Lock) nonce() string {
	if !l.marked {
		return ""
	}
	return unsafe.String(&l.tokenBuf[0], TokenLen)
}

// appendBulkMark appends the name of the mark of l's key as a bulk string.
func (l *Lock) appendBulkMark(dst []byte) []byte {
	dst, _ = scripts.AppendBulkMark(dst, l.key, l.e.clusters != nil)
	return dst
}

// FencingToken returns the lock's fencing token, or 0 when it was acquired
// without [WithFencing]. Tokens of one key strictly increase from holder to
// holder: give it to the storage the lock protects, which must reject a
// write with a token lower than the highest it has accepted.
func (l *Lock) FencingToken() int64 { return l.fence }

// Until returns the instant the lock's validity ends (with a monotonic
// clock reading): ttl minus drift after the acquisition (or last
// extension) started.
func (l *Lock) Until() time.Time { return l.e.epoch.Add(time.Duration(l.until.Load())) }

// Remaining returns the validity left, or 0 once it ran out.
func (l *Lock) Remaining() time.Duration {
	return max(0, time.Duration(l.until.Load())-time.Since(l.e.epoch))
}

// Valid reports whether the validity has not run out and the lock has not
// ended (unlocked, lost: [Lock.Err]). It says nothing the masters did not
// say at acquisition: a master restart without persistence can still lose
// the lock.
func (l *Lock) Valid() bool {
	return !l.unlocked.Load() && !l.life.ended.Load() && l.Remaining() > 0
}

// Done returns a channel that is closed when the lock ends: Unlock was
// called, an extension (the watchdog's or Extend's) failed to reach a
// quorum, or the validity ran out. [Lock.Err] then says why. The first
// call hands the lock to the engine's scheduler, which closes the channel
// when the validity runs out (within about a millisecond before the
// deadline) even without a watchdog.
func (l *Lock) Done() <-chan struct{} {
	l.life.mu.Lock()
	if l.life.done == nil {
		if l.life.err != nil {
			l.life.mu.Unlock()
			return closedChan
		}
		l.life.done = make(chan struct{})
	}
	d := l.life.done
	l.life.mu.Unlock()
	l.e.keep.watch(l)
	return d
}

// Err returns nil while the lock is held, else why it ended: [ErrUnlocked]
// after Unlock; an error matching [ErrLockLost] when it was lost (an
// extension's quorum error, also matching [ErrUnavailable] when too few
// masters answered; with [ErrExpired] when the validity ran out; with
// [ErrMaxHold] too when the watchdog reached its bound); [ErrClosed] when
// the engine closed while a watchdog kept it.
func (l *Lock) Err() error {
	l.life.mu.Lock()
	err := l.life.err
	l.life.mu.Unlock()
	if err == nil && l.Remaining() == 0 {
		l.end(l.expired())
		l.life.mu.Lock()
		err = l.life.err
		l.life.mu.Unlock()
	}
	return err
}

// Context returns a copy of parent that is cancelled when the lock ends
// (context.Cause returns [Lock.Err]) or when the returned cancel is called:
// hand it to the work the lock protects, so that work stops when the lock
// is lost. It starts no goroutine.
func (l *Lock) Context(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	remove := l.onEnd(cancel)
	return ctx, func() {
		remove()
		cancel(context.Canceled)
	}
}

// onEnd calls f with the lock's Err when its life ends — at once when it
// already has — and hands the lock to the keeper, which ends it when the
// validity runs out. The returned func unregisters f.
func (l *Lock) onEnd(f func(error)) (remove func()) {
	l.life.mu.Lock()
	if err := l.life.err; err != nil {
		l.life.mu.Unlock()
		f(err)
		return func() {}
	}
	if l.life.hooks == nil {
		l.life.hooks = map[uint64]func(error){}
	}
	id := l.life.next
	l.life.next++
	l.life.hooks[id] = f
	l.life.mu.Unlock()
	l.e.keep.watch(l)
	return func() {
		l.life.mu.Lock()
		delete(l.life.hooks, id)
		l.life.mu.Unlock()
	}
}

// end ends the lock's life with err (the first cause wins): Done closes,
// Context cancels, the keeper forgets it.
func (l *Lock) end(err error) {
	l.life.mu.Lock()
	if l.life.err != nil {
		l.life.mu.Unlock()
		return
	}
	l.life.err = err
	l.life.ended.Store(true)
	if l.life.done != nil {
		close(l.life.done)
	}
	hooks := l.life.hooks
	l.life.hooks = nil
	l.life.mu.Unlock()
	if err != ErrUnlocked && err != ErrClosed && !l.attached {
		l.e.locksLost.Add(1)
		if obs := l.e.obs; obs != nil {
			obs.Lost(err)
		}
	}
	for _, cancel := range hooks {
		cancel(err)
	}
	if l.watched.Load() {
		l.e.keep.remove(l)
	}
}

// ended reports whether the lock's life ended.
func (l *Lock) ended() bool {
	l.life.mu.Lock()
	defer l.life.mu.Unlock()
	return l.life.err != nil
}

var errValidityEnded = fmt.Errorf("%w: %w", ErrLockLost, ErrExpired)
var errMaxHold = fmt.Errorf("%w: %w", ErrLockLost, ErrMaxHold)
var errExtensionsOut = fmt.Errorf("%w: %w", ErrLockLost, ErrTooManyExtensions)

// expired is the cause of a validity that ran out.
func (l *Lock) expired() error {
	if l.auto && l.extensions.Load() >= int64(l.e.cfg.MaxExtensions) {
		return errExtensionsOut
	}
	if l.maxed.Load() {
		return errMaxHold
	}
	l.e.keep.mu.Lock()
	rerr := l.retryErr
	l.e.keep.mu.Unlock()
	if rerr != nil {
		// The watchdog's extensions got no quorum of answers until the
		// end: matches ErrUnavailable too.
		return &retriedOutError{last: rerr}
	}
	return errValidityEnded
}

// retriedOutError ends a lock whose watchdog's extensions got no quorum
// of answers until its validity ran out. Its message is built when it is
// read, not when the lock ends: the last extension's error
// (lateQuorumError) reads the answers that came after its decision, and
// the lock may end within a round trip of it.
type retriedOutError struct{ last error }

func (e *retriedOutError) Error() string {
	return errValidityEnded.Error() + " while the watchdog's extensions got too few answers (the last: " + e.last.Error() + ")"
}

// Unwrap matches ErrLockLost and ErrExpired, and whatever the last
// extension's error matches (ErrUnavailable).
func (e *retriedOutError) Unwrap() []error { return []error{errValidityEnded, e.last} }

// Unlock releases the lock on every master with a compare-and-delete. It
// returns nil when a quorum released it, an error matching [ErrLockLost]
// when fewer did (expired, taken over, or — also matching
// [ErrUnavailable] — too few masters answered), or ctx's error. Cancelling
// ctx stops the wait, not the release on the wire (a later Unlock waits
// for it to end: at most the per-master timeout).
//
// An Unlock that did not get a quorum can be called again: it sends the
// release only to the masters that have not answered yet (timed out, down,
// or not reached before ctx ended) and reports the quorum over every answer
// so far. On such a retry a master that no longer holds the token counts
// as released: the earlier release may have reached it after the earlier
// call returned (so a retry cannot tell "lost before Unlock" from
// "released late"; the first call can). After a successful Unlock, Unlock
// returns an error matching [ErrUnlocked].
func (l *Lock) Unlock(ctx context.Context) error {
	u := unlockers.Get().(*unlocker)
	l.unlock(u)
	d := ctx.Done()
	if err := ctx.Err(); err != nil {
		// Cancelled before the call: the release is on the wire anyway;
		// u is left to the collector (its result may still come).
		return err
	}
	if d == nil { // a context that never ends: a plain receive is cheaper than select
		<-u.ch
	} else {
		select {
		case <-u.ch:
		case <-d:
			// u is left to the collector (its result still comes). A
			// release decided short of a quorum that was waiting for its
			// last answers reports what it has: its error names the
			// masters still out.
			err := ctx.Err()
			if u.short.Load() {
				err = u.o.quorumError(ErrLockLost, nil)
			}
			if u.o != nil {
				u.o.unref() // Unlock's own reference (unlock)
			}
			return err
		}
	}
	err := u.err
	if u.o != nil {
		u.o.unref()
	}
	u.free()
	return err
}

// UnlockAsync releases the lock like [Lock.Unlock] without blocking on
// the masters: done receives what Unlock would return, exactly once, on
// the goroutine that completes the release — a master connection's
// reader (done must not block, nor call the engine's blocking methods),
// or the caller's own before UnlockAsync returns. An Unlock or
// UnlockAsync of the same lock still in flight is waited for first (it
// ends by its per-master timeout).
func (l *Lock) UnlockAsync(done func(error)) {
	if done == nil {
		panic("engine: UnlockAsync with a nil done")
	}
	l.unlock(&unlocker{done: done})
}

// unlocker is one Unlock between its fan-out and its result. Those of
// Unlock are pooled: Unlock frees them after reading the result.
type unlocker struct {
	l      *Lock
	o      *op
	short  atomic.Bool // decided short of a quorum; waiting for the last answers
	done   func(error) // UnlockAsync's; nil: the result goes to err and ch
	pooled bool
	ch     chan struct{}
	err    error
}

var unlockers = sync.Pool{New: func() any { return &unlocker{ch: make(chan struct{}, 1), pooled: true} }}

func (u *unlocker) free() {
	if u.pooled {
		ch := u.ch
		*u = unlocker{ch: ch, pooled: true}
		unlockers.Put(u)
	}
}

func (u *unlocker) deliver(err error) {
	if u.done != nil {
		u.done(err)
		return
	}
	u.err = err
	u.ch <- struct{}{}
}

// unlock sends the release; relMu is held until its result (finished).
func (l *Lock) unlock(u *unlocker) {
	l.relMu.Lock()
	if l.released {
		l.relMu.Unlock()
		u.deliver(errUnlocked)
		return
	}
	l.unlocked.Store(true)
	l.end(ErrUnlocked)
	e := l.e
	if e.closed.Load() {
		l.relMu.Unlock()
		u.deliver(ErrClosed)
		return
	}
	retry := l.relState != nil
	if !retry {
		l.relState = l.relBuf[:0]
		l.relState = append(l.relState, make([]int8, e.n)...) // no allocation for n ≤ 8
	}
	o := e.getOp(opRelease, false, l.cix, l.first)
	o.khash, o.key = l.khash, l.key
	o.retry = retry
	o.acq, o.role, o.cleanAfter = u, roleRelease, true
	u.l, u.o = l, o
	if u.done == nil {
		o.refs.Add(1) // Unlock's own: it may read o when ctx ends first
	}
	copy(o.preset, l.relState)
	script := l.appendRelease(o)
	deadline := time.Now().Add(e.cfg.masterTimeout(l.ttl))
	if e.waits.n.Load() > 0 {
		// Hand-off: a waiter of this engine tries now; its acquire goes
		// with this release on every master's connection (connFor).
		e.waits.released(l, o, deadline, script)
		return
	}
	o.fanout(deadline, script)
}

// step: the release is decided. Short of a quorum it also waits for the
// answers still out (each bounded by the per-master timeout): its error
// then counts and names every master, not only those whose failures
// decided it (three masters refused at once because they are down decide
// a release on five before the two that are up have answered).
func (u *unlocker) step(o *op) {
	if o.granted() >= u.l.e.q {
		u.finished()
		return
	}
	u.short.Store(true)
	if o.stage.Add(1) == 2 {
		u.finished()
	}
}

func (u *unlocker) settled(*op) { u.finished() }

// finished records the release's answers and delivers its result.
func (u *unlocker) finished() {
	l, o, e := u.l, u.o, u.l.e
	l.absorb(o)
	var err error
	if o.granted() >= e.q {
		l.released = true
		if !l.attached && !l.uncounted {
			e.released.Add(1)
			if e.obs != nil {
				e.obs.Release(ReleaseReleased)
			}
		}
	} else {
		err = o.quorumError(ErrLockLost, nil)
		if !l.attached && !l.uncounted {
			r := ReleaseLost
			if errors.Is(err, ErrUnavailable) {
				r = ReleaseUnavailable
				e.relUnavailable.Add(1)
			} else {
				e.lost.Add(1)
			}
			if e.obs != nil {
				e.obs.Release(r)
			}
		}
	}
	l.relMu.Unlock()
	o.unref()
	u.deliver(err)
}

// absorb records the release answers o has so far into relState.
func (l *Lock) absorb(o *op) {
	yes := o.yes.Load()
	o.mu.Lock()
	defer o.mu.Unlock()
	for i := range l.relState {
		switch {
		case yes&(1<<uint(i)) != 0:
			l.relState[i] = 1
		case o.results[i].state == -1 && o.results[i].err == ErrNotHeld:
			l.relState[i] = -1
		}
	}
}

// lowerUntil moves the validity deadline to d if that is earlier, and the
// loss signal (Done, Context) with it.
func (l *Lock) lowerUntil(d int64) {
	if l.lowered(d) && l.watched.Load() {
		l.e.keep.reschedule(l)
	}
}

// lowered moves the validity deadline to d if that is earlier; it reports
// whether it did (lowerUntil then reschedules the watchdog).
func (l *Lock) lowered(d int64) bool {
	for {
		cur := l.until.Load()
		if d >= cur {
			return false
		}
		if l.until.CompareAndSwap(cur, d) {
			return true
		}
	}
}

// Extend resets the lock's TTL to ttl on every master that still holds the
// token. It succeeds only when a quorum did so within the new validity;
// then Until moves to ttl minus drift after the call started. Otherwise it
// returns an error matching [ErrLockLost] (the lock ended: [Lock.Done]
// closes), [ErrUnlocked] after Unlock, [ErrTooManyExtensions], or ctx's
// error. From the moment it is
// sent, whatever comes of it, Until is at most ttl minus drift after the
// call started (some masters may hold the new TTL, which may be shorter),
// and only the success of the latest extension sent moves it up.
func (l *Lock) Extend(ctx context.Context, ttl time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	x := extenders.Get().(*extender)
	if err := l.extend(ttl, x); err != nil {
		x.free()
		return err
	}
	if d := ctx.Done(); d == nil { // a context that never ends: a plain receive is cheaper than select
		<-x.ch
	} else {
		select {
		case <-x.ch:
		case <-d:
			// The extension goes on (it ends by its per-master timeout)
			// and is applied to the lock at its decision, as any; x is
			// left to the collector. Some masters may have applied the
			// new TTL: sending already lowered the deadline to what it
			// leaves.
			return ctx.Err()
		}
	}
	err := x.err
	x.free()
	return err
}

// ExtendAsync extends the lock like [Lock.Extend] without blocking on the
// masters: done receives what Extend would return, exactly once, on the
// goroutine that completes the extension — a master connection's reader
// (done must not block, nor call the engine's blocking methods), or the
// caller's own before ExtendAsync returns (a bad TTL, an unlocked lock, a
// closed engine).
func (l *Lock) ExtendAsync(ttl time.Duration, done func(error)) {
	if done == nil {
		panic("engine: ExtendAsync with a nil done")
	}
	x := &extender{done: done}
	if err := l.extend(ttl, x); err != nil {
		done(err)
	}
}

// extender is one Extend between its fan-out and its result. Those of
// Extend are pooled: Extend frees them after reading the result.
type extender struct {
	l      *Lock
	done   func(error) // ExtendAsync's; nil: the result goes to err and ch
	pooled bool
	ch     chan struct{}
	err    error
}

var extenders = sync.Pool{New: func() any { return &extender{ch: make(chan struct{}, 1), pooled: true} }}

func (x *extender) free() {
	if x.pooled {
		ch := x.ch
		*x = extender{ch: ch, pooled: true}
		extenders.Put(x)
	}
}

// extend checks and sends an extension whose result goes to x.
func (l *Lock) extend(ttl time.Duration, x *extender) error {
	ttl, err := l.e.lockTTL(ttl)
	if err != nil {
		return err
	}
	ms := ttl.Milliseconds()
	if l.unlocked.Load() {
		return errUnlocked
	}
	if l.life.ended.Load() {
		return l.Err() // an ended lock stays ended: nothing is sent
	}
	e := l.e
	if e.closed.Load() {
		return ErrClosed
	}
	if l.extensions.Load() >= int64(e.cfg.MaxExtensions) {
		return ErrTooManyExtensions
	}
	x.l = l
	l.startExtend(ttl, ms, x, false)
	return nil
}

// step: the extension is decided. Short of a quorum it also waits for
// the answers still out (as a release does: unlocker.step), so that its
// error names every master.
func (x *extender) step(o *op) {
	if o.granted() >= x.l.e.q || o.stage.Add(1) == 2 {
		x.finished(o)
	}
}

func (x *extender) settled(o *op) { x.finished(o) }

func (x *extender) finished(o *op) {
	err := x.l.extendDone(o)
	if x.done != nil {
		x.done(err)
		return
	}
	x.err = err
	x.ch <- struct{}{}
}

// sendExtend starts an extension to ttl (ms in milliseconds). keeper: its
// decision goes to the keeper (the watchdog's) instead of o.done.
func (l *Lock) sendExtend(ttl time.Duration, ms int64, keeper bool) *op {
	return l.startExtend(ttl, ms, nil, keeper)
}

// startExtend is sendExtend, whose decision goes to x when set (Extend,
// ExtendAsync), to the keeper when keeper is set, else to o.done.
func (l *Lock) startExtend(ttl time.Duration, ms int64, x *extender, keeper bool) *op {
	e := l.e
	o := e.getOp(opExtend, false, l.cix, l.first)
	o.khash, o.merge, o.key = l.khash, e.extendMerge, l.key
	o.lock, o.ttl, o.t1 = l, ttl, time.Now()
	// From the moment it is sent, any master may apply this TTL, and a
	// later extension may reach only some of them: never count on more
	// than this one leaves. (Extend(1s) answered by all, then Extend(30s)
	// by two of five: three masters let the key go after 1s.) Only a later
	// extension's success moves the deadline up again (extendDone).
	l.extMu.Lock()
	o.seq = l.extSent.Add(1)
	lowered := l.lowered(e.untilAfter(o.t1, ttl))
	l.extMu.Unlock()
	if lowered && l.watched.Load() {
		e.keep.reschedule(l)
	}
	switch {
	case x != nil:
		o.acq, o.role, o.cleanAfter = x, roleExtend, true
	case keeper:
		o.notify = e.keep.decided
	}
	script := scripts.Extend
	if l.read {
		o.merge, script = nil, scripts.ReadExtend
	}
	o.cmd = appendExtend(o.cmd[:0], script, l.key, l.token, ms)
	o.fanout(o.t1.Add(e.cfg.masterTimeout(ttl)), script)
	return o
}

// appendRelease encodes l's release into o.cmd, sets o's merge, and
// returns the script o.cmd calls.
func (l *Lock) appendRelease(o *op) *conn.Script {
	o.merge = l.e.releaseMerge
	if l.read {
		o.merge = l.e.readReleaseMerge
	}
	var script *conn.Script
	o.cmd, script = l.releaseCall(o.cmd[:0])
	return script
}

// releaseCall appends l's release to dst — a read lock's removes its entry
// from the readers' set, any other's deletes its key where it holds l's
// token — and returns the script it calls.
func (l *Lock) releaseCall(dst []byte) ([]byte, *conn.Script) {
	if l.read {
		dst = scripts.ReadRelease.AppendEvalSha(dst, 1, 1)
		dst = resp.AppendBulkString(dst, l.key)
		return resp.AppendBulkString(dst, l.token), scripts.ReadRelease
	}
	return l.e.appendRelease(dst, l.key, l.token), l.e.release
}

// sendReenter starts a Reentrant's re-acquisition of l for ttl (ms in
// milliseconds): the masters that hold l's token raise its TTL to ttl if it
// is lower. Since no master's TTL is lowered, the deadline is not lowered
// at sending, and a success moves it to the later of the two.
func (l *Lock) sendReenter(ttl time.Duration, ms int64) *op {
	e := l.e
	o := e.getOp(opExtend, false, l.cix, l.first)
	o.khash, o.key, o.raise = l.khash, l.key, true
	o.lock, o.ttl, o.t1 = l, ttl, time.Now()
	l.extMu.Lock()
	o.seq = l.extSent.Add(1)
	l.extMu.Unlock()
	o.cmd = scripts.Reenter.AppendEvalSha(o.cmd[:0], 1, 2)
	o.cmd = resp.AppendBulkString(o.cmd, l.key)
	o.cmd = resp.AppendBulkString(o.cmd, l.token)
	o.cmd = resp.AppendBulkInt(o.cmd, ms)
	o.fanout(o.t1.Add(e.cfg.masterTimeout(ttl)), scripts.Reenter)
	return o
}

// extendDone applies the decided extension o to the lock and releases o.
//
// Sending an extension already lowered the deadline to what it leaves
// (sendExtend). A success moves the deadline to ttl − drift after o
// started, unless a later extension was sent meanwhile: the masters apply
// extensions in the order sent, so the later one's TTL is what they hold
// and only its decision may move the deadline up (Extend(30s) then
// Extend(1s): the masters keep 1s, whichever call is answered last). A
// failure only ever lowers the deadline (some masters may hold the new
// TTL).
//
// A failure ends the lock, except a watchdog's extension that too few
// masters answered to tell (ErrUnavailable) while validity is left: the
// lock is still held as far as anyone can prove, and the watchdog tries
// again (keeper.retry); the validity running out ends it then, with that
// error.
func (l *Lock) extendDone(o *op) error {
	defer o.unref()
	e := l.e
	newUntil := e.untilAfter(o.t1, o.ttl)
	ok, extra := e.verdict(o, o.t1, o.ttl)
	if ok {
		l.extMu.Lock()
		// (An attached lock — the proxy's, for a client's extension — has
		// no validity of its own here: its until stays 0.)
		if l.life.ended.Load() || !l.attached && time.Duration(l.until.Load()) <= time.Since(e.epoch) {
			// Confirmed after the lock ended, or after its validity ran
			// out: between the two, nothing proved it held. A late success
			// raised Until after the watchdog had ended the lock (Done
			// closed, Err set, yet Valid again; found by the review of
			// issue #46); it stays ended.
			l.extMu.Unlock()
			e.extendFailed.Add(1)
			if e.obs != nil {
				e.obs.Extend(false, o.notify != nil)
			}
			l.end(l.expired())
			// The masters that confirmed hold the key with the new TTL under
			// this lock's token, which nobody holds now: release it there
			// (best effort; the token is this lock's alone, property d).
			// (A read lock's is its entry in the readers' set: the plain
			// release met WRONGTYPE there and left a reader that kept
			// writers out to the late TTL.)
			cmd, script := l.releaseCall(nil)
			e.sendAll(l.key, script, cmd)
			return l.Err() // the end's first cause: ended before, or now
		}
		latest := o.seq == l.extSent.Load()
		if latest {
			if o.raise {
				newUntil = max(newUntil, l.until.Load())
			}
			l.until.Store(newUntil)
		}
		l.extMu.Unlock()
		if latest {
			l.granted.Store(int64(o.t1.Sub(e.epoch)))
			e.keep.extended(l)
		}
		if !o.raise {
			l.extensions.Add(1)
		}
		e.extended.Add(1)
		if e.obs != nil {
			e.obs.Extend(true, o.notify != nil)
		}
		if l.watched.Load() {
			e.keep.reschedule(l)
		}
		return nil
	}
	err := o.quorumError(ErrLockLost, extra)
	if o.notify != nil && extra == nil && errors.Is(err, ErrUnavailable) {
		// A watchdog's extension is decided at the failures that rule out
		// a quorum, before the healthy masters' answers arrive: its error
		// reads them when it is read.
		o.refs.Add(1)
		err = &lateQuorumError{early: err, o: o}
	}
	e.extendFailed.Add(1)
	if e.obs != nil {
		e.obs.Extend(false, o.notify != nil)
	}
	if o.raise {
		// A re-acquisition lowered no master's TTL: the hold keeps its
		// deadline unless a quorum said the key no longer holds its token.
		if extra == nil && !errors.Is(err, ErrUnavailable) {
			l.end(err)
		}
		return err
	}
	l.lowerUntil(newUntil)
	// Too few answers: the watchdog tries again while the validity lasts.
	// Refusals a retry cannot cure (ErrMisconfigured: an ACL short of the
	// extension's commands) end the lock now.
	if o.notify != nil && extra == nil && errors.Is(err, ErrUnavailable) && !errors.Is(err, ErrMisconfigured) && e.keep.retry(l, err) {
		return err
	}
	l.end(err)
	return err
}
