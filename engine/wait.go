package engine

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/internal/enginex"
	"github.com/redlock-dev/redlock/resp"
)

// Lock acquires key for ttl, waiting while it is held, until it succeeds,
// ctx ends (ctx's error is returned; when the last try failed because too
// few masters answered, the error also wraps that try's, matching
// [ErrUnavailable]: "no quorum" is not "held until the deadline") or
// [WithMaxTries] attempts failed (the last attempt's error, matching
// [ErrNotAcquired] or [ErrUnavailable]).
//
// Waiting does not poll at fixed intervals (docs/algorithm.md,
// "Waiting"). The Lock calls of one engine on one key queue in arrival
// order, and only the longest waiter tries: a newcomer does not barge
// ahead of it. When a lock of this engine on the key is unlocked, the
// longest waiter tries at once, and its acquire follows the release on
// every master's connection. While the holder is elsewhere, the next try
// is at the moment a quorum of masters will have let the key expire (from
// PTTL), or after the retry delay when that comes first, with jitter; with
// [Config.ReleaseChannel] a release anywhere wakes the waiter at once.
// While too few masters answer, tries are spaced by the retry delay.
func (e *Engine) Lock(ctx context.Context, key string, ttl time.Duration, opts ...Option) (*Lock, error) {
	if e.obs == nil {
		return e.lock(ctx, key, ttl, opts)
	}
	start := time.Now()
	l, err := e.lock(ctx, key, ttl, opts)
	e.obs.Wait(time.Since(start), err == nil)
	return l, err
}

// errTokenPerAttempt refuses WithToken for Lock (see WithToken).
var errTokenPerAttempt = fmt.Errorf("%w: WithToken applies to TryLock (one token per attempt), not Lock", ErrBadArgument)

func (e *Engine) lock(ctx context.Context, key string, ttl time.Duration, opts []Option) (*Lock, error) {
	co := callOpts{retryDelay: e.cfg.RetryDelay, maxTries: e.cfg.MaxTries}
	if len(opts) > 0 {
		co = applyOptsTo(co, opts)
	}
	if co.retryDelay <= 0 { // WithRetryDelay(0 or negative): the default
		co.retryDelay = e.cfg.RetryDelay
	}
	if co.token != "" {
		return nil, errTokenPerAttempt
	}
	ttl, err := e.lockTTL(ttl)
	if err != nil {
		return nil, err
	}
	if key == "" {
		return nil, errEmptyKey
	}
	key = e.cfg.KeyPrefix + key
	tries := 0
	// Queue first, then try: an Unlock of this engine from now on wakes us.
	w := e.waits.join(key, ttl, co)
	defer e.waits.leave(key, w)
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	// delay is when to try next while the holder is unknown; 0 at first
	// and after a wake-up: the head tries at once.
	delay := time.Duration(0)
	var unavailable error // the last try's error, when too few masters answered it
	ended := func() error {
		if unavailable != nil {
			return fmt.Errorf("%w (the last try: %w)", ctx.Err(), unavailable)
		}
		return ctx.Err()
	}
	for {
		if e.closed.Load() {
			return nil, ErrClosed
		}
		head, holder, ready := e.waits.turn(key, w)
		var d time.Duration
		switch {
		case ready:
			d = 0 // an Unlock began our attempt
		case !head:
			d = -1 // wait to become the head
		case holder != nil:
			// The holder is a lock of this engine: its Unlock wakes us; if
			// it never comes, try once its validity ran out.
			d = max(holder.Remaining(), 0) + time.Millisecond
		default:
			d = delay
		}
		if d != 0 {
			var tc <-chan time.Time
			if d > 0 {
				if timer == nil {
					timer = time.NewTimer(d)
				} else {
					timer.Reset(d)
				}
				tc = timer.C
			}
			select {
			case <-ctx.Done():
				return nil, ended()
			case <-w.ch:
				delay = 0
				continue // re-read our turn: promoted, or the holder unlocked
			case <-tc:
			}
		}
		if e.closed.Load() {
			return nil, ErrClosed
		}
		var l *Lock
		var err error
		if a, ok := e.waits.claim(key, w); ok {
			l, err = e.finish(ctx, a)
		} else {
			l, err = e.tryLock(ctx, key, ttl, co)
		}
		tries++
		if err == nil {
			e.waits.granted(key, w, l)
			return l, nil
		}
		if ctx.Err() != nil && err == ctx.Err() {
			return nil, ended()
		}
		if !retryable(err) || (co.maxTries > 0 && tries >= co.maxTries) {
			return nil, err
		}
		released := e.waits.idle(key, w)
		if errors.Is(err, ErrUnavailable) {
			unavailable = err
			delay = co.retryDelay + mrand.N(co.retryDelay)
		} else {
			unavailable = nil
			if released {
				delay = 0 // the holder of this engine unlocked during the attempt: no PTTL to read
			} else {
				delay = e.holdLeft(ctx, key, co.retryDelay)
			}
		}
	}
}

