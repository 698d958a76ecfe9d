package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Lock is an acquired lock. Its methods are safe for concurrent use.
type Lock struct {
	e          *Engine
	key        string
	token      string
	ttl        time.Duration
	fence      int64  // fencing token (WithFencing), 0 without
	cix        uint32 // connection index on every master (see Engine.nextConn)
	first      int    // master every fan-out starts with (see Engine.firstMaster)
	tokenBuf   [TokenLen]byte
	until      atomic.Int64 // validity deadline, ns since e.epoch (monotonic)
	extensions atomic.Int64
	unlocked   atomic.Bool // Unlock was called: not Valid, no Extend

	relMu sync.Mutex // serialises Unlock calls
	// Guarded by relMu: per master, what its release answered (0 unknown:
	// not answered, timed out, failed; 1 deleted; -1 did not hold it), nil
	// before the first Unlock; released: a quorum confirmed the release.
	relState []int8
	released bool
	relBuf   [8]int8 // relState's storage for up to 8 masters
}

// Key returns the locked key.
func (l *Lock) Key() string { return l.key }

// Token returns the lock's token: the value stored on the masters.
func (l *Lock) Token() string { return l.token }

// FencingToken returns the lock's fencing token, or 0 when it was acquired
// without [WithFencing]. Tokens of one key strictly increase from holder to
// holder: give it to the storage the lock protects, which must reject a
// write with a token lower than the highest it has accepted.
func (l *Lock) FencingToken() int64 { return l.fence }

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
// when fewer did (expired, taken over, or — also matching
// [ErrUnavailable] — too few masters answered), or ctx's error. Cancelling
// ctx stops the wait, not the release on the wire.
//
// An Unlock that did not get a quorum can be called again: it sends the
// release only to the masters that have not answered yet (timed out, down,
// or not reached before ctx ended) and reports the quorum over every answer
// so far. On such a retry a master that no longer holds the token counts
// as released: the earlier release may have reached it after the earlier
// call returned (so a retry cannot tell "lost before Unlock" from
// "released late"; the first call can). After a successful Unlock, Unlock
// returns an error matching ErrLockLost ("already unlocked").
func (l *Lock) Unlock(ctx context.Context) error {
	l.relMu.Lock()
	defer l.relMu.Unlock()
	if l.released {
		return errUnlocked
	}
	l.unlocked.Store(true)
	e := l.e
	if e.closed.Load() {
		return ErrClosed
	}
	retry := l.relState != nil
	if !retry {
		l.relState = l.relBuf[:0]
		l.relState = append(l.relState, make([]int8, e.n)...) // no allocation for n ≤ 8
	}
	o := e.getOp(opRelease, false, l.cix, l.first)
	o.retry = retry
	copy(o.preset, l.relState)
	o.cmd = appendRelease(o.cmd[:0], l.key, l.token)
	o.fanout(time.Now().Add(e.cfg.masterTimeout(l.ttl)), ReleaseScript)
	defer o.unref()
	err := ctx.Err() // cancelled before the call: the release is on the wire anyway
	if err == nil {
		err = o.wait(ctx)
	}
	l.absorb(o)
	if err != nil {
		return err
	}
	if o.granted() >= e.q {
		l.released = true
		e.released.Add(1)
		return nil
	}
	e.lost.Add(1)
	return o.quorumError(ErrLockLost, nil)
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

// lowerUntil moves the validity deadline to d if that is earlier.
func (l *Lock) lowerUntil(d int64) {
	for {
		cur := l.until.Load()
		if d >= cur || l.until.CompareAndSwap(cur, d) {
			return
		}
	}
}

// Extend resets the lock's TTL to ttl on every master that still holds the
// token. It succeeds only when a quorum did so within the new validity;
// then Until moves to ttl minus drift after the call started. Otherwise it
// returns an error matching [ErrLockLost], [ErrTooManyExtensions], or ctx's
// error; after a failed or cancelled Extend that reached the masters, Until
// is the earlier of the old deadline and ttl minus drift after the call
// started (some masters may hold the new, shorter TTL).
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
	e.issued(ttl)
	o := e.getOp(opExtend, false, l.cix, l.first)
	o.cmd = appendExtend(o.cmd[:0], l.key, l.token, ms)
	t1 := time.Now()
	o.fanout(t1.Add(e.cfg.masterTimeout(ttl)), ExtendScript)
	drift := e.cfg.drift(ttl)
	newUntil := int64(t1.Sub(e.epoch) + ttl - drift)
	if err := o.wait(ctx); err != nil {
		// Some masters may have applied the new TTL: never count on more
		// than both the old deadline and the new one allow.
		l.lowerUntil(newUntil)
		o.unref()
		return err
	}
	validity := ttl - time.Since(t1) - drift
	if o.granted() >= e.q && validity > 0 {
		o.unref()
		l.until.Store(newUntil)
		e.extended.Add(1)
		return nil
	}
	l.lowerUntil(newUntil)
	var extra error
	if o.granted() >= e.q {
		extra = ErrValidityExpired
	}
	err = o.quorumError(ErrLockLost, extra)
	o.unref()
	e.extendFailed.Add(1)
	return err
}
