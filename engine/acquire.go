package engine

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/resp"
)

// The acquire path: TryLock, one attempt on the wire (begin, finish), its
// verdict and validity, the cleanup of a failed attempt, the fencing
// write-back, and the commands it encodes.

// TryLock makes one attempt to acquire key for ttl. It returns the Lock,
// an error matching [ErrNotAcquired] (a quorum of masters answered: the key
// is held) or [ErrUnavailable] (too few masters answered to tell) — both a
// [*QuorumError] with per-master causes —, ctx's error as it is, or
// [ErrBadArgument]/[ErrClosed]. Masters still on their first connect
// attempt are waited for within the per-master timeout. On every
// failure what the attempt created has been released before it returns
// (bounded by Config.CleanupTimeout; with [WithToken], on the masters that
// answered that they created the key, see [WithToken]).
func (e *Engine) TryLock(ctx context.Context, key string, ttl time.Duration, opts ...Option) (*Lock, error) {
	var co callOpts
	if len(opts) > 0 {
		co = applyOpts(opts)
		if co.waitOnly != "" {
			return nil, fmt.Errorf("%w: %s applies to Lock, not TryLock", ErrBadArgument, co.waitOnly)
		}
	}
	if key == "" {
		return nil, errEmptyKey
	}
	return e.tryLock(ctx, e.cfg.KeyPrefix+key, ttl, co)
}

func applyOpts(opts []Option) callOpts { return applyOptsTo(callOpts{}, opts) }

func applyOptsTo(co callOpts, opts []Option) callOpts {
	for _, f := range opts {
		if f != nil {
			f(&co)
		}
	}
	return co
}

// lockTTL validates a lock's ttl and returns it as the masters will apply
// it: in whole milliseconds (PX), so that the validity is computed on what
// was sent, never on a sub-millisecond part the masters did not get.
func (e *Engine) lockTTL(ttl time.Duration) (time.Duration, error) {
	ttl = ttl.Truncate(time.Millisecond)
	if ttl < time.Millisecond {
		return 0, errBadTTL
	}
	if ttl > e.cfg.MaxTTL {
		return 0, fmt.Errorf("%w: ttl %v is longer than the maximum TTL %v: raise %s to at least %v (this also lengthens the restart "+
			"quarantine, in which restarted masters do not vote, to that long), or use a shorter TTL", ErrBadArgument, ttl, e.cfg.MaxTTL, e.cfg.Names.MaxTTL, ttl)
	}
	return ttl, nil
}

var (
	errBadTTL       = fmt.Errorf("%w: ttl must be at least 1ms", ErrBadArgument)
	errEmptyKey     = fmt.Errorf("%w: empty key", ErrBadArgument)
	errUnlocked     = ErrUnlocked
	errBadTokenSize = fmt.Errorf("%w: token longer than 512 bytes", ErrBadArgument)
)

func (e *Engine) tryLock(ctx context.Context, key string, ttl time.Duration, co callOpts) (*Lock, error) {
	a, err := e.begin(ctx, key, ttl, co)
	if err != nil {
		return nil, err
	}
	return e.finish(ctx, a)
}

// attempt is an acquisition on the wire, between begin and finish.
type attempt struct {
	l   *Lock
	o   *op
	t1  time.Time
	mt  time.Duration // per-master timeout
	ttl time.Duration
	co  callOpts
}

// begin validates an acquisition and sends it to every master.
func (e *Engine) begin(ctx context.Context, key string, ttl time.Duration, co callOpts) (attempt, error) {
	ttl, err := e.lockTTL(ttl)
	if err != nil {
		return attempt{}, err
	}
	ms := ttl.Milliseconds()
	if key == "" {
		return attempt{}, errEmptyKey
	}
	if len(co.token) > 512 {
		return attempt{}, errBadTokenSize
	}
	fenceKey := ""
	if co.fencing {
		var err error
		if fenceKey, err = e.fenceKeyFor(key); err != nil {
			return attempt{}, err
		}
	}
	if e.closed.Load() {
		return attempt{}, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return attempt{}, err
	}
	l := &Lock{e: e, key: key, ttl: ttl, cix: e.connFor(key), khash: e.keyHash(key), first: e.firstMaster()}
	if co.token != "" {
		l.token, l.callerToken = co.token, true
	} else {
		var raw [TokenLen / 2]byte
		crand.Read(raw[:])
		hex.Encode(l.tokenBuf[:], raw[:])
		l.token = unsafe.String(&l.tokenBuf[0], TokenLen)
		if co.tokenPrefix != "" {
			l.token = co.tokenPrefix + l.token
		}
	}
	kind, script := opAcquire, (*conn.Script)(nil)
	switch {
	case co.fencing:
		kind, script = opFenced, scripts.FenceAcquire
	case co.rw != rwNone:
		kind, script = opRW, scripts.WriteAcquire
		if co.rw == rwRead {
			script = scripts.ReadAcquire
			l.read, l.key = true, key+readersSuffix
		}
	}
	o := e.getOp(kind, false, l.cix, l.first)
	o.khash, o.key = l.khash, l.key
	switch {
	case co.fencing:
		o.cmd = appendFencedSet(o.cmd[:0], key, fenceKey, l.token, ms)
	case co.rw == rwRead:
		o.merge = e.readAcquireMerge
		o.cmd = appendExtend(o.cmd[:0], script, l.key, l.token, ms) // the same shape: key, token, ms
	case co.rw == rwWrite:
		o.cmd = appendWriteAcquire(o.cmd[:0], key, l.token, ms, co.waiterID)
	default:
		o.cmd = appendSet(o.cmd[:0], key, l.token, ms)
	}
	mt := co.masterTimeout
	if mt <= 0 {
		mt = e.cfg.masterTimeout(ttl)
	}
	t1 := time.Now()
	o.t1 = t1
	o.fanout(t1.Add(mt), script)
	return attempt{l: l, o: o, t1: t1, mt: mt, ttl: ttl, co: co}, nil
}

