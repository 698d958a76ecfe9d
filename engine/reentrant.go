package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Reentrant is a lock on one key that its holder may take again while
// holding it: each Lock or TryLock while held adds one to the hold count,
// each Unlock takes one away, and the key is released on the masters when
// the count reaches zero.
//
// The Reentrant value is the owner: share it between the goroutines that
// act as one holder. Each acquisition from zero is a plain lock's (a
// quorum of SET NX PX, the same validity, cleanup, restart quarantine,
// [WithAutoExtend] and [WithFencing]); its token is the owner label, a
// colon, and a random part (no colon), so [Engine.Holder] shows the owner
// (the token up to its last colon) and every attempt's token is unique
// (see [WithToken]). A re-acquisition costs one
// script per master: where the key still holds the hold's token, its TTL
// is raised to the new ttl if that is longer — never lowered — and it
// succeeds when a quorum did so within the new validity. A failed
// re-acquisition leaves the count and the deadline as they were, except
// when a quorum answered that the key no longer holds the token: the hold
// was lost, and it ends (Done closes, Err says why).
//
// A hold that ended — lost, or its validity ran out — keeps its frames
// counted: each Unlock counts one down and returns the loss (matching
// [ErrLockLost], or [ErrClosed]), and a Lock or TryLock returns the loss,
// uncounted, until the last frame is unlocked; the next one after that
// is an acquisition from zero. The last frame's Unlock gives the hold up
// even when its release gets no quorum (retry that with the hold's own
// Lock.Unlock): so long as each frame calls Unlock once, a frame's Unlock
// never counts down or releases a later hold.
//
// Its methods are safe for concurrent use.
type Reentrant struct {
	e     *Engine
	key   string
	owner string

	// turn admits one acquisition or release at a time (a channel: a
	// wait for it ends with its ctx). The network waits happen under it,
	// not under mu, so that Count, Held, Done, Err and Context answer
	// while another goroutine's Lock waits for the key (they blocked for
	// that whole wait: found by the review of issue #46).
	turn chan struct{}

	mu    sync.Mutex
	l     *Lock // the hold; nil at count 0 (guarded by mu, changed in a turn)
	count int   // guarded by mu, changed in a turn
}

// errOwner refuses an owner label that would make tokens too long.
var errOwner = fmt.Errorf("%w: owner longer than 256 bytes", ErrBadArgument)

// NewReentrant returns a reentrant lock on key, not held, owned by owner (a
// label shown in its tokens; "" for none). It does not contact the masters.
func (e *Engine) NewReentrant(key, owner string) (*Reentrant, error) {
	if key == "" {
		return nil, errEmptyKey
	}
	if len(owner) > 256 {
		return nil, errOwner
	}
	return &Reentrant{e: e, key: key, owner: owner, turn: make(chan struct{}, 1)}, nil
}

// Key returns the key, as passed to NewReentrant.
func (r *Reentrant) Key() string { return r.key }

// Count returns the hold count: 0 when not held.
func (r *Reentrant) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count
}

// Lock acquires the key, waiting while another holder has it, as
// [Engine.Lock] does; when r holds it already, it re-acquires it for ttl
// (one try, no waiting: options are ignored) and adds one to the count.
func (r *Reentrant) Lock(ctx context.Context, ttl time.Duration, opts ...Option) error {
	return r.acquire(ctx, ttl, opts, true)
}

// TryLock is Lock with one try when the key is not held by r, as
// [Engine.TryLock]: an error matching [ErrNotAcquired] when it is held
// elsewhere.
func (r *Reentrant) TryLock(ctx context.Context, ttl time.Duration, opts ...Option) error {
	return r.acquire(ctx, ttl, opts, false)
}

