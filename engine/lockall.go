package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// LockSet is a set of locks acquired together by [Engine.LockAll] or
// [Engine.TryLockAll]: one plain [Lock] per key, all held at once. Its
// methods are safe for concurrent use.
type LockSet struct {
	locks []*Lock // in key order

	once sync.Once
	done chan struct{}
	mu   sync.Mutex
	err  error // the first lock's end
}

// MaxLockAllKeys bounds the keys of one LockAll.
const MaxLockAllKeys = 1024

// lockAllKeys sorts and deduplicates keys (a copy).
func lockAllKeys(keys []string) ([]string, error) {
	if len(keys) == 0 || len(keys) > MaxLockAllKeys {
		return nil, fmt.Errorf("%w: %d keys (1 to %d)", ErrBadArgument, len(keys), MaxLockAllKeys)
	}
	ks := slices.Clone(keys)
	slices.Sort(ks)
	ks = slices.Compact(ks)
	if ks[0] == "" {
		return nil, errEmptyKey
	}
	return ks, nil
}

// TryLockAll makes one try for every key, in sorted order (duplicates
// count once), and returns them all or none: on the first key that is not
// granted it releases the keys it took, in reverse order, and returns that
// key's error (as [Engine.TryLock]'s, naming the key). It returns a set
// only if every lock in it is still valid once the last key is taken;
// otherwise it releases them all and returns an error matching
// [ErrNotAcquired] and [ErrExpired] or [ErrGrantedTooLate] (the TTL was
// too short for taking that many keys). Options apply to every key's lock.
func (e *Engine) TryLockAll(ctx context.Context, keys []string, ttl time.Duration, opts ...Option) (*LockSet, error) {
	ks, err := lockAllKeys(keys)
	if err != nil {
		return nil, err
	}
	return e.lockAll(ctx, ks, func(ctx context.Context, key string) (*Lock, error) {
		return e.TryLock(ctx, key, ttl, opts...)
	})
}

// LockAll acquires every key, in sorted order (duplicates count once),
// waiting for each as [Engine.Lock] does. Two callers whose sets overlap
// take the shared keys in the same order, so neither can hold one the
// other waits for while waiting for one the other holds: no deadlock. If a
// lock it already holds ends while it waits for a later key (its validity
// ran out — take long waits with [WithAutoExtend] — or it was lost), it
// releases what it holds and starts again. On an error (ctx's, wrapping
// the last try's like Lock's, [WithMaxTries] exhausted on one key, or, as
// for TryLockAll, a set whose first lock's validity ran out as the last
// key was taken) it releases every key it took before returning. Options apply to every
// key's lock.
func (e *Engine) LockAll(ctx context.Context, keys []string, ttl time.Duration, opts ...Option) (*LockSet, error) {
	ks, err := lockAllKeys(keys)
	if err != nil {
		return nil, err
	}
	for {
		var held []*Lock
		var cancels []context.CancelFunc
		wctx := ctx // ends when ctx does or a held lock ends
		s, err := e.lockAll(ctx, ks, func(_ context.Context, key string) (*Lock, error) {
			l, err := e.Lock(wctx, key, ttl, opts...)
			if err != nil {
				return nil, err
			}
			held = append(held, l)
			var cancel context.CancelFunc
			wctx, cancel = l.Context(wctx)
			cancels = append(cancels, cancel)
			return l, nil
		})
		for _, c := range cancels {
			c()
		}
		if err == nil || ctx.Err() != nil {
			return s, err
		}
		lost := false
		for _, l := range held {
			if l.Err() != nil && !errors.Is(l.Err(), ErrUnlocked) {
				lost = true
			}
		}
		if !lost {
			return nil, err
		}
		// A lock taken earlier ended while waiting for a later key: all
		// were released, start again.
	}
}

// lockAll takes ks in order with take; on a failure, or when a lock it
// took is no longer valid once it took the last, it unlocks what it took,
// in reverse order.
func (e *Engine) lockAll(ctx context.Context, ks []string, take func(context.Context, string) (*Lock, error)) (*LockSet, error) {
	s := &LockSet{locks: make([]*Lock, 0, len(ks))}
	for _, k := range ks {
		l, err := take(ctx, k)
		if err != nil {
			if len(s.locks) > 0 {
				s.release(ctx)
			}
			return nil, fmt.Errorf("key %q: %w", k, err)
		}
		s.locks = append(s.locks, l)
	}
	// The grant rule's (c), checked last: taking the later keys may have
	// used up an earlier key's validity (each key is one try, up to a
	// per-master timeout, and a LockAll may wait), and a set is granted
	// only while every lock in it is valid.
	if err := s.check(ErrNotAcquired, "taking"); err != nil {
		s.release(ctx)
		return nil, err
	}
	return s, nil
}