// finish waits for the decision of a begun acquisition and completes it:
// the lock, or an error after the cleanup.
func (e *Engine) finish(ctx context.Context, a attempt) (*Lock, error) {
	l, o, t1, mt, ttl, co := a.l, a.o, a.t1, a.mt, a.ttl, a.co
	if err := o.wait(ctx); err != nil {
		e.cancelled.Add(1)
		e.observeAcquire(err, o, t1, ttl)
		e.cleanup(o, l)
		o.unref()
		return nil, err
	}
	if co.fencing && o.granted() >= e.q {
		var err error
		if l.fence, err = e.fence(ctx, o.fence.Load(), l, mt); err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
				e.cancelled.Add(1)
			} else if errors.Is(err, ErrUnavailable) {
				e.unavailable.Add(1)
			} else {
				e.failed.Add(1)
			}
			// A grant without a token that later holders are sure to
			// exceed is not handed out.
			e.observeAcquire(err, o, t1, ttl)
			e.cleanup(o, l)
			o.unref()
			return nil, err
		}
	}
	ok, extra := e.verdict(o, t1, ttl)
	if ok {
		e.observeAcquire(nil, o, t1, ttl)
		o.unref()
		l.until.Store(e.untilAfter(t1, ttl))
		l.granted.Store(int64(t1.Sub(e.epoch)))
		e.acquired.Add(1)
		if co.autoExtend {
			l.auto = true
			if co.maxHold > 0 {
				l.holdEnd = int64(t1.Sub(e.epoch) + co.maxHold)
			}
			e.keep.watch(l)
		}
		return l, nil
	}
	// cleanup waits for every master's answer (bounded by the per-master
	// timeout): the error then tells "held" from "unavailable" on all of them.
	e.cleanup(o, l)
	qerr := o.quorumError(ErrNotAcquired, extra)
	if errors.Is(qerr, ErrUnavailable) {
		e.unavailable.Add(1)
	} else {
		e.failed.Add(1)
	}
	e.observeAcquire(qerr, o, t1, ttl)
	o.unref()
	return nil, qerr
}