// retryable reports whether Lock tries again after err: the key was held,
// or too few masters answered (they may be back by the next try) — not
// when too many refused the command for good (ErrMisconfigured).
func retryable(err error) bool {
	qe, ok := err.(*QuorumError)
	return ok && (qe.sentinel == ErrNotAcquired || qe.unavailable) && !errors.Is(qe, ErrMisconfigured)
}

// holdLeft returns how long to wait before the next try on key held
// elsewhere: until a quorum of masters will have let it expire (the
// quorum-th smallest PTTL; a key without TTL counts as never), capped by
// the retry delay base·[1, 2) when nothing wakes this waiter early (no
// release channel), plus up to a tenth of it in jitter, so waiters of
// several processes do not all try at the same instant.
func (e *Engine) holdLeft(ctx context.Context, key string, base time.Duration) time.Duration {
	poll := base + mrand.N(base)
	reps, err := transport{e}.Broadcast(ctx, key, 0, nil, resp.AppendCommandStrings(nil, "PTTL", key))
	if err != nil {
		return poll
	}
	left := pttlQuorum(reps, e.q)
	if left < 0 {
		return poll
	}
	left += time.Millisecond + mrand.N(left/10+time.Millisecond)
	if e.cfg.ReleaseChannel == "" {
		return min(left, poll)
	}
	return min(left, maxNotifiedWait)
}

// maxNotifiedWait bounds a wait for a release notification (a message lost
// with a subscriber connection must not stall a waiter for a whole TTL).
const maxNotifiedWait = time.Second

// pttlQuorum returns when q masters will have let the key expire, from
// their PTTL replies (-2: no key, expired already; -1: no TTL), or -1 when
// fewer than q answered with a TTL or nothing.
func pttlQuorum(reps []enginex.MasterReply, q int) time.Duration {
	var left []time.Duration
	for _, r := range reps {
		if r.Err != nil || r.Reply.IsError() {
			continue
		}
		switch ms := r.Reply.Int; {
		case ms == -2:
			left = append(left, 0)
		case ms >= 0:
			left = append(left, time.Duration(ms)*time.Millisecond)
		}
	}
	if len(left) < q {
		return -1
	}
	slices.Sort(left)
	return left[q-1]
}

// waitRoom queues the Lock calls of one engine per key.
type waitRoom struct {
	e      *Engine
	n      atomic.Int64 // waiters queued over all keys: Unlock's fast check
	shards [32]waitShard
}

type waitShard struct {
	mu   sync.Mutex
	keys map[string]*keyWait // guarded by mu
}

// keyWait is one key's queue.
type keyWait struct {
	q []*waiter // arrival order; q[0] is the head, the only one trying
	// holder is the lock on the key this engine granted to a waiter of this
	// queue, until it is unlocked: the head waits for its Unlock.
	holder *Lock
}

type waiter struct {
	ch  chan struct{} // buffered 1: "look again": promoted, or the holder unlocked
	ttl time.Duration
	co  callOpts
	// Guarded by the shard's mu: the waiter is making an attempt of its
	// own; kicked, a release of this engine came during it (the next
	// attempt follows at once); pre is an attempt an Unlock began for it
	// (pre != nil).
	trying, kicked bool
	pre            *acquisition
}

