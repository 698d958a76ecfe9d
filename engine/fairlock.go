package engine

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/internal/enginex"
	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/resp"
)

// DefaultWaiterTimeout is how long a fair lock's waiter that stopped
// trying (its process died) keeps its place in the queue.
const DefaultWaiterTimeout = 5 * time.Second

// FairLock is a lock whose waiters, in any process, get it in the order
// they arrived (Redisson's RFairLock, Curator's InterProcessMutex) — over
// the same quorum as a plain lock.
//
// A waiter arrives in two quorum steps: it takes a ticket (each master
// advances a counter and the waiter keeps the largest answer), then
// queues its id with that ticket on every master (raising each counter to
// it). Its tries then set the lock key only on masters where the key is
// free and its id heads the queue, with the plain lock's quorum,
// validity, cleanup and restart quarantine. A waiter whose arrival ended
// before another's began has the lower ticket, and its entry is on a
// quorum that meets every quorum the later one could be granted by: the
// later one waits for it (docs/safety.md). A waiter that stops trying —
// its process died — drops out when its entry expires, waiterTimeout
// after its last try.
//
// The returned locks are [Lock]s (Unlock, Extend, [WithAutoExtend],
// Done/Err/Context). [WithToken] and [WithFencing] are refused. Do not take plain locks on
// a FairLock's key: they do not see the queue. The queue lives in keys
// beginning redlock:fair:, sharing the key's hash tag.
type FairLock struct {
	e             *Engine
	key           string // with Config.KeyPrefix
	queue, expiry string
	counter       string
	waiterTimeout time.Duration
}

// NewFairLock returns the fair lock on key whose waiters drop out
// waiterTimeout after their last try (0: [DefaultWaiterTimeout]). It
// sends nothing.
func (e *Engine) NewFairLock(key string, waiterTimeout time.Duration) (*FairLock, error) {
	if key == "" {
		return nil, errEmptyKey
	}
	if waiterTimeout == 0 {
		waiterTimeout = DefaultWaiterTimeout
	}
	if waiterTimeout < 10*time.Millisecond || waiterTimeout > e.cfg.MaxTTL {
		return nil, fmt.Errorf("%w: a fair lock's waiter timeout must be 10ms to the maximum TTL (%v): %v", ErrBadArgument, e.cfg.MaxTTL, waiterTimeout)
	}
	key = e.cfg.KeyPrefix + key
	if e.clusters != nil && strings.ContainsAny(conn.HashTag(key), "{}") {
		return nil, fmt.Errorf("%w: with Redis Cluster members, a fair lock's key must have a hash tag or no braces", ErrBadArgument)
	}
	base := sideKey("redlock:fair:", key)
	return &FairLock{e: e, key: key, queue: base + ":queue", expiry: base + ":expiry", counter: base + ":ticket", waiterTimeout: waiterTimeout}, nil
}

// sideKey names a key the engine keeps beside key (a fair lock's queue,
// an election's record): prefix{hashed part of key}:key. It shares key's
// hash slot, and no two keys share one (K and {K} have the same hashed
// part, not the same name), nor does it meet a lock's key outside the
// engine's redlock: names.
func sideKey(prefix, key string) string {
	return prefix + "{" + conn.HashTag(key) + "}:" + key
}

// TryLock makes one try, as [Engine.TryLock], without queueing: granted
// only when the key is free and no waiter is queued (an error matching
// [ErrNotAcquired] otherwise).
func (f *FairLock) TryLock(ctx context.Context, ttl time.Duration, opts ...Option) (*Lock, error) {
	co, err := f.opts(callOpts{}, opts)
	if err != nil {
		return nil, err
	}
	if co.waitOnly != "" {
		return nil, fmt.Errorf("%w: %s applies to a waiting call, not a try", ErrBadArgument, co.waitOnly)
	}
	co.fair = &fairWaiter{f: f}
	return f.e.tryLock(ctx, f.key, ttl, co)
}

// Lock queues the caller and waits for its turn: it arrives (again while
// too few masters answer), keeps its place (refreshed every quarter of the
// waiter timeout) and tries, and while the key is held, an earlier waiter
// is queued or too few masters answer,
// tries again after the retry delay (Config.RetryDelay or
// [WithRetryDelay], with jitter, at most a sixth of the waiter timeout so
// that its place is kept) until it is granted, ctx ends (ctx's error,
// wrapping the last try's) or [WithMaxTries] tries failed. A waiter that
// gives up leaves the queue.
func (f *FairLock) Lock(ctx context.Context, ttl time.Duration, opts ...Option) (*Lock, error) {
	e := f.e
	co, err := f.opts(callOpts{retryDelay: e.cfg.RetryDelay, maxTries: e.cfg.MaxTries}, opts)
	if err != nil {
		return nil, err
	}
	if _, err := e.lockTTL(ttl); err != nil {
		return nil, err
	}
	if co.retryDelay <= 0 {
		co.retryDelay = e.cfg.RetryDelay
	}
	co.retryDelay = min(co.retryDelay, f.waiterTimeout/6)
	var raw [16]byte
	readRandom(raw[:])
	w := &fairWaiter{f: f, id: hex.EncodeToString(raw[:])}
	co.fair = w
	arrived := false
	var stop func()
	l, _, err := e.retryTries(ctx, co, retryable, func() (*Lock, error) {
		if !arrived {
			// Too few masters to arrive: tried again like a try (a new
			// ticket: the waiter has not arrived, no order is owed).
			if err := w.arrive(ctx); err != nil {
				return nil, err
			}
			arrived = true
			stop = w.keepQueued()
		}
		return e.tryLock(ctx, f.key, ttl, co)
	})
	if stop != nil {
		stop()
	}
	// Granted: its entry is no longer needed (it would keep heading the
	// queue after the lock ends). Given up: it leaves. Not waited for (the
	// lock is returned only while valid: checked last, in finish); sent
	// on the key's connection to each master, after the try.
	w.leave()
	return l, err
}