// takeTurn waits for r's turn, or until ctx ends; the caller gives it
// back with <-r.turn.
func (r *Reentrant) takeTurn(ctx context.Context) error {
	select {
	case r.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *Reentrant) acquire(ctx context.Context, ttl time.Duration, opts []Option, wait bool) error {
	if err := r.takeTurn(ctx); err != nil {
		return err
	}
	defer func() { <-r.turn }()
	r.mu.Lock()
	if r.l != nil {
		if err := r.l.Err(); err != nil {
			// The hold ended (lost, or its validity ran out) with frames
			// open (r.l is set only while count > 0): a re-entry would be
			// into a lost hold, and an acquisition from zero would be
			// counted down, or released, by an old frame's Unlock (found
			// by the review of issue #46). The open frames unlock first,
			// each told of the loss.
			r.mu.Unlock()
			return err
		}
	}
	held := r.l
	r.mu.Unlock()
	if held != nil {
		if err := r.reenter(ctx, held, ttl); err != nil {
			return err
		}
		r.mu.Lock()
		r.count++
		r.mu.Unlock()
		return nil
	}
	opts = append(opts[:len(opts):len(opts)], Option{kind: optTokenPrefix, s: r.owner + ":"})
	if len(opts) > 1 {
		if co := applyOpts(opts); co.token != "" {
			return fmt.Errorf("%w: a Reentrant's token is its owner's (WithToken does not apply)", ErrBadArgument)
		}
	}
	var l *Lock
	var err error
	if wait {
		l, err = r.e.Lock(ctx, r.key, ttl, opts...)
	} else {
		l, err = r.e.TryLock(ctx, r.key, ttl, opts...)
	}
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.l, r.count = l, 1
	r.mu.Unlock()
	return nil
}

// reenter re-acquires the hold l (in r's turn); the caller counts it.
func (r *Reentrant) reenter(ctx context.Context, l *Lock, ttl time.Duration) error {
	e := r.e
	ttl, err := e.lockTTL(ttl)
	if err != nil {
		return err
	}
	if e.closed.Load() {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	o := l.sendReenter(ttl, ttl.Milliseconds())
	if err := o.wait(ctx); err != nil {
		o.unref()
		return err
	}
	return l.extendDone(o)
}

// Unlock takes one from the hold count and, when it reaches zero, releases
// the key as [Lock.Unlock] does (its errors are Unlock's). The last frame
// gives the hold up whatever the release's outcome: the count is zero and
// r holds nothing; a release without a quorum is retried with the hold's
// own [Lock.Unlock] (keep [Reentrant.Held] from before the last Unlock),
// not with r.Unlock, which would count down a later hold's frame. Every
// frame's Unlock — nested or last — returns nil only while the hold is
// valid, and the hold's loss (matching [ErrLockLost]) once it ended,
// even when a quorum still released the key. It returns an error
// matching [ErrUnlocked] when r does not hold the key.
func (r *Reentrant) Unlock(ctx context.Context) error {
	r.mu.Lock()
	none := r.l == nil
	r.mu.Unlock()
	if none { // not held now: no need to wait for an acquisition under way
		return errUnlocked
	}
	if err := r.takeTurn(ctx); err != nil {
		return err
	}
	defer func() { <-r.turn }()
	r.mu.Lock()
	if r.count > 1 {
		r.count--
		l := r.l
		r.mu.Unlock()
		// A nested frame's work is reported as the hold's: nil only while
		// the hold is valid (the grant rule's property (h)), from the clock.
		return l.Err()
	}
	l := r.l
	if l == nil {
		r.mu.Unlock()
		return errUnlocked
	}
	// The last frame gives the hold up, whatever the release finds: a
	// retry through r would be taken for a later hold's frame (the review
	// of issue #46: a retried Unlock released a hold taken from zero after
	// the first try). The hold's own Unlock retries it.
	r.l, r.count = nil, 0
	r.mu.Unlock()
	lost := l.Err() // before the release: the masters keep the key a little past its validity
	err := l.Unlock(ctx)
	if errors.Is(lost, ErrLockLost) && !errors.Is(err, ErrLockLost) {
		// The work of the last frame ran past the hold's validity: the
		// loss, though a quorum still released the key (property (h)).
		if err == nil {
			err = lost
		} else {
			err = errors.Join(lost, err)
		}
	}
	return err
}

// Held returns the current hold — for its Done, Err, Context, Remaining,
// Valid, Token and FencingToken —, or nil when r does not hold the key.
// Unlock the hold with r.Unlock, not with the Lock's own Unlock, which
// would release it whatever the count.
func (r *Reentrant) Held() *Lock {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.count == 0 {
		return nil
	}
	return r.l
}

// Done returns the current hold's [Lock.Done], or a closed channel when r
// does not hold the key.
func (r *Reentrant) Done() <-chan struct{} {
	if l := r.Held(); l != nil {
		return l.Done()
	}
	return closedChan
}

// Err returns the current hold's [Lock.Err], or [ErrUnlocked] when r does
// not hold the key.
func (r *Reentrant) Err() error {
	if l := r.Held(); l != nil {
		return l.Err()
	}
	return ErrUnlocked
}

// Context returns the current hold's [Lock.Context]; when r does not hold
// the key, a copy of parent already cancelled with [ErrUnlocked].
func (r *Reentrant) Context(parent context.Context) (context.Context, context.CancelFunc) {
	if l := r.Held(); l != nil {
		return l.Context(parent)
	}
	ctx, cancel := context.WithCancelCause(parent)
	cancel(ErrUnlocked)
	return ctx, func() {}
}
