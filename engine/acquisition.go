package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/resp"
)

// An acquisition from its fan-out to its result, as a chain of steps that
// run where the answer that completes each one arrives — a master
// connection's reader, most often — so that no goroutine waits for it:
//
//	acquire op decided ─┬─ granted ──(WithFencing: write-back op decided)── verdict ── result
//	                    └─ refused, unavailable, too late or cancelled
//	                          └─ and every master answered ── cleanup op decided ── result
//
// The result goes to done (TryLockAsync) or to the owner waiting in
// finish (TryLock and everything built on it): one implementation for
// both.

// TryLockAsync makes one attempt to acquire key for ttl, like
// [Engine.TryLock], without blocking: done receives what TryLock would
// return, exactly once. It runs on the goroutine that completes the
// attempt — a master connection's reader (then every later reply of that
// master waits for it: done must not block, and must not call the
// engine's blocking methods, such as [Lock.Unlock], which would wait for
// that reader), an expiry timer, or the caller's own before TryLockAsync
// returns (a bad argument, a closed engine, masters refused at once). A
// refused attempt's cleanup is done before done runs, as for TryLock.
// When ctx ends before the attempt is decided, done receives ctx's error
// after the cleanup; a fencing write-back under way then ends by its
// per-master timeout. The grant is the one TryLock makes: the same
// quorum, the same validity (checked last, before done runs), the same
// quarantine and clock check (docs/safety.md, "The grant rule").
func (e *Engine) TryLockAsync(ctx context.Context, key string, ttl time.Duration, done func(*Lock, error), opts ...Option) {
	if done == nil {
		panic("engine: TryLockAsync with a nil done")
	}
	var co callOpts
	if len(opts) > 0 {
		co = applyOpts(opts)
		if co.waitOnly != "" {
			done(nil, fmt.Errorf("%w: %s applies to Lock, not TryLockAsync", ErrBadArgument, co.waitOnly))
			return
		}
	}
	if key == "" {
		done(nil, errEmptyKey)
		return
	}
	if _, err := e.begin(ctx, e.cfg.KeyPrefix+key, ttl, co, done); err != nil {
		done(nil, err)
	}
}

// acquisition is one acquisition attempt between begin and its result.
// Acquisitions collected by finish are pooled: finish frees them after
// reading the result.
type acquisition struct {
	e   *Engine
	l   *Lock
	o   *op // the acquire op; its owner's reference is dropped with the result
	t1  time.Time
	mt  time.Duration // per-master timeout
	ttl time.Duration
	co  callOpts

	// won is taken by whichever comes first: the acquire op's decision or
	// a cancellation. The loser does nothing.
	won atomic.Bool
	// stage counts the two events the cleanup waits for: a failure decided
	// (refused, cancelled, fencing failed) and every master's answer to
	// the acquire op. The second to arrive starts the cleanup.
	fop   *op   // the fencing write-back op, while under way
	rel   *op   // the cleanup's release op, while under way
	fail  error // set before the failure is staged: cancellation's or fencing's error, nil: the verdict's
	extra error // the verdict's extra cause (ErrGrantedTooLate)
	votes int   // a grant's yes answers at its verdict

	done   func(*Lock, error) // TryLockAsync's; nil: the result goes to res, err and ch
	stop   func() bool        // TryLockAsync's context watch (watch)
	ctx    context.Context    // the watched context (watch), nil when none
	pooled bool
	ch     chan struct{} // receives one value with the result (finish)
	res    *Lock
	err    error
}

var acquisitions = sync.Pool{New: func() any { return &acquisition{ch: make(chan struct{}, 1), pooled: true} }}

func newAcquisition(e *Engine, done func(*Lock, error)) *acquisition {
	if done != nil {
		return &acquisition{e: e, done: done}
	}
	a := acquisitions.Get().(*acquisition)
	a.e = e
	return a
}