func (r *waitRoom) init(e *Engine) {
	r.e = e
	for i := range r.shards {
		r.shards[i].keys = map[string]*keyWait{}
	}
}

func (r *waitRoom) shard(key string) *waitShard {
	h := uint32(2166136261) // FNV-1a
	for i := 0; i < len(key); i++ {
		h = (h ^ uint32(key[i])) * 16777619
	}
	return &r.shards[h%uint32(len(r.shards))]
}

// join queues a new waiter for key at the tail.
func (r *waitRoom) join(key string, ttl time.Duration, co callOpts) *waiter {
	w := &waiter{ch: make(chan struct{}, 1), ttl: ttl, co: co}
	s := r.shard(key)
	s.mu.Lock()
	kw := s.keys[key]
	if kw == nil {
		kw = &keyWait{}
		s.keys[key] = kw
	}
	kw.q = append(kw.q, w)
	s.mu.Unlock()
	r.n.Add(1)
	return w
}

// turn reports whether w is the head of key's queue, the holder it waits
// for (nil: unknown, maybe another process), and whether an Unlock began
// an attempt for it.
func (r *waitRoom) turn(key string, w *waiter) (head bool, holder *Lock, ready bool) {
	s := r.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	kw := s.keys[key]
	if kw == nil || len(kw.q) == 0 || kw.q[0] != w {
		return false, nil, false
	}
	if h := kw.holder; h != nil && (h.ended() || h.Remaining() == 0) {
		kw.holder = nil // lost, expired or unlocked without a hand-off
	}
	return true, kw.holder, w.pre != nil
}

// claim marks w as trying and returns the attempt an Unlock began for it,
// if any (else w makes its own).
func (r *waitRoom) claim(key string, w *waiter) (*acquisition, bool) {
	s := r.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	w.trying = true
	a := w.pre
	w.pre = nil
	return a, a != nil
}

// idle marks w as waiting again after a failed attempt; it reports
// whether a release of this engine came during the attempt (kicked).
func (r *waitRoom) idle(key string, w *waiter) bool {
	s := r.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	kicked := w.kicked
	w.trying, w.kicked = false, false
	return kicked
}

// granted removes w, which acquired l, from key's queue: the next waiter
// becomes the head and waits for l's Unlock.
func (r *waitRoom) granted(key string, w *waiter, l *Lock) {
	s := r.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if kw := r.leaveLocked(s, key, w); kw != nil {
		kw.holder = l
	}
}

// leave removes w from key's queue (failed or cancelled) and wakes the new
// head if w was the head. An attempt an Unlock began for w meanwhile is
// completed and, if it got the key, unlocked (handing it on).
func (r *waitRoom) leave(key string, w *waiter) {
	s := r.shard(key)
	s.mu.Lock()
	a := w.pre
	w.pre = nil
	r.leaveLocked(s, key, w)
	s.mu.Unlock()
	if a != nil {
		if l, err := r.e.collect(context.Background(), a, false); err == nil {
			l.Unlock(context.Background())
		}
	}
}

// leaveLocked removes w and returns the queue, or nil when it is now empty
// (and dropped: nobody is left to hand the key to).
func (r *waitRoom) leaveLocked(s *waitShard, key string, w *waiter) *keyWait {
	kw := s.keys[key]
	if kw == nil {
		return nil
	}
	if i := slices.Index(kw.q, w); i >= 0 {
		kw.q = slices.Delete(kw.q, i, i+1)
		r.n.Add(-1)
		if i == 0 && len(kw.q) > 0 {
			wake(kw.q[0])
		}
	}
	if len(kw.q) == 0 {
		delete(s.keys, key)
		return nil
	}
	return kw
}

