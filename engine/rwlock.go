package engine

import (
	"context"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/resp"
)

type rwMode uint8

const (
	rwNone rwMode = iota
	rwRead
	rwWrite
)

// The keys of an RWLock on key, besides key itself (the writer's).
const (
	readersSuffix = ":readers" // sorted set of readers' tokens, scored by expiry
	intentSuffix  = ":wwait"   // a waiting writer's id: new readers wait
)

// RWLock is a read-write lock on one key: any number of readers at once,
// or one writer. Each master keeps the writer as a plain lock's key (key,
// token as value, PX TTL) and the readers in a sorted set (key +
// ":readers", each reader's token scored by its expiry on the master's
// clock); one script per master grants a read only while no writer holds
// or waits for the key, and a write only while no writer holds it and no
// unexpired reader is in the set. A lock is granted by a quorum of masters
// with the same validity, cleanup and restart quarantine rules as a plain
// lock, so a reader and a writer — or two writers — valid at the same
// instant would need a master to have granted both (docs/safety.md).
//
// Writers are not starved by a stream of readers: a writer waiting in
// Lock leaves its id in key + ":wwait" (for its TTL, refreshed at each
// try, deleted when it gets the lock or gives up), and new readers wait
// while it is there; readers already in finish. TryLock leaves no intent.
//
// The returned locks are [Lock]s: Unlock, Extend, [WithAutoExtend],
// Done/Err/Context work as for plain locks. [WithFencing] and [WithToken]
// are refused. With cluster members the key needs a {hash tag}, so that
// its three keys share a slot. Do not take plain locks on an RWLock's key:
// a plain SET NX does not see readers.
type RWLock struct {
	e   *Engine
	key string // with Config.KeyPrefix
}

// NewRWLock returns a read-write lock on key. It does not contact the
// masters.
func (e *Engine) NewRWLock(key string) (*RWLock, error) {
	if key == "" {
		return nil, errEmptyKey
	}
	if e.clusters != nil && conn.HashTag(key) == key {
		return nil, fmt.Errorf("%w: with cluster members, an RWLock's key needs a {hash tag}: %q", ErrBadArgument, key)
	}
	return &RWLock{e: e, key: e.cfg.KeyPrefix + key}, nil
}

// TryRLock makes one try for a read lock, as [Engine.TryLock]: an error
// matching [ErrNotAcquired] while a writer holds or waits for the key.
func (rw *RWLock) TryRLock(ctx context.Context, ttl time.Duration, opts ...Option) (*Lock, error) {
	return rw.try(ctx, ttl, opts, rwRead)
}

// TryLock makes one try for the write lock: an error matching
// [ErrNotAcquired] while a writer or an unexpired reader holds the key.
func (rw *RWLock) TryLock(ctx context.Context, ttl time.Duration, opts ...Option) (*Lock, error) {
	return rw.try(ctx, ttl, opts, rwWrite)
}

// RLock waits for a read lock: it tries, and while the key is held (or
// too few masters answer) tries again after the retry delay
// (Config.RetryDelay or [WithRetryDelay], with jitter) until it is
// granted, ctx ends (ctx's error, wrapping the last try's) or
// [WithMaxTries] tries failed (the last try's error).
func (rw *RWLock) RLock(ctx context.Context, ttl time.Duration, opts ...Option) (*Lock, error) {
	return rw.wait(ctx, ttl, opts, rwRead)
}

// Lock waits for the write lock as RLock waits for a read lock; while it
// waits for readers to leave, new readers wait for it.
func (rw *RWLock) Lock(ctx context.Context, ttl time.Duration, opts ...Option) (*Lock, error) {
	return rw.wait(ctx, ttl, opts, rwWrite)
}

func (rw *RWLock) opts(base callOpts, opts []Option, mode rwMode) (callOpts, error) {
	co := applyOptsTo(base, opts)
	if co.token != "" || co.fencing {
		return co, fmt.Errorf("%w: WithToken and WithFencing do not apply to an RWLock", ErrBadArgument)
	}
	co.rw = mode
	return co, nil
}

func (rw *RWLock) try(ctx context.Context, ttl time.Duration, opts []Option, mode rwMode) (*Lock, error) {
	co, err := rw.opts(callOpts{}, opts, mode)
	if err != nil {
		return nil, err
	}
	if co.waitOnly != "" {
		return nil, fmt.Errorf("%w: %s applies to a waiting call, not a try", ErrBadArgument, co.waitOnly)
	}
	return rw.e.tryLock(ctx, rw.key, ttl, co)
}

func (rw *RWLock) wait(ctx context.Context, ttl time.Duration, opts []Option, mode rwMode) (*Lock, error) {
	e := rw.e
	co, err := rw.opts(callOpts{retryDelay: e.cfg.RetryDelay, maxTries: e.cfg.MaxTries}, opts, mode)
	if err != nil {
		return nil, err
	}
	if mode == rwWrite {
		var raw [16]byte
		readRandom(raw[:])
		co.waiterID = hex.EncodeToString(raw[:])
	}
	l, tries, err := e.retryTries(ctx, co, retryable, func() (*Lock, error) { return e.tryLock(ctx, rw.key, ttl, co) })
	if err != nil || tries > 1 || l.partial {
		// Given up, or granted where a try left the intent: an earlier
		// try, or this one on the masters that refused it (readers there).
		// A unanimous first try deleted it everywhere it was set.
		rw.dropIntent(co.waiterID)
	}
	return l, err
}

// dropIntent deletes a waiting writer's intent key on every master where
// it still holds id, without waiting: a master that misses it lets it
// expire at the writer's TTL. Waiting for every master — up to the
// per-master timeout, after the grant's verdict — returned a lock whose
// validity had run out (property c). It is queued on the key's
// connections, so it reaches each master before the holder's next
// command on the key.
func (rw *RWLock) dropIntent(id string) {
	if id == "" {
		return
	}
	ikey := rw.key + intentSuffix
	cmd := scripts.Release.AppendEvalSha(nil, 1, 1)
	cmd = resp.AppendBulkString(cmd, ikey)
	cmd = resp.AppendBulkString(cmd, id)
	rw.e.sendAll(rw.key, scripts.Release, cmd) // best effort
}
