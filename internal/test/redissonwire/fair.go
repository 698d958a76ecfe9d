package redissonwire

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redlock-dev/redlock/resp"
)

// RFairLock's traffic (RedissonFairLock, 3.20.0+): the lock is RLock's
// hash; waiters queue in redisson_lock_queue:{name} with deadlines in
// redisson_lock_timeout:{name} (the client's clock); a waiter listens on
// its own channel redisson_lock__channel:{name}:<id>:<thread>, which the
// unlock that frees the lock publishes to for the queue's head.

// FairWaitTimeout is Redisson's default fairLockWaitTimeout (5 min): a
// waiter's place when lock() or tryLock() names no wait.
const FairWaitTimeout = 5 * time.Minute

func (c *Client) fairKeys(name string) []string {
	return []string{name, prefixName("redisson_lock_queue", name), prefixName("redisson_lock_timeout", name)}
}

// FairChannel is the channel a fair lock's waiter thread listens on.
func (c *Client) FairChannel(name string, thread int64) string {
	return Channel(name) + ":" + c.Owner(thread)
}

func now() string { return strconv.FormatInt(time.Now().UnixMilli(), 10) }

// FairTryLock is tryLock() with no wait: acquired or not; it never queues.
func (c *Client) FairTryLock(ctx context.Context, name string, thread int64, lease time.Duration) (bool, error) {
	r, err := c.eval(ctx, c.Prof.FairTry, c.fairKeys(name), ms(lease), c.Owner(thread), now(), ms(FairWaitTimeout))
	if err != nil {
		return false, err
	}
	return r.IsNull(), nil
}

// FairTryLockWait is one try of lock() or tryLock(wait): acquired, or the
// TTL to wait (the thread is queued).
func (c *Client) FairTryLockWait(ctx context.Context, name string, thread int64, lease, wait time.Duration) (bool, int64, error) {
	r, err := c.eval(ctx, c.Prof.FairWait, c.fairKeys(name), ms(lease), c.Owner(thread), ms(wait), now())
	return tryReply("the fair lock's tryLock", r, err)
}

// ErrGaveUp is tryLock(wait) returning false: the wait ran out.
var ErrGaveUp = errors.New("redissonwire: the fair lock's wait ran out")

// FairLockAt is lock() (wait 0: FairWaitTimeout, until ctx ends) or
// tryLock(wait): try; when not acquired, listen on the thread's channel
// and try again on each message or when the answered TTL runs out; a
// tryLock(wait) whose wait runs out (or whose ctx ends) sends
// acquireFailed and returns ErrGaveUp (or ctx's error). It returns when
// the successful try was sent.
func (c *Client) FairLockAt(ctx context.Context, name string, thread int64, lease, wait time.Duration) (time.Time, error) {
	place := wait
	if place <= 0 {
		place = FairWaitTimeout
	}
	var deadline <-chan time.Time
	if wait > 0 {
		tm := time.NewTimer(wait)
		defer tm.Stop()
		deadline = tm.C
	}
	t0 := time.Now()
	ok, ttl, err := c.FairTryLockWait(ctx, name, thread, lease, place)
	if err != nil || ok {
		return t0, err
	}
	ch := c.FairChannel(name, thread)
	w, err := c.subscribe(ctx, ch)
	if err != nil {
		return t0, err
	}
	defer c.unsubscribe(ch)
	giveUp := func(err error) (time.Time, error) {
		actx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, ferr := c.eval(actx, "redisson-3.20.0-fairAcquireFailed", c.fairKeys(name)[1:], c.Owner(thread), ms(place)); ferr != nil {
			return t0, fmt.Errorf("%w (acquireFailed: %v)", err, ferr)
		}
		return t0, err
	}
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		t.Reset(time.Duration(max(ttl, 0)) * time.Millisecond)
		select {
		case <-w.wake:
		case <-t.C:
		case <-deadline:
			return giveUp(ErrGaveUp)
		case <-ctx.Done():
			return giveUp(ctx.Err())
		}
		t0 = time.Now()
		ok, ttl, err = c.FairTryLockWait(ctx, name, thread, lease, place)
		if err != nil || ok {
			return t0, err
		}
	}
}

// FairUnlock runs the fair lock's unlock with the lock's lease: 1
// released (or found free), 0 still held; ErrNotOwner for nil.
func (c *Client) FairUnlock(ctx context.Context, name string, thread int64, lease time.Duration) (int64, error) {
	p := c.Prof.FairUnlock
	keys, args, l := unlockTail(strings.HasPrefix(p, "redisson-3.31") || strings.HasPrefix(p, "redisson-3.24"), strings.HasPrefix(p, "redisson-3.22"),
		name, append(c.fairKeys(name), Channel(name)), []string{"0", ms(lease), c.Owner(thread), now()})
	r, err := c.eval(ctx, p, keys, args...)
	return c.unlockReply(r, err, l)
}

// FairForceUnlock runs the fair lock's forceUnlock.
func (c *Client) FairForceUnlock(ctx context.Context, name string) (bool, error) {
	args := []string{"0", now()}
	if !strings.HasPrefix(c.Prof.FairForce, "redisson-3.20.0") {
		args = append(args, "publish")
	}
	r, err := c.eval(ctx, c.Prof.FairForce, append(c.fairKeys(name), Channel(name)), args...)
	if err == nil && r.Type != resp.TypeInteger {
		err = fmt.Errorf("redissonwire: forceUnlock answered %s", r)
	}
	return r.Int == 1, err
}