// watch cancels an asynchronous acquisition when ctx ends. Only one
// whose context can end pays for it; it is never pooled (the watch may
// outlive it). Called before the fan-out: the decision cannot come first.
func (a *acquisition) watch(ctx context.Context) {
	if a.done != nil && ctx.Done() != nil {
		a.ctx = ctx
		a.stop = context.AfterFunc(ctx, func() {
			if h := watchHook.Load(); h != nil {
				(*h)()
			}
			a.cancel(ctx.Err())
		})
	}
}

// watchHook, when a test sets it, runs in the watch's goroutine before it
// cancels the acquisition (a goroutine the runtime may start late).
var watchHook atomic.Pointer[func()]

// free returns a collected acquisition to the pool.
func (a *acquisition) free() {
	if !a.pooled {
		return
	}
	ch := a.ch
	*a = acquisition{ch: ch, pooled: true}
	acquisitions.Put(a)
}

// step receives the decision of one of the acquisition's ops, by the
// op's role.
func (a *acquisition) step(o *op) {
	switch o.role {
	case roleAcquire:
		a.decided()
	case roleFence:
		a.fenced()
	case roleCleanup:
		a.cleaned()
	}
}

// decided: the acquire op is decided (a quorum granted, or it cannot).
func (a *acquisition) decided() {
	if a.ctx != nil && a.ctx.Err() != nil {
		// The context ended before the decision, and the watch's
		// goroutine has not run yet: the attempt ends with ctx's error
		// all the same (TestTryLockAsyncCancel, under load).
		a.cancel(a.ctx.Err())
		return
	}
	if !a.won.CompareAndSwap(false, true) {
		return // cancelled first
	}
	if a.co.fencing && a.o.granted() >= a.e.q {
		a.startFence()
		return
	}
	a.judge()
}

// cancel abandons the attempt with err unless its decision came first.
func (a *acquisition) cancel(err error) {
	if !a.won.CompareAndSwap(false, true) {
		return
	}
	a.e.cancelled.Add(1)
	a.fail = err
	a.failed()
}

// judge checks a quorum's grant last: the lock only while it is valid.
func (a *acquisition) judge() {
	e, l, o := a.e, a.l, a.o
	ok, extra := e.verdict(o, a.t1, a.ttl)
	if !ok {
		a.extra = extra
		a.failed()
		return
	}
	a.votes = o.granted()
	l.partial = a.votes < e.n
	l.until.Store(e.untilAfter(a.t1, a.ttl))
	l.granted.Store(int64(a.t1.Sub(e.epoch)))
	if a.co.autoExtend {
		l.auto = true
		if a.co.maxHold > 0 {
			l.holdEnd = int64(a.t1.Sub(e.epoch) + a.co.maxHold)
		}
		if !e.keep.watch(l) {
			// The engine is closing: no watchdog will keep the lock, and
			// it has ended (ErrClosed). It is not handed out — a grant is
			// returned only while valid (property (c); found by the review
			// of issue #46) — and what it created is cleaned up.
			a.fail = ErrClosed
			a.failed()
			return
		}
	}
	if a.done != nil {
		// Handed over now (TryLockAsync). A grant for an owner waiting in
		// finish is counted there, once it is found still valid: one
		// collected too late is a failure, not an acquisition.
		e.countAcquired(nil, a.votes, a.t1, a.ttl)
	}
	o.unref()
	a.deliver(l, nil)
}

// failed stages a failure: the cleanup starts once every master answered
// the acquire op (op.record, settled).
func (a *acquisition) failed() {
	if a.o.stage.Add(1) == 2 {
		a.cleanup()
	}
}

// settled: the acquire op's failure is staged and every master answered.
func (a *acquisition) settled(*op) { a.cleanup() }