func (f *FairLock) opts(base callOpts, opts []Option) (callOpts, error) {
	co := applyOptsTo(base, opts)
	if co.token != "" || co.fencing {
		return co, fmt.Errorf("%w: WithToken and WithFencing do not apply to a FairLock", ErrBadArgument)
	}
	return co, nil
}

// fairWaiter is one waiter of a FairLock: its id and ticket ("" and 0 for
// TryLock, which does not queue).
type fairWaiter struct {
	f      *FairLock
	id     string
	ticket int64
}

// arrive takes a ticket for the waiter and queues it on a quorum of masters
// (masters in restart quarantine do not count: they may have lost the
// queue and the counter).
func (w *fairWaiter) arrive(ctx context.Context) error {
	f, e := w.f, w.f.e
	ms := strconv.FormatInt(f.waiterTimeout.Milliseconds(), 10)
	cmd := scripts.FairTicket.AppendEvalSha(nil, 1, 1)
	cmd = resp.AppendBulkString(cmd, f.counter)
	cmd = resp.AppendBulkString(cmd, ms)
	isInt := func(r resp.Reply) bool { return r.Type == resp.TypeInteger && r.Int > 0 }
	reps, err := e.broadcast(ctx, f.key, 0, scripts.FairTicket, cmd, isInt, nil)
	if err != nil {
		return err
	}
	if qe := w.count("ticket", reps, isInt); qe != nil {
		return qe
	}
	w.ticket = 0
	for _, r := range reps {
		if r.Err == nil && isInt(r.Reply) {
			w.ticket = max(w.ticket, r.Reply.Int)
		}
	}
	cmd = w.registerCmd()
	one := func(r resp.Reply) bool { return r.Type == resp.TypeInteger && r.Int == 1 }
	reps, err = e.broadcast(ctx, f.key, 0, scripts.FairRegister, cmd, one, nil)
	if err != nil {
		return err
	}
	if qe := w.count("queue", reps, one); qe != nil {
		return qe
	}
	return nil
}

// count returns nil when a quorum answered ok (out of quarantine), else
// the unavailable error naming each master.
func (w *fairWaiter) count(op string, reps []enginex.MasterReply, ok func(resp.Reply) bool) error {
	e := w.f.e
	qe := &QuorumError{Op: op, Total: e.n, Quorum: e.q, sentinel: ErrUnavailable, unavailable: true}
	for i, r := range reps {
		rerr := r.Err
		if rerr == nil && r.Reply.IsError() {
			rerr = r.Reply.Err()
		}
		if rerr == nil && !ok(r.Reply) {
			rerr = fmt.Errorf("engine: unexpected reply %s", r.Reply)
		}
		if rerr != nil {
			if errors.Is(rerr, ErrQuarantined) {
				qe.Answered++
				qe.Quarantined++
			}
			qe.Masters = append(qe.Masters, &MasterError{Master: i, Addr: e.addrs[i], Err: rerr})
			continue
		}
		qe.Answered++
		qe.Granted++
	}
	if qe.Granted >= e.q {
		return nil
	}
	return qe
}

// leave removes the waiter from the queue on every master, without
// waiting for the answers (best effort: a master that misses it drops the
// entry at its expiry).
func (w *fairWaiter) leave() {
	f := w.f
	cmd := scripts.FairLeave.AppendEvalSha(nil, 4, 1)
	for _, k := range []string{f.key, f.queue, f.expiry, f.counter, w.id} {
		cmd = resp.AppendBulkString(cmd, k)
	}
	f.e.sendAll(f.key, scripts.FairLeave, cmd)
}

// keepQueued refreshes the waiter's entry (its ticket, its expiry) every
// quarter of the waiter timeout until stop is called, whatever its tries
// take: a try waits up to a per-master timeout and a cleanup timeout for
// a slow master, which could otherwise outlast the entry between tries.
func (w *fairWaiter) keepQueued() (stop func()) {
	f := w.f
	cmd := w.registerCmd()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(f.waiterTimeout / 4)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				f.e.sendAll(f.key, scripts.FairRegister, cmd)
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// registerCmd encodes the waiter's FairRegister.
func (w *fairWaiter) registerCmd() []byte {
	f := w.f
	cmd := scripts.FairRegister.AppendEvalSha(nil, 3, 3)
	for _, k := range []string{f.counter, f.queue, f.expiry, w.id, strconv.FormatInt(w.ticket, 10), strconv.FormatInt(f.waiterTimeout.Milliseconds(), 10)} {
		cmd = resp.AppendBulkString(cmd, k)
	}
	return cmd
}

// appendFairAcquire encodes a fair lock's try by waiter w.
func appendFairAcquire(dst []byte, key string, w *fairWaiter, token string, ms int64) []byte {
	f := w.f
	dst = scripts.FairAcquire.AppendEvalSha(dst, 4, 5)
	dst = resp.AppendBulkString(dst, key)
	dst = resp.AppendBulkString(dst, f.queue)
	dst = resp.AppendBulkString(dst, f.expiry)
	dst = resp.AppendBulkString(dst, f.counter)
	dst = resp.AppendBulkString(dst, token)
	dst = resp.AppendBulkInt(dst, ms)
	dst = resp.AppendBulkString(dst, w.id)
	dst = resp.AppendBulkInt(dst, w.ticket)
	return resp.AppendBulkInt(dst, f.waiterTimeout.Milliseconds())
}
