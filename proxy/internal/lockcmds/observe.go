package lockcmds

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/redlock-dev/redlock/engine"
)

// lockCounts counts the lock events the proxy reports to the engine's
// Observer itself, exactly as it reports them: library scripts run as
// broadcasts (acquisitions, extensions), every release of a client's lock
// (the engine counts no attached lock's Unlock), and the locks lost to a
// failed client extension. INFO adds them to the engine's own counters
// ([engine.Stats]), so that each INFO lock counter and its /metrics series
// count the same events (docs/operations.md, Monitoring).
type lockCounts struct {
	acquired, taken, noQuorum atomic.Uint64
	extended, extendFailed    atomic.Uint64
	releases                  [4]atomic.Uint64 // by engine.ReleaseResult
	locksLost                 atomic.Uint64
}

// observeAcquire reports a library acquisition sent at t1 for ttl that
// ended with err (nil: acquired; ErrNotAcquired: taken; ErrUnavailable: no
// quorum; a context error), margin grants − quorum; and remembers a
// refusal of key with token, or forgets it at a grant (refusals).
func (h *Commands) observeAcquire(key, token []byte, t1 time.Time, ttl time.Duration, err error, margin int) {
	if err == nil {
		h.refused.granted(key, token)
	} else {
		h.refused.refused(key, token)
	}
	ev := engine.AcquireEvent{Result: engine.AcquireTaken, Latency: time.Since(t1), Margin: margin, TTL: ttl}
	switch {
	case err == nil:
		ev.Result, ev.ValidityLeft = engine.AcquireGranted, ttl-ev.Latency-h.drift(ttl)
		h.locks.acquired.Add(1)
	case errors.Is(err, context.DeadlineExceeded):
		ev.Result = engine.AcquireTimeout
	case errors.Is(err, context.Canceled), errors.Is(err, engine.ErrClosed):
		ev.Result = engine.AcquireCancelled
	case errors.Is(err, engine.ErrUnavailable):
		ev.Result = engine.AcquireNoQuorum
		h.locks.noQuorum.Add(1)
	default:
		h.locks.taken.Add(1)
	}
	if h.obs != nil {
		h.obs.Acquire(ev)
	}
}

// observeExtend reports a library extension of key with token run as a
// broadcast: ok, or failed with err. A failed extension whose err matches
// ErrLockLost (a quorum answered no, or too few answered) ends the
// client's lock, as it ends an engine lock (Observer.Lost).
func (h *Commands) observeExtend(key, token []byte, err error) {
	if err == nil {
		h.refused.granted(key, token)
		h.locks.extended.Add(1)
	} else {
		h.locks.extendFailed.Add(1)
	}
	if h.obs != nil {
		h.obs.Extend(err == nil, false)
	}
	if errors.Is(err, engine.ErrLockLost) {
		h.lockLost(err)
	}
}

// lockLost reports a client's lock ended by a failed extension.
func (h *Commands) lockLost(err error) {
	h.locks.locksLost.Add(1)
	if h.obs != nil {
		h.obs.Lost(err)
	}
}

// observeRelease reports a client's release of key with token that ended
// with err: nil when a quorum deleted it; matching ErrUnavailable when too
// few masters answered; matching ErrLockLost when a quorum answered and
// fewer held it — a cleanup when this proxy refused that key and token, or
// released them, lately and has not granted them since (refusals: a
// client's second release of a value is not a lost lock), else a lost
// lock.
// Any other error (the client or the proxy went away) decided nothing and
// is not counted, as the engine counts its own Unlock.
func (h *Commands) observeRelease(key, token []byte, err error) {
	var r engine.ReleaseResult
	switch {
	case err == nil:
		r = engine.ReleaseReleased
		h.refused.refused(key, token) // released: a repeat is no loss
	case errors.Is(err, engine.ErrUnavailable):
		r = engine.ReleaseUnavailable
	case !errors.Is(err, engine.ErrLockLost):
		return
	case h.refused.remembered(key, token):
		r = engine.ReleaseCleanup
	default:
		r = engine.ReleaseLost
	}
	h.locks.releases[r].Add(1)
	if h.obs != nil {
		h.obs.Release(r)
	}
}
