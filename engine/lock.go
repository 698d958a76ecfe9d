package engine

import (
	"context"
	"sync/atomic"
	"time"
)

// Lock is an acquired lock. Its methods are safe for concurrent use.
type Lock struct {
	e          *Engine
	key        string
	token      string
	ttl        time.Duration
	cix        uint32 // connection index on every master (see Engine.nextConn)
	first      int    // master every fan-out starts with (see Engine.firstMaster)
	tokenBuf   [TokenLen]byte
	until      atomic.Int64 // validity deadline, ns since e.epoch (monotonic)
	extensions atomic.Int64
	unlocked   atomic.Bool
}

// Key returns the locked key.
func (l *Lock) Key() string { return l.key }

// Token returns the lock's token: the value stored on the masters.
func (l *Lock) Token() string { return l.token }

// Until returns the instant the lock's validity ends (with a monotonic
// clock reading): ttl minus drift after the acquisition (or last
// extension) started.
func (l *Lock) Until() time.Time { return l.e.epoch.Add(time.Duration(l.until.Load())) }

// TTL returns the validity left, or 0 once it ran out.
func (l *Lock) TTL() time.Duration {
	return max(0, time.Duration(l.until.Load())-time.Since(l.e.epoch))
}

// Valid reports whether the validity has not run out and the lock was not
// unlocked. It says nothing the masters did not say at acquisition: a
// master restart without persistence can still lose the lock.
func (l *Lock) Valid() bool { return !l.unlocked.Load() && l.TTL() > 0 }

// Unlock releases the lock on every master with a compare-and-delete. It
// returns nil when a quorum released it, an error matching [ErrLockLost]
// when fewer still held it (expired, taken over, or already unlocked), or
// ctx's error. Cancelling ctx stops the wait, not the release on the wire.
func (l *Lock) Unlock(ctx context.Context) error {
	if !l.unlocked.CompareAndSwap(false, true) {
		return errUnlocked
	}
	e := l.e
	if e.closed.Load() {
		return ErrClosed
	}
	o := e.getOp(opRelease, false, l.cix, l.first)
	o.cmd = appendRelease(o.cmd[:0], l.key, l.token)
	o.fanout(time.Now().Add(e.cfg.masterTimeout(l.ttl)), ReleaseScript)
	if err := ctx.Err(); err != nil {
		// Cancelled before the call: the release is on the wire anyway
		// (a cancelled caller still cleans up); report the cancellation.
		o.unref()
		return err
	}
	if err := o.wait(ctx); err != nil {
		o.unref()
		return err
	}
	if o.granted() >= e.q {
		o.unref()
		e.released.Add(1)
		return nil
	}
	err := o.quorumError(ErrLockLost, nil)
	o.unref()
	e.lost.Add(1)
	return err
}

// Extend resets the lock's TTL to ttl on every master that still holds the
// token. It succeeds only when a quorum did so within the new validity;
// then Until moves to ttl minus drift after the call started. Otherwise it
// returns an error matching [ErrLockLost] (the lock's validity is left as
// it was), [ErrTooManyExtensions], or ctx's error.
func (l *Lock) Extend(ctx context.Context, ttl time.Duration) error {
	ms, err := ttlMillis(ttl)
	if err != nil {
		return err
	}
	if l.unlocked.Load() {
		return errUnlocked
	}
	e := l.e
	if e.closed.Load() {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if l.extensions.Add(1) > int64(e.cfg.MaxExtensions) {
		return ErrTooManyExtensions
	}
	o := e.getOp(opExtend, false, l.cix, l.first)
	o.cmd = appendExtend(o.cmd[:0], l.key, l.token, ms)
	t1 := time.Now()
	o.fanout(t1.Add(e.cfg.masterTimeout(ttl)), ExtendScript)
	if err := o.wait(ctx); err != nil {
		o.unref()
		return err
	}
	drift := e.cfg.drift(ttl)
	validity := ttl - time.Since(t1) - drift
	if o.granted() >= e.q && validity > 0 {
		o.unref()
		l.until.Store(int64(t1.Sub(e.epoch) + ttl - drift))
		e.extended.Add(1)
		return nil
	}
	var extra error
	if o.granted() >= e.q {
		extra = ErrValidityExpired
	}
	err = o.quorumError(ErrLockLost, extra)
	o.unref()
	e.extendFailed.Add(1)
	return err
}