// cleanup releases the failed attempt's token once every master answered
// its acquire op, so a failed acquisition leaves nothing behind; its
// result waits for the release (bounded by CleanupTimeout per master). It
// removes only what this attempt created (the grant rule's property (d),
// docs/safety.md): it skips masters that answered with a nil reply (SET NX
// wrote nothing there, and a release could only delete a lock that holds
// the same token). With a token of its own (random, unique to this
// attempt) every other master is released, including those that timed
// out: their SET may still execute, and the release is queued behind it
// on the same connection. With the caller's token (WithToken: the proxy
// passes clients' values through) a master that did not answer may hold
// the caller's own earlier lock under that token, which this attempt's
// SET NX left alone, so only the masters that answered that they created
// the key (counted or quarantined) are cleaned up, and only while the
// attempt's validity lasts: past it the caller may have given up and
// taken the same token again, which a release by token would delete.
// Even within it the caller may have: a client that gave up on this
// attempt (its own timeout), released its value and sent it again —
// through this proxy or another — may have been granted on the masters
// where this attempt had created the key. So the cleanup deletes a key
// only where the key's mark is still this attempt's nonce
// (scripts.CleanupMarked): the retry's write took the mark over. Without
// a mark (a Redis Cluster member, a key whose hashed part has a brace)
// nothing is deleted by value. What is not released expires at its TTL.
func (a *acquisition) cleanup() {
	e, acq, l := a.e, a.o, a.l
	o := e.getOp(opRelease, true, l.cix, acq.first)
	o.khash, o.key = acq.khash, l.key
	yes := acq.yes.Load()
	late := l.callerToken && (!l.marked || time.Since(e.epoch) >= time.Duration(e.untilAfter(acq.t1, l.ttl)))
	acq.mu.Lock()
	for i, r := range acq.results {
		created := yes&(1<<uint(i)) != 0 || r.err == ErrQuarantined
		if r.state == -1 && r.err == ErrHeld || l.callerToken && (!created || late) {
			o.preset[i] = 1 // nothing of this attempt's there: not sent, counted as done
		}
	}
	acq.mu.Unlock()
	var script *conn.Script
	if l.marked {
		script = scripts.CleanupMarked
		o.cmd = script.AppendEvalSha(o.cmd[:0], 2, 2)
		o.cmd = resp.AppendBulkString(o.cmd, l.key)
		o.cmd = l.appendBulkMark(o.cmd)
		o.cmd = resp.AppendBulkString(o.cmd, l.token)
		o.cmd = resp.AppendBulkString(o.cmd, l.nonce())
	} else {
		script = l.appendRelease(o)
	}
	a.rel = o
	o.acq, o.role = a, roleCleanup
	o.fanout(time.Now().Add(e.cfg.CleanupTimeout), script)
}

// cleaned: the cleanup's release is decided; the failure's error is
// built from every master's answer (held, unavailable, quarantined).
func (a *acquisition) cleaned() {
	e, o := a.e, a.o
	a.rel.unref()
	a.rel = nil
	err := a.fail // cancellation's or fencing's, counted there
	if err == nil {
		err = o.quorumError(ErrNotAcquired, a.extra)
		if errors.Is(err, ErrUnavailable) {
			e.unavailable.Add(1)
		} else {
			e.failed.Add(1)
		}
	}
	e.observeAcquire(err, o.granted(), a.t1, a.ttl)
	o.unref()
	a.deliver(nil, err)
}

// deliver hands the result over.
func (a *acquisition) deliver(l *Lock, err error) {
	if a.done != nil {
		if a.stop != nil {
			a.stop()
		}
		a.done(l, err)
		return
	}
	a.res, a.err = l, err
	a.ch <- struct{}{}
}