// released sends the release op rel of l (by deadline, as script) for
// Unlock when Lock calls of this engine wait: the head of l's key tries
// now. When nothing else holds the key for this engine and the head is
// not trying already, its acquire goes with the release: as one script per
// master (sendHandOff) when both are plain, else right behind the release
// on every master's connection (most often in the same write) — either
// way without waiting for the head to be scheduled. A head in the middle
// of an attempt of its own (begun before this release: it finds the key
// held) tries again as soon as that attempt fails, without reading PTTL
// first (kicked). Nothing is sent under the shard's lock (a release
// decided at once, every master down, may run UnlockAsync's callback).
func (r *waitRoom) released(l *Lock, rel *op, deadline time.Time, script *conn.Script) {
	var (
		h      *waiter // the head to wake
		pre    *acquisition
		pscr   *conn.Script
		oneRTT bool
	)
	s := r.shard(l.key)
	s.mu.Lock()
	if kw := s.keys[l.key]; kw != nil {
		if kw.holder == l {
			kw.holder = nil
		}
		if kw.holder == nil {
			h = kw.q[0]
			h.kicked = h.trying
			if !h.trying && h.pre == nil {
				if a, sc, err := r.e.prepare(context.Background(), l.key, h.ttl, h.co, nil); err == nil {
					h.pre, pre, pscr = a, a, sc
					oneRTT = canHandOff(l, rel, h.co)
				}
			}
		}
	}
	s.mu.Unlock()
	if oneRTT {
		r.e.sendHandOff(l, rel, deadline, pre)
	} else {
		rel.fanout(deadline, script)
		if pre != nil {
			pre.send(pscr)
		}
	}
	if h != nil {
		wake(h)
	}
}

// notified wakes the head of key's queue after a release elsewhere (the
// release channel), unless it waits for a holder of this engine.
func (r *waitRoom) notified(key string) {
	if r.n.Load() == 0 {
		return
	}
	s := r.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if kw := s.keys[key]; kw != nil && len(kw.q) > 0 && kw.holder == nil {
		wake(kw.q[0])
	}
}

// close wakes every waiter (they find the engine closed).
func (r *waitRoom) close() {
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.Lock()
		for _, kw := range s.keys {
			for _, w := range kw.q {
				wake(w)
			}
		}
		s.mu.Unlock()
	}
}

func wake(w *waiter) {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// retryTries is the wait of the kinds that poll (Semaphore.Acquire,
// RWLock's RLock and Lock): it calls try until it succeeds, fails with an
// error retry does not accept or one matching ErrMisconfigured, co.maxTries tries failed (that try's
// error) or ctx ends (ctx's error, wrapping the last try's), waiting
// co.retryDelay·[1, 2) between tries (Config.RetryDelay when not set). It
// returns the tries made.
func (e *Engine) retryTries(ctx context.Context, co callOpts, retry func(error) bool, try func() (*Lock, error)) (*Lock, int, error) {
	if co.retryDelay <= 0 {
		co.retryDelay = e.cfg.RetryDelay
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	var last error
	for tries := 1; ; tries++ {
		l, err := try()
		if err == nil {
			return l, tries, nil
		}
		if cerr := ctx.Err(); cerr != nil && errors.Is(err, cerr) && last != nil && !errors.Is(err, ErrUnavailable) && !errors.Is(err, ErrNotAcquired) {
			// ctx ended inside a try that had nothing to tell yet: the
			// previous try says why the wait failed.
			return nil, tries, fmt.Errorf("%w (the last try: %w)", cerr, last)
		}
		if !retry(err) || errors.Is(err, ErrMisconfigured) || co.maxTries > 0 && tries >= co.maxTries {
			return nil, tries, err
		}
		last = err
		d := co.retryDelay + mrand.N(co.retryDelay)
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-ctx.Done():
			return nil, tries, fmt.Errorf("%w (the last try: %w)", ctx.Err(), err)
		case <-e.closing: // not a try's delay later (Semaphore.Acquire, RWLock's waits)
			return nil, tries, fmt.Errorf("%w (the last try: %w)", ErrClosed, err)
		case <-timer.C:
		}
	}
}