// observeAcquire reports an ended acquisition attempt to the Observer.
func (e *Engine) observeAcquire(err error, o *op, t1 time.Time, ttl time.Duration) {
	if e.obs == nil {
		return
	}
	now := time.Now()
	ev := AcquireEvent{Result: acquireResult(err), Latency: now.Sub(t1), Margin: o.granted() - e.q, TTL: ttl}
	if err == nil {
		ev.ValidityLeft = ttl - now.Sub(t1) - e.cfg.drift(ttl)
	}
	e.obs.Acquire(ev)
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

// cleanup releases token after the failed acquisition acq and waits
// (bounded by CleanupTimeout per master) until each master answered, so a
// failed acquisition leaves nothing behind. It ignores the caller's
// cancellation. It removes only what this attempt created (the grant
// rule's property (d), docs/safety.md): it first waits for every answer
// to acq (bounded by the per-master timeout), then skips masters that
// answered with a nil reply (SET NX wrote nothing there, and a release
// could only delete a lock that holds the same token). With a token of
// its own (random, unique to this attempt) every other master is
// released, including those that timed out: their SET may still execute,
// and the release is queued behind it on the same connection. With the
// caller's token (WithToken: the proxy passes clients' values through) a
// master that did not answer may hold the caller's own earlier lock under
// that token, which this attempt's SET NX left alone, so only the masters
// that answered that they created the key (counted or quarantined) are
// released, and only while the attempt's validity lasts: past it the
// caller may have given up and taken the same token again, which a
// release by token would delete. What is not released expires at its TTL.
func (e *Engine) cleanup(acq *op, l *Lock) {
	<-acq.all
	o := e.getOp(opRelease, true, l.cix, acq.first)
	o.khash, o.key = acq.khash, l.key
	yes := acq.yes.Load()
	late := l.callerToken && time.Since(e.epoch) >= time.Duration(e.untilAfter(acq.t1, l.ttl))
	acq.mu.Lock()
	for i, r := range acq.results {
		created := yes&(1<<uint(i)) != 0 || r.err == ErrQuarantined
		if r.state == -1 && r.err == ErrHeld || l.callerToken && (!created || late) {
			o.preset[i] = 1 // nothing of this attempt's there: not sent, counted as done
		}
	}
	acq.mu.Unlock()
	script := l.appendRelease(o)
	o.fanout(time.Now().Add(e.cfg.CleanupTimeout), script)
	<-o.done
	o.unref()
}

// fence computes the fencing token of a fenced grant whose granting
// masters returned at most f, and writes it back to every master: the
// raise script raises the master's counter to the token where the lock key
// still holds this lock's token, and answers 0 (not counted) where it does
// not. It returns once a quorum stored it that way (answers of masters in
// restart quarantine do not count): on each of those masters, any later
// grant of the key comes after this lock's key left it, so after the
// raise, and counts above the token (docs/safety.md, "Fencing tokens").
// The token is also above every token this engine issued before. The error
// is ctx's, or a QuorumError (op "fence") matching ErrNotAcquired when a
// quorum answered but too few still held the token, ErrUnavailable when
// fewer than a quorum answered.
func (e *Engine) fence(ctx context.Context, f int64, l *Lock, mt time.Duration) (int64, error) {
	for {
		cur := e.lastFence.Load()
		if f <= cur {
			f = cur + 1
		}
		if e.lastFence.CompareAndSwap(cur, f) {
			break
		}
	}
	fenceKey, err := e.fenceKeyFor(l.key) // checked by begin
	if err != nil {
		return 0, err
	}
	o := e.getOp(opRaise, false, l.cix, l.first)
	o.khash, o.key = l.khash, l.key
	defer o.unref()
	o.cmd = scripts.FenceRaise.AppendEvalSha(o.cmd[:0], 2, 2)
	o.cmd = resp.AppendBulkString(o.cmd, l.key)
	o.cmd = resp.AppendBulkString(o.cmd, fenceKey)
	o.cmd = resp.AppendBulkString(o.cmd, l.token)
	o.cmd = resp.AppendBulkInt(o.cmd, f)
	o.fanout(time.Now().Add(mt), scripts.FenceRaise)
	if err := o.wait(ctx); err != nil {
		return 0, err
	}
	if o.granted() >= e.q {
		return f, nil
	}
	return 0, o.quorumError(ErrNotAcquired, nil)
}

func appendFencedSet(dst []byte, key, fenceKey, token string, ms int64) []byte {
	dst = scripts.FenceAcquire.AppendEvalSha(dst, 2, 2)
	dst = resp.AppendBulkString(dst, key)
	dst = resp.AppendBulkString(dst, fenceKey)
	dst = resp.AppendBulkString(dst, token)
	return resp.AppendBulkInt(dst, ms)
}

// appendWriteAcquire encodes a write acquisition of the RWLock whose
// writer key is key.
func appendWriteAcquire(dst []byte, key, token string, ms int64, waiter string) []byte {
	dst = scripts.WriteAcquire.AppendEvalSha(dst, 3, 3)
	dst = resp.AppendBulkString(dst, key)
	dst = resp.AppendBulkString(dst, key+readersSuffix)
	dst = resp.AppendBulkString(dst, key+intentSuffix)
	dst = resp.AppendBulkString(dst, token)
	dst = resp.AppendBulkInt(dst, ms)
	return resp.AppendBulkString(dst, waiter)
}

func appendSet(dst []byte, key, token string, ms int64) []byte {
	dst = append(dst, "*6\r\n$3\r\nSET\r\n"...)
	dst = resp.AppendBulkString(dst, key)
	dst = resp.AppendBulkString(dst, token)
	dst = append(dst, "$2\r\nNX\r\n$2\r\nPX\r\n"...)
	return resp.AppendBulkInt(dst, ms)
}

func (e *Engine) appendRelease(dst []byte, key, token string) []byte {
	if e.release == scripts.Release {
		dst = scripts.Release.AppendEvalSha(dst, 1, 1)
		dst = resp.AppendBulkString(dst, key)
		return resp.AppendBulkString(dst, token)
	}
	dst = e.release.AppendEvalSha(dst, 1, 2)
	dst = resp.AppendBulkString(dst, key)
	dst = resp.AppendBulkString(dst, token)
	return resp.AppendBulkString(dst, e.cfg.ReleaseChannel)
}

func appendExtend(dst []byte, script *conn.Script, key, token string, ms int64) []byte {
	dst = script.AppendEvalSha(dst, 1, 2)
	dst = resp.AppendBulkString(dst, key)
	dst = resp.AppendBulkString(dst, token)
	return resp.AppendBulkInt(dst, ms)
}