// startFence computes the fencing token of a fenced grant whose granting
// masters returned at most f, and writes it back to every master: the
// raise script raises the master's counter to the token where the lock key
// still holds this lock's token, and answers 0 (not counted) where it does
// not. The grant stands once a quorum stored it that way (answers of
// masters in restart quarantine do not count): on each of those masters,
// any later grant of the key comes after this lock's key left it, so after
// the raise, and counts above the token (docs/safety.md, "Fencing
// tokens"). The token is also above every token this engine issued
// before. Otherwise the attempt fails with a QuorumError (op "fence")
// matching ErrNotAcquired when a quorum answered but too few still held
// the token, ErrUnavailable when fewer than a quorum answered: a grant
// without a token that later holders are sure to exceed is not handed out.
func (a *acquisition) startFence() {
	e, l := a.e, a.l
	f := a.o.fence.Load()
	for {
		cur := e.lastFence.Load()
		if f <= cur {
			f = cur + 1
		}
		if e.lastFence.CompareAndSwap(cur, f) {
			break
		}
	}
	if f > scripts.MaxFence { // the engine's own floor (lastFence + 1) past the scripts' bound
		a.fenceFailed(errFenceRange)
		return
	}
	fenceKey, err := e.fenceKeyFor(l.key) // checked by begin
	if err != nil {
		a.fenceFailed(err)
		return
	}
	l.fence = f
	o := e.getOp(opRaise, false, l.cix, l.first)
	o.khash, o.key = l.khash, l.key
	o.cmd = scripts.FenceRaise.AppendEvalSha(o.cmd[:0], 2, 2)
	o.cmd = resp.AppendBulkString(o.cmd, l.key)
	o.cmd = resp.AppendBulkString(o.cmd, fenceKey)
	o.cmd = resp.AppendBulkString(o.cmd, l.token)
	o.cmd = resp.AppendBulkInt(o.cmd, f)
	a.fop = o
	o.acq, o.role = a, roleFence
	o.fanout(time.Now().Add(a.mt), scripts.FenceRaise)
}

// fenced: the fencing write-back is decided.
func (a *acquisition) fenced() {
	o := a.fop
	a.fop = nil // o goes back to the pool: it may return as the cleanup's op
	if o.granted() >= a.e.q {
		o.unref()
		a.judge()
		return
	}
	err := o.quorumError(ErrNotAcquired, nil)
	o.unref()
	a.fenceFailed(err)
}

func (a *acquisition) fenceFailed(err error) {
	if errors.Is(err, ErrUnavailable) {
		a.e.unavailable.Add(1)
	} else {
		a.e.failed.Add(1)
	}
	a.l.fence = 0
	a.fail = err
	a.failed()
}

// observeAcquire reports an ended acquisition attempt to the Observer.
func (e *Engine) observeAcquire(err error, votes int, t1 time.Time, ttl time.Duration) {
	if e.obs == nil {
		return
	}
	now := time.Now()
	ev := AcquireEvent{Result: acquireResult(err), Latency: now.Sub(t1), Margin: votes - e.q, TTL: ttl}
	if err == nil {
		ev.ValidityLeft = ttl - now.Sub(t1) - e.cfg.drift(ttl)
	}
	e.obs.Acquire(ev)
}

// countAcquired counts a grant handed to its caller (err nil), or one
// found past its validity when its owner collected it (err
// ErrGrantedTooLate's), in Stats and to the Observer.
func (e *Engine) countAcquired(err error, votes int, t1 time.Time, ttl time.Duration) {
	if err == nil {
		e.acquired.Add(1)
	} else {
		e.failed.Add(1)
	}
	e.observeAcquire(err, votes, t1, ttl)
}

// verdict decides an acquire or extend o that started at t1 for ttl: ok
// when a quorum granted with validity left (ttl − elapsed − drift > 0);
// otherwise the extra cause for the error, ErrGrantedTooLate when the
// quorum came too late, nil when there was none.
func (e *Engine) verdict(o *op, t1 time.Time, ttl time.Duration) (bool, error) {
	if o.granted() < e.q {
		return false, nil
	}
	if ttl-time.Since(t1)-e.cfg.drift(ttl) > 0 {
		return true, nil
	}
	return false, ErrGrantedTooLate
}

// untilAfter is the validity deadline, ns since e.epoch, of a grant that
// started at t1 for ttl.
func (e *Engine) untilAfter(t1 time.Time, ttl time.Duration) int64 {
	return int64(t1.Sub(e.epoch) + ttl - e.cfg.drift(ttl))
}
