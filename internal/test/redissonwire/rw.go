package redissonwire

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/redlock-dev/redlock/resp"
)

// RReadWriteLock's traffic (RedissonReadLock, RedissonWriteLock,
// renewal/ReadLockTask, 3.20.0+): both locks live in one hash named by the
// lock; a read hold of thread t is the field <id>:<t>, a write hold the
// field <id>:<t>:write; both wake waiters on redisson_rwlock:{name}.

// RWChannel is a read-write lock's wake-up channel.
func RWChannel(name string) string { return prefixName("redisson_rwlock", name) }

// suffixName is RedissonObject.suffixName.
func suffixName(name, suffix string) string {
	if strings.Contains(name, "{") {
		return name + ":" + suffix
	}
	return "{" + name + "}:" + suffix
}

// Writer is the write lock's owner name for a thread.
func (c *Client) Writer(thread int64) string { return c.Owner(thread) + ":write" }

// timeoutPrefix is RedissonReadLock.getReadWriteTimeoutNamePrefix; keyPrefix
// its getKeyPrefix (the part before ":" + owner).
func (c *Client) timeoutPrefix(name string, thread int64) string {
	return suffixName(name, c.Owner(thread)) + ":rwlock_timeout"
}

func (c *Client) keyPrefix(name string, thread int64) string {
	return strings.Split(c.timeoutPrefix(name, thread), ":"+c.Owner(thread))[0]
}

func tryReply(what string, r resp.Reply, err error) (bool, int64, error) {
	if err != nil {
		return false, 0, err
	}
	if r.IsNull() {
		return true, 0, nil
	}
	if r.Type != resp.TypeInteger {
		return false, 0, fmt.Errorf("redissonwire: %s answered %s", what, r)
	}
	return false, r.Int, nil
}

// ReadTryLock runs the read lock's tryLock once: acquired, or the write
// holder's TTL in ms.
func (c *Client) ReadTryLock(ctx context.Context, name string, thread int64, lease time.Duration) (bool, int64, error) {
	r, err := c.eval(ctx, "redisson-3.20.0-rwReadTryLock", []string{name, c.timeoutPrefix(name, thread)}, ms(lease), c.Owner(thread), c.Writer(thread))
	return tryReply("the read lock's tryLock", r, err)
}

// WriteTryLock runs the write lock's tryLock once.
func (c *Client) WriteTryLock(ctx context.Context, name string, thread int64, lease time.Duration) (bool, int64, error) {
	r, err := c.eval(ctx, "redisson-3.20.0-rwWriteTryLock", []string{name}, ms(lease), c.Writer(thread))
	return tryReply("the write lock's tryLock", r, err)
}

// RWLockAt is lock() of the read (write false) or write lock: try; when
// held, subscribe to the lock's channel and try again on each message or
// when the TTL runs out. It returns when the successful tryLock was sent.
func (c *Client) RWLockAt(ctx context.Context, name string, thread int64, lease time.Duration, write bool) (time.Time, error) {
	try := c.ReadTryLock
	if write {
		try = c.WriteTryLock
	}
	return c.lockLoop(ctx, RWChannel(name), func() (bool, int64, error) { return try(ctx, name, thread, lease) })
}

// latch returns a new unlock latch key of the lock (3.24.0+).
func latch(name string) string {
	var raw [16]byte
	crand.Read(raw[:])
	return prefixName("redisson_unlock_latch", name) + ":" + hex.EncodeToString(raw[:])
}

// unlockTail appends what an unlock script of the release sends after
// its common keys and arguments: with a latch (3.24.0+), the latch key,
// the publish command and the latch's TTL; 3.22.0-3.23.5, the publish
// command. It returns the latch key ("" for none).
func unlockTail(withLatch, withPublish bool, name string, keys, args []string) ([]string, []string, string) {
	switch {
	case withLatch:
		l := latch(name)
		return append(keys, l), append(args, "publish", strconv.Itoa(16000+mrand.IntN(4001))), l
	case withPublish:
		return keys, append(args, "publish"), ""
	}
	return keys, args, ""
}

func (c *Client) unlockReply(r resp.Reply, err error, l string) (int64, error) {
	if l != "" && err == nil {
		if _, derr := c.do(context.Background(), "DEL", l); derr != nil {
			return 0, fmt.Errorf("redissonwire: DEL latch: %w", derr)
		}
	}
	if err != nil {
		return 0, err
	}
	if r.IsNull() {
		return 0, ErrNotOwner
	}
	return r.Int, nil
}

// ReadUnlock runs the read lock's unlock: 1 released (or free before
// 3.44.0), 0 other holds remain; ErrNotOwner for nil.
func (c *Client) ReadUnlock(ctx context.Context, name string, thread int64) (int64, error) {
	keys := []string{name, RWChannel(name), c.timeoutPrefix(name, thread), c.keyPrefix(name, thread)}
	p := c.Prof.RWReadUnlock
	keys, args, l := unlockTail(strings.HasPrefix(p, "redisson-3.44") || strings.HasPrefix(p, "redisson-3.24"), strings.HasPrefix(p, "redisson-3.22"),
		name, keys, []string{"0", c.Owner(thread)})
	r, err := c.eval(ctx, p, keys, args...)
	return c.unlockReply(r, err, l)
}

