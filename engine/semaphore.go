package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"time"
)

// MaxPermits bounds a Semaphore's permits.
const MaxPermits = 1024

// Semaphore hands out up to a fixed number of permits on a key at once.
// Each permit is a plain lock on one of the keys key + ":permit:0" …
// ":permit:<permits-1>", so everything a [Lock] guarantees holds for each
// permit: a quorum of masters, the same validity, cleanup, restart
// quarantine, [WithAutoExtend], [WithFencing], Done/Err/Context. Two
// holders never have the same permit at once, so no more than permits
// holders are valid at any instant; a crashed holder's permit comes back
// when its TTL ends, and an unlocked one at once. Counting holders per
// master instead (a sorted set per master) would not be safe: with five
// masters and two permits, three holders can each win a different
// majority without any master seeing more than two (docs/safety.md).
//
// Every holder of the key must use the same number of permits. A try
// starts at a random permit and tries them in turn until one is granted:
// one round per permit tried, so under contention a try costs up to
// permits rounds.
type Semaphore struct {
	e       *Engine
	key     string
	permits int
}

// NewSemaphore returns a semaphore of permits (1 to [MaxPermits]) on key.
// It does not contact the masters.
func (e *Engine) NewSemaphore(key string, permits int) (*Semaphore, error) {
	if key == "" {
		return nil, errEmptyKey
	}
	if permits < 1 || permits > MaxPermits {
		return nil, fmt.Errorf("%w: permits %d not in [1, %d]", ErrBadArgument, permits, MaxPermits)
	}
	return &Semaphore{e: e, key: key, permits: permits}, nil
}

// Permits returns the number of permits.
func (s *Semaphore) Permits() int { return s.permits }

// PermitKey returns the key of permit i (without [Config.KeyPrefix]): the
// key its Lock holds ([Lock.Key]) and [Engine.Holder] reads.
func (s *Semaphore) PermitKey(i int) string { return s.key + ":permit:" + strconv.Itoa(i) }

// TryAcquire makes one try for a permit: the permit's Lock, or an error
// matching [ErrNotAcquired] when every permit is held, [ErrUnavailable]
// when none was granted and too few masters answered for some permit to
// tell, ctx's error, [ErrBadArgument] or [ErrClosed]. Options are
// TryLock's.
func (s *Semaphore) TryAcquire(ctx context.Context, ttl time.Duration, opts ...Option) (*Lock, error) {
	co := applyOpts(opts)
	if co.waitOnly != "" {
		return nil, fmt.Errorf("%w: %s applies to Acquire, not TryAcquire", ErrBadArgument, co.waitOnly)
	}
	return s.try(ctx, ttl, co)
}

func (s *Semaphore) try(ctx context.Context, ttl time.Duration, co callOpts) (*Lock, error) {
	if co.token != "" {
		return nil, fmt.Errorf("%w: WithToken does not apply to a semaphore (one token per permit try)", ErrBadArgument)
	}
	start := mrand.IntN(s.permits)
	var unavailable, held error
	for j := range s.permits {
		i := (start + j) % s.permits
		l, err := s.e.tryLock(ctx, s.e.cfg.KeyPrefix+s.PermitKey(i), ttl, co)
		if err == nil {
			return l, nil
		}
		switch {
		case errors.Is(err, ErrMisconfigured):
			return nil, err // every permit would be refused alike
		case errors.Is(err, ErrUnavailable):
			unavailable = err
		case errors.Is(err, ErrNotAcquired):
			held = err
		default:
			// ctx, closed, bad argument. ctx ending in the middle of a
			// try keeps what the permits tried so far said: unavailable is
			// not "held", nor only the caller's deadline.
			if cerr := ctx.Err(); cerr != nil && errors.Is(err, cerr) {
				if last := cmp.Or(unavailable, held); last != nil {
					return nil, fmt.Errorf("%w (the last try: %w)", cerr, last)
				}
			}
			return nil, err
		}
	}
	if unavailable != nil {
		return nil, fmt.Errorf("no permit of %d granted, some unknown: %w", s.permits, unavailable)
	}
	return nil, fmt.Errorf("all %d permits held (the last try: %w)", s.permits, held)
}

// Acquire waits for a permit: it tries every permit, and while all are
// held or too few masters answer, tries again after the retry delay
// (Config.RetryDelay or [WithRetryDelay], with jitter), until a permit is
// granted, ctx ends (ctx's error) or [WithMaxTries] tries — each over
// every permit — failed (the last try's error).
func (s *Semaphore) Acquire(ctx context.Context, ttl time.Duration, opts ...Option) (*Lock, error) {
	co := applyOptsTo(callOpts{retryDelay: s.e.cfg.RetryDelay, maxTries: s.e.cfg.MaxTries}, opts)
	l, _, err := s.e.retryTries(ctx, co, func(err error) bool { return errors.Is(err, ErrNotAcquired) || errors.Is(err, ErrUnavailable) },
		func() (*Lock, error) { return s.try(ctx, ttl, co) })
	return l, err
}
