package engine

import (
	"context"
	"errors"
	"time"
)

// doUnlockTimeout bounds Do's release after fn returned.
const doUnlockTimeout = 5 * time.Second

// Do runs fn while holding key: it waits for the lock as [Engine.Lock]
// does (ctx bounds the wait; opts as there), keeps it with the watchdog
// ([WithAutoExtend], no bound unless opts give one), runs fn, and
// releases the lock when fn returns — node-redlock's using(), a mutex
// around a function.
//
// fn's context is cancelled when the lock is lost (an extension failed,
// the validity ran out), with the loss as its cause ([context.Cause]
// matches [ErrLockLost]), and when ctx ends: work that must stop when the
// lock ends watches it. [LockFrom] gives fn the lock (its fencing token
// with [WithFencing], its validity).
//
// Do returns the wait's error when the lock was not taken; otherwise,
// when the lock's validity had ended by the time Do returns — read from
// the clock when fn returned and again after the release, not from the
// watchdog having noticed — the loss (matching [ErrLockLost]), joined
// with fn's error when fn failed too: the work may have run without
// mutual exclusion;
// otherwise fn's error, or nil. A release that fails after fn is not an
// error: the lock then expires by its TTL. When fn panics, the lock is
// released and the panic goes on up the caller's stack.
func (e *Engine) Do(ctx context.Context, key string, ttl time.Duration, fn func(ctx context.Context) error, opts ...Option) error {
	if fn == nil {
		return errNilFn
	}
	l, err := e.Lock(ctx, key, ttl, append([]Option{WithAutoExtend(0)}, opts...)...)
	if err != nil {
		return err
	}
	fctx, cancel := l.Context(context.WithValue(ctx, lockKey{}, l))
	release := func() {
		cancel()
		uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), doUnlockTimeout)
		_ = l.Unlock(uctx)
		ucancel()
	}
	released := false
	defer func() {
		if !released { // fn panicked: release, and the panic goes on
			release()
		}
	}()
	ferr := fn(fctx)
	lost, until := l.Err(), l.Until()
	released = true
	release()
	return outcome(ferr, lostBy(lost, until))
}

// lostBy is the loss Do and Lead report: lost (Lock.Err when fn
// returned), or — the release after fn can wait on masters — the validity
// ending at until before they return. A lock that ended without a loss
// (ErrClosed: the engine closed under fn) whose validity ran out too
// reports both: the loss must match ErrLockLost (found by the review of
// issue #46).
func lostBy(lost error, until time.Time) error {
	switch {
	case time.Now().Before(until) || errors.Is(lost, ErrLockLost):
		return lost
	case lost == nil:
		return errValidityEnded
	default:
		return errors.Join(errValidityEnded, lost)
	}
}

// outcome is what Do and Lead return for fn's error ferr and the lock's
// state lost (Lock.Err, read when fn returned): the loss wins, so that a
// caller who checks only for ErrLockLost never mistakes work done after
// the validity ended for work done under the lock.
func outcome(ferr, lost error) error {
	switch {
	case lost == nil:
		return ferr
	case ferr == nil:
		return lost
	default:
		return errors.Join(lost, ferr)
	}
}

// lockKey is the context key of the Lock that Do holds.
type lockKey struct{}

// LockFrom returns the Lock that [Engine.Do] holds for the fn it called
// with ctx, or nil.
func LockFrom(ctx context.Context) *Lock {
	l, _ := ctx.Value(lockKey{}).(*Lock)
	return l
}