// check returns nil when every lock of the set is valid and has not
// ended, else an error naming the first that is not, matching sentinel
// and the lock's Err when it ended (ErrExpired when its validity ran
// out), or ErrGrantedTooLate when its validity ran out while the set's
// keys were taken or extended (doing) and its end is not signalled yet.
func (s *LockSet) check(sentinel error, doing string) error {
	for _, l := range s.locks {
		if err := l.Err(); err != nil {
			if errors.Is(err, sentinel) {
				return fmt.Errorf("key %q: %w", l.Key(), err)
			}
			return fmt.Errorf("key %q: %w: %w", l.Key(), sentinel, err)
		}
		if !l.Valid() {
			return fmt.Errorf("key %q: %w: %w: %s the set's %d keys took longer than its validity", l.Key(), sentinel, ErrGrantedTooLate, doing, len(s.locks))
		}
	}
	return nil
}

// release unlocks the locks taken so far, in reverse order, ignoring the
// caller's cancellation.
func (s *LockSet) release(ctx context.Context) {
	e := s.locks[0].e
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.CleanupTimeout+time.Second)
	defer cancel()
	for i := len(s.locks) - 1; i >= 0; i-- {
		s.locks[i].Unlock(rctx)
	}
}

// Locks returns the set's locks, in sorted key order.
func (s *LockSet) Locks() []*Lock { return slices.Clone(s.locks) }

// Remaining returns the validity left of the lock that ends first.
func (s *LockSet) Remaining() time.Duration {
	r := s.locks[0].Remaining()
	for _, l := range s.locks[1:] {
		r = min(r, l.Remaining())
	}
	return r
}

// Valid reports whether every lock is valid.
func (s *LockSet) Valid() bool {
	for _, l := range s.locks {
		if !l.Valid() {
			return false
		}
	}
	return true
}

// Unlock releases every lock (in reverse key order); the error joins
// those of the locks whose release failed (each as [Lock.Unlock]'s, so a
// second Unlock retries them).
func (s *LockSet) Unlock(ctx context.Context) error {
	var errs []error
	for i := len(s.locks) - 1; i >= 0; i-- {
		if err := s.locks[i].Unlock(ctx); err != nil {
			errs = append(errs, fmt.Errorf("key %q: %w", s.locks[i].Key(), err))
		}
	}
	return errors.Join(errs...)
}

// Extend extends every lock to ttl, as [Lock.Extend], one after another;
// the error joins those of the locks whose extension failed. It returns
// nil only if every lock is valid once the last is extended (checked
// last): an extension that outlasted an earlier lock's new validity is an
// error matching [ErrLockLost] (and [ErrExpired] or [ErrGrantedTooLate]).
func (s *LockSet) Extend(ctx context.Context, ttl time.Duration) error {
	var errs []error
	for _, l := range s.locks {
		if err := l.Extend(ctx, ttl); err != nil {
			errs = append(errs, fmt.Errorf("key %q: %w", l.Key(), err))
		}
	}
	if len(errs) == 0 {
		return s.check(ErrLockLost, "extending")
	}
	return errors.Join(errs...)
}

// Done returns a channel that is closed when the first of the set's locks
// ends ([Lock.Done]); Err then says why.
func (s *LockSet) Done() <-chan struct{} {
	s.once.Do(func() {
		s.done = make(chan struct{})
		for _, l := range s.locks {
			l.onEnd(s.ended)
		}
	})
	return s.done
}

func (s *LockSet) ended(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
		close(s.done)
	}
}

// Err returns nil while every lock is held, else the first ended lock's
// [Lock.Err], naming its key.
func (s *LockSet) Err() error {
	for _, l := range s.locks {
		if err := l.Err(); err != nil {
			return fmt.Errorf("key %q: %w", l.Key(), err)
		}
	}
	return nil
}

// Context returns a copy of parent cancelled when the first of the set's
// locks ends (context.Cause is its [Lock.Err]) or when cancel is called.
func (s *LockSet) Context(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	removes := make([]func(), 0, len(s.locks))
	for _, l := range s.locks {
		removes = append(removes, l.onEnd(cancel))
	}
	return ctx, func() {
		for _, r := range removes {
			r()
		}
		cancel(context.Canceled)
	}
}