// WriteUnlock runs the write lock's unlock with the lock's lease (a nested
// unlock resets the TTL to it): 1 released, 0 still held; ErrNotOwner for nil.
func (c *Client) WriteUnlock(ctx context.Context, name string, thread int64, lease time.Duration) (int64, error) {
	keys := []string{name, RWChannel(name)}
	p := c.Prof.RWWriteUnlock
	keys, args, l := unlockTail(strings.HasPrefix(p, "redisson-3.44") || strings.HasPrefix(p, "redisson-3.24"), strings.HasPrefix(p, "redisson-3.22"),
		name, keys, []string{"1", ms(lease), c.Writer(thread)})
	r, err := c.eval(ctx, p, keys, args...)
	return c.unlockReply(r, err, l)
}

// RWForceUnlock runs the read (write false) or write lock's forceUnlock.
func (c *Client) RWForceUnlock(ctx context.Context, name string, write bool) (bool, error) {
	script, msg := c.Prof.RWReadForce, "0"
	if write {
		script, msg = c.Prof.RWWriteForce, "1"
	}
	args := []string{msg}
	if strings.HasPrefix(script, "redisson-3.22.0") {
		args = append(args, "publish")
	}
	r, err := c.eval(ctx, script, []string{name, RWChannel(name)}, args...)
	return r.Int == 1, err
}

// ReadIsLocked is the read lock's isLocked: its script from 3.24.0, HGET
// mode before.
func (c *Client) ReadIsLocked(ctx context.Context, name string) (bool, error) {
	if c.Prof.RWReadUnlock == "redisson-3.20.0-rwReadUnlock" || c.Prof.RWReadUnlock == "redisson-3.22.0-rwReadUnlock" {
		r, err := c.do(ctx, "HGET", name, "mode")
		return r.Text() == "read", err
	}
	r, err := c.eval(ctx, "redisson-3.24.0-rwReadIsLocked", []string{name})
	return r.Int == 1, err
}

// WriteIsLocked is the write lock's isLocked (HGET mode).
func (c *Client) WriteIsLocked(ctx context.Context, name string) (bool, error) {
	r, err := c.do(ctx, "HGET", name, "mode")
	return r.Text() == "write", err
}

// RWHoldCount is getHoldCount of the read or write lock (HGET of its field).
func (c *Client) RWHoldCount(ctx context.Context, name string, thread int64, write bool) (int, error) {
	f := c.Owner(thread)
	if write {
		f = c.Writer(thread)
	}
	r, err := c.do(ctx, "HGET", name, f)
	if err != nil || r.IsNull() {
		return 0, err
	}
	return strconv.Atoi(r.Text())
}

// ReadRenew is the read lock's watchdog for one lock: 1 renewed, 0 not
// held by the thread.
func (c *Client) ReadRenew(ctx context.Context, name string, thread int64, lease time.Duration) (int64, error) {
	keys := []string{name, c.keyPrefix(name, thread)}
	var r resp.Reply
	var err error
	switch c.Prof.RWReadRenew {
	case "redisson-4.4.0-rwReadLockTask":
		r, err = c.eval(ctx, c.Prof.RWReadRenew, keys, ms(lease), "1", c.Owner(thread))
	case "redisson-3.20.0-rwReadRenew":
		r, err = c.eval(ctx, c.Prof.RWReadRenew, keys, ms(lease), c.Owner(thread))
		return r.Int, err
	default:
		r, err = c.eval(ctx, c.Prof.RWReadRenew, keys, ms(lease), c.Owner(thread))
	}
	if err != nil {
		return 0, err
	}
	if r.Type != resp.TypeArray || len(r.Elems) != 1 {
		return 0, fmt.Errorf("redissonwire: the read lock's renewal answered %s", r)
	}
	return r.Elems[0].Int, nil
}

// WriteRenew is the write lock's watchdog: RLock's renewal for the owner
// <id>:<thread>:write; before 3.44.0, a 0 falls back to the read lock's
// renewal for the plain owner (the writer kept a read hold).
func (c *Client) WriteRenew(ctx context.Context, name string, thread int64, lease time.Duration) (int64, error) {
	if c.Prof.Renew == "redisson-3.44.0-renewLocksBatch" {
		r, err := c.eval(ctx, c.Prof.Renew, []string{name}, ms(lease), c.Writer(thread))
		if err != nil {
			return 0, err
		}
		if r.Type != resp.TypeArray || len(r.Elems) != 1 {
			return 0, fmt.Errorf("redissonwire: the renewal answered %s", r)
		}
		return r.Elems[0].Int, nil
	}
	r, err := c.eval(ctx, c.Prof.Renew, []string{name}, ms(lease), c.Writer(thread))
	if err != nil || r.Int == 1 {
		return r.Int, err
	}
	r, err = c.eval(ctx, "redisson-3.20.0-rwReadRenew", []string{name, c.keyPrefix(name, thread)}, ms(lease), c.Owner(thread))
	return r.Int, err
}
