package engine

import (
	"context"
	"encoding/hex"
	"fmt"
	"sync/atomic"
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
	for _, op := range opts {
		op.apply(&co)
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
	a, err := e.begin(ctx, key, ttl, co, nil)
	if err != nil {
		return nil, err
	}
	return e.finish(ctx, a)
}

// begin validates an acquisition and sends it to every master. With done
// set the acquisition ends by calling it (TryLockAsync); otherwise its
// owner collects the result with finish.
func (e *Engine) begin(ctx context.Context, key string, ttl time.Duration, co callOpts, done func(*Lock, error)) (*acquisition, error) {
	a, script, err := e.prepare(ctx, key, ttl, co, done)
	if err != nil {
		return nil, err
	}
	a.send(script)
	return a, nil
}

// send sends a prepared acquisition to every master: its validity counts
// from now.
func (a *acquisition) send(script *conn.Script) {
	t1 := time.Now()
	a.o.t1, a.t1 = t1, t1
	a.o.fanout(t1.Add(a.mt), script)
}

// prepare validates an acquisition and builds it, ready to send: its
// acquire op's command (o.cmd) and script. Its validity counts from the
// send (a.t1, set by the sender).
func (e *Engine) prepare(ctx context.Context, key string, ttl time.Duration, co callOpts, done func(*Lock, error)) (*acquisition, *conn.Script, error) {
	ttl, err := e.lockTTL(ttl)
	if err != nil {
		return nil, nil, err
	}
	ms := ttl.Milliseconds()
	if key == "" {
		return nil, nil, errEmptyKey
	}
	if len(co.token) > 512 {
		return nil, nil, errBadTokenSize
	}
	fenceKey := ""
	if co.fencing {
		var err error
		if fenceKey, err = e.fenceKeyFor(key); err != nil {
			return nil, nil, err
		}
	}
	if e.closed.Load() {
		return nil, nil, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	l := &Lock{e: e, key: key, ttl: ttl, first: e.firstMaster()}
	l.cix, l.khash = e.route(key)
	if co.token != "" {
		// The caller's token may be sent again by the caller's next
		// attempt while this one is under way (a client's retry after
		// its own timeout and release): the acquisition marks what it
		// creates with a nonce of its own, and its cleanup deletes only
		// where the mark is still this attempt's (docs/safety.md,
		// "Cleanup after a failed acquisition").
		l.token, l.callerToken = co.token, true
		if scripts.Markable(key, e.clusters != nil) {
			var raw [TokenLen / 2]byte
			readRandom(raw[:])
			hex.Encode(l.tokenBuf[:], raw[:])
			l.marked = true
		}
	} else {
		var raw [TokenLen / 2]byte
		readRandom(raw[:])
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
	case co.fair != nil:
		kind, script = opRW, scripts.FairAcquire
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
		o.cmd = appendFencedSet(o.cmd[:0], l, fenceKey, ms)
	case co.rw == rwRead:
		o.merge = e.readAcquireMerge
		o.cmd = appendExtend(o.cmd[:0], script, l.key, l.token, ms) // the same shape: key, token, ms
	case co.fair != nil:
		o.cmd = appendFairAcquire(o.cmd[:0], key, co.fair, l.token, ms)
	case co.rw == rwWrite:
		o.cmd = appendWriteAcquire(o.cmd[:0], key, l.token, ms, co.waiterID)
	case l.marked:
		script = scripts.AcquireMarked
		o.cmd = appendMarkedSet(o.cmd[:0], l, ms)
	default:
		o.cmd = appendSet(o.cmd[:0], key, l.token, ms)
	}
	mt := co.masterTimeout
	if mt <= 0 {
		mt = e.cfg.masterTimeout(ttl)
	}
	a := newAcquisition(e, done)
	a.l, a.o, a.mt, a.ttl, a.co = l, o, mt, ttl, co
	o.acq, o.cleanAfter, o.role = a, true, roleAcquire
	a.watch(ctx)
	return a, script, nil
}

// collectHook, when set by a test, runs in collect once the result has
// arrived, before it is looked at: the caller paused between the decision
// and its collection (a process short of CPU).
var collectHook atomic.Pointer[func()]

// finish waits for the result of a begun acquisition (begin without
// done). When ctx ends first the attempt is abandoned — unless its
// decision came first — and its error is ctx's, once its cleanup is done.
// A fencing write-back under way is not abandoned: it ends by its
// per-master timeout. The grant it returns is counted (Stats, Observer)
// as an acquisition.
func (e *Engine) finish(ctx context.Context, a *acquisition) (*Lock, error) {
	return e.collect(ctx, a, true)
}

// collect is finish; with count false (an attempt begun for a waiter that
// left, whose grant nobody is handed) a grant is not counted, nor its
// release.
func (e *Engine) collect(ctx context.Context, a *acquisition, count bool) (*Lock, error) {
	cancelled := false
	if d := ctx.Done(); d == nil { // a context that never ends: a plain receive is cheaper than select
		<-a.ch
	} else {
		select {
		case <-a.ch:
		case <-d:
			a.cancel(ctx.Err())
			cancelled = true
			<-a.ch
		}
	}
	if h := collectHook.Load(); h != nil {
		(*h)()
	}
	l, err := a.res, a.err
	ttl, votes, t1 := a.ttl, a.votes, a.t1
	if !cancelled {
		// (A cancelled one is left to the garbage collector: the acquire
		// op's decision may still be on its way to it, on the master
		// connection that made it, to find it was cancelled first; a
		// pooled acquisition reused by then would be taken for its own.)
		a.free()
	}
	var late error
	if err == nil {
		// The verdict was taken where the answers arrived; the result
		// waited for its owner since (a hand-off attempt is collected
		// when the waiter's turn comes): a lock is returned only while it
		// is valid, checked last (the grant rule's property (c)) — its
		// validity not run out, and not ended meanwhile (its watchdog's
		// extension found it lost: found beside the review of issue #46).
		if l.Remaining() == 0 {
			late = fmt.Errorf("%w: the %v grant was collected after its validity ran out", ErrGrantedTooLate, ttl)
		} else if l.life.ended.Load() { // an atomic read: Err's lock is not taken on the way out
			late = fmt.Errorf("%w: the grant ended before it was collected (%v)", ErrGrantedTooLate, l.Err())
		}
	}
	if late != nil {
		l.uncounted = true // its release is not one of a lock handed out
		if !l.callerToken {
			l.Unlock(context.WithoutCancel(ctx))
		}
		// With the caller's token the keys are left to their TTL, as a
		// cleanup this late leaves them (acquisition.cleanup): the caller
		// may have given up on this attempt, released its value and been
		// granted again with it, which a release by value would delete.
		err := &QuorumError{Op: "acquire", Granted: votes, Answered: votes, Total: e.n, Quorum: e.q, sentinel: ErrNotAcquired,
			Masters: []error{late}}
		if count {
			e.countAcquired(err, votes, t1, ttl)
		}
		return nil, err
	}
	if err == nil {
		if count {
			e.countAcquired(nil, votes, t1, ttl)
		} else {
			l.uncounted = true
		}
	}
	return l, err
}

// appendFencedSet encodes l's fenced acquisition; with a mark (the
// caller's token) it also marks the key with the attempt's nonce.
func appendFencedSet(dst []byte, l *Lock, fenceKey string, ms int64) []byte {
	if !l.marked {
		dst = scripts.FenceAcquire.AppendEvalSha(dst, 2, 2)
	} else {
		dst = scripts.FenceAcquire.AppendEvalSha(dst, 3, 3)
	}
	dst = resp.AppendBulkString(dst, l.key)
	dst = resp.AppendBulkString(dst, fenceKey)
	if l.marked {
		dst = l.appendBulkMark(dst)
	}
	dst = resp.AppendBulkString(dst, l.token)
	dst = resp.AppendBulkInt(dst, ms)
	if l.marked {
		dst = resp.AppendBulkString(dst, l.nonce())
	}
	return dst
}

// appendMarkedSet encodes l's SET NX PX with the caller's token that
// marks the key with the attempt's nonce (scripts.AcquireMarked).
func appendMarkedSet(dst []byte, l *Lock, ms int64) []byte {
	dst = scripts.AcquireMarked.AppendEvalSha(dst, 2, 3)
	dst = resp.AppendBulkString(dst, l.key)
	dst = l.appendBulkMark(dst)
	dst = resp.AppendBulkString(dst, l.token)
	dst = resp.AppendBulkInt(dst, ms)
	return resp.AppendBulkString(dst, l.nonce())
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
