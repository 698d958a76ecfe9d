// Package redissonwire is a test client that sends, byte for byte, what
// Redisson's RLock and RFencedLock send to a single Redis server: its Lua
// scripts (texts in scripts/, see scripts/MANIFEST.md), EVALSHA with the
// NOSCRIPT → SCRIPT LOAD → EVALSHA fallback (or plain EVAL for releases
// without the script cache), the start-up probe, the unlock latch and its
// DEL, the watchdog's renewals, and lock()'s wait: subscribe to the lock's
// channel, then try again on each message or when the returned TTL ran
// out. Redisson's jars cannot be installed here; its traffic can be.
package redissonwire

import (
	"context"
	crand "crypto/rand"
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redlock-dev/redlock/resp"
)

//go:embed scripts/*.lua
var files embed.FS

// Script returns the text of scripts/name.lua.
func Script(name string) string {
	b, err := files.ReadFile("scripts/" + name + ".lua")
	if err != nil {
		panic("redissonwire: no script " + name)
	}
	return string(b)
}

// Profile is the set of scripts and habits of a range of Redisson releases.
type Profile struct {
	Name        string
	TryLock     string // script file names
	Unlock      string
	ForceUnlock string
	Renew       string
	ScriptCache bool // EVALSHA first (3.46.0+ default); else EVAL

	// RReadWriteLock (3.20.0+; empty before): the unlock, forceUnlock and
	// read renewal scripts of the release (its tryLocks never changed).
	RWReadUnlock, RWWriteUnlock, RWReadForce, RWWriteForce, RWReadRenew string
	// RFairLock (3.20.0+; empty before): tryLock() (no wait), the waiting
	// tryLock, unlock and forceUnlock of the release.
	FairTry, FairWait, FairUnlock, FairForce string
}

// Profiles are the Redisson releases the proxy recognises, newest first.
var Profiles = []Profile{
	{Name: "4.7 (3.46+)", TryLock: "redisson-3.19.0-tryLock", Unlock: "redisson-3.24.0-unlock", ForceUnlock: "redisson-3.22.0-forceUnlock", Renew: "redisson-3.44.0-renewLocksBatch", ScriptCache: true,
		RWReadUnlock: "redisson-3.44.0-rwReadUnlock", RWWriteUnlock: "redisson-3.44.0-rwWriteUnlock", RWReadForce: "redisson-3.22.0-rwReadForceUnlock", RWWriteForce: "redisson-3.22.0-rwWriteForceUnlock", RWReadRenew: "redisson-4.4.0-rwReadLockTask", FairTry: "redisson-3.31.0-fairTryLock", FairWait: "redisson-3.45.0-fairTryLockWait", FairUnlock: "redisson-3.31.0-fairUnlock", FairForce: "redisson-3.31.0-fairForceUnlock"},
	{Name: "3.44", TryLock: "redisson-3.19.0-tryLock", Unlock: "redisson-3.24.0-unlock", ForceUnlock: "redisson-3.22.0-forceUnlock", Renew: "redisson-3.44.0-renewLocksBatch",
		RWReadUnlock: "redisson-3.44.0-rwReadUnlock", RWWriteUnlock: "redisson-3.44.0-rwWriteUnlock", RWReadForce: "redisson-3.22.0-rwReadForceUnlock", RWWriteForce: "redisson-3.22.0-rwWriteForceUnlock", RWReadRenew: "redisson-3.44.0-rwReadLockTask", FairTry: "redisson-3.31.0-fairTryLock", FairWait: "redisson-3.32.0-fairTryLockWait", FairUnlock: "redisson-3.31.0-fairUnlock", FairForce: "redisson-3.31.0-fairForceUnlock"},
	{Name: "3.23", TryLock: "redisson-3.19.0-tryLock", Unlock: "redisson-3.22.0-unlock", ForceUnlock: "redisson-3.22.0-forceUnlock", Renew: "redisson-3.12.0-renewExpiration",
		RWReadUnlock: "redisson-3.22.0-rwReadUnlock", RWWriteUnlock: "redisson-3.22.0-rwWriteUnlock", RWReadForce: "redisson-3.22.0-rwReadForceUnlock", RWWriteForce: "redisson-3.22.0-rwWriteForceUnlock", RWReadRenew: "redisson-3.20.0-rwReadRenew", FairTry: "redisson-3.20.0-fairTryLock", FairWait: "redisson-3.20.0-fairTryLockWait", FairUnlock: "redisson-3.22.0-fairUnlock", FairForce: "redisson-3.22.0-fairForceUnlock"},
	{Name: "3.18", TryLock: "redisson-3.12.3-tryLock", Unlock: "redisson-3.12.0-unlock", ForceUnlock: "redisson-3.12.0-forceUnlock", Renew: "redisson-3.12.0-renewExpiration"},
	{Name: "3.12.0", TryLock: "redisson-3.12.0-tryLock", Unlock: "redisson-3.12.0-unlock", ForceUnlock: "redisson-3.12.0-forceUnlock", Renew: "redisson-3.12.0-renewExpiration"},
}

// RWProfiles are the releases whose RReadWriteLock or RFairLock traffic
// differs, newest first: the Profiles that have it, and the releases
// between them. (3.31.0's waiting fair tryLock is not among them: the
// proxy does not serve that one text.)
var RWProfiles = []Profile{
	Profiles[0],
	{Name: "4.3", TryLock: "redisson-3.19.0-tryLock", Unlock: "redisson-3.24.0-unlock", ForceUnlock: "redisson-3.22.0-forceUnlock", Renew: "redisson-3.44.0-renewLocksBatch",
		RWReadUnlock: "redisson-3.44.0-rwReadUnlock", RWWriteUnlock: "redisson-3.44.0-rwWriteUnlock", RWReadForce: "redisson-3.22.0-rwReadForceUnlock", RWWriteForce: "redisson-3.22.0-rwWriteForceUnlock", RWReadRenew: "redisson-4.0.0-rwReadLockTask", FairTry: "redisson-3.31.0-fairTryLock", FairWait: "redisson-3.45.0-fairTryLockWait", FairUnlock: "redisson-3.31.0-fairUnlock", FairForce: "redisson-3.31.0-fairForceUnlock"},
	Profiles[1],
	{Name: "3.43", TryLock: "redisson-3.19.0-tryLock", Unlock: "redisson-3.24.0-unlock", ForceUnlock: "redisson-3.22.0-forceUnlock", Renew: "redisson-3.12.0-renewExpiration",
		RWReadUnlock: "redisson-3.24.0-rwReadUnlock", RWWriteUnlock: "redisson-3.24.0-rwWriteUnlock", RWReadForce: "redisson-3.22.0-rwReadForceUnlock", RWWriteForce: "redisson-3.22.0-rwWriteForceUnlock", RWReadRenew: "redisson-3.20.0-rwReadRenew", FairTry: "redisson-3.31.0-fairTryLock", FairWait: "redisson-3.32.0-fairTryLockWait", FairUnlock: "redisson-3.31.0-fairUnlock", FairForce: "redisson-3.31.0-fairForceUnlock"},
	{Name: "3.30", TryLock: "redisson-3.19.0-tryLock", Unlock: "redisson-3.24.0-unlock", ForceUnlock: "redisson-3.22.0-forceUnlock", Renew: "redisson-3.12.0-renewExpiration",
		RWReadUnlock: "redisson-3.24.0-rwReadUnlock", RWWriteUnlock: "redisson-3.24.0-rwWriteUnlock", RWReadForce: "redisson-3.22.0-rwReadForceUnlock", RWWriteForce: "redisson-3.22.0-rwWriteForceUnlock", RWReadRenew: "redisson-3.20.0-rwReadRenew",
		FairTry: "redisson-3.20.0-fairTryLock", FairWait: "redisson-3.20.0-fairTryLockWait", FairUnlock: "redisson-3.24.0-fairUnlock", FairForce: "redisson-3.22.0-fairForceUnlock"},
	Profiles[2],
	{Name: "3.21", TryLock: "redisson-3.19.0-tryLock", Unlock: "redisson-3.12.0-unlock", ForceUnlock: "redisson-3.12.0-forceUnlock", Renew: "redisson-3.12.0-renewExpiration",
		RWReadUnlock: "redisson-3.20.0-rwReadUnlock", RWWriteUnlock: "redisson-3.20.0-rwWriteUnlock", RWReadForce: "redisson-3.20.0-rwReadForceUnlock", RWWriteForce: "redisson-3.20.0-rwWriteForceUnlock", RWReadRenew: "redisson-3.20.0-rwReadRenew", FairTry: "redisson-3.20.0-fairTryLock", FairWait: "redisson-3.20.0-fairTryLockWait", FairUnlock: "redisson-3.20.0-fairUnlock", FairForce: "redisson-3.20.0-fairForceUnlock"},
}

// ErrNotOwner is Redisson's IllegalMonitorStateException: unlock answered
// nil ("attempt to unlock lock, not locked by current thread").
var ErrNotOwner = errors.New("redissonwire: not locked by current thread")

// ServerError is an error reply.
type ServerError struct{ Msg string }

func (e *ServerError) Error() string { return "redissonwire: server error: " + e.Msg }

// Client is one Redisson instance: an id (UUID), a command connection and,
// once a lock() waits, a pub/sub connection.
type Client struct {
	Prof Profile
	ID   string
	addr string

	// Resend, when set, carries each script call of the client instead
	// of [Client.Send]: it sends r as many times as it likes — on c, or
	// on another Client with the same ID (another connection, another
	// proxy), at once or later — and returns the reply the client acts
	// on: a client's retries (Redisson's retryAttempts after its
	// timeout). An unlock's latch DEL follows its return.
	Resend func(ctx context.Context, c *Client, r Request) (resp.Reply, error)

	mu sync.Mutex // one command at a time on cmd
	nc net.Conn
	rd *resp.Reader

	smu     sync.Mutex
	sub     net.Conn
	waiters map[string]*waitEntry // channel → its waiters
	confirm chan string           // subscribe/unsubscribe confirmations
	wmu     sync.Mutex            // serialises SUBSCRIBE/UNSUBSCRIBE writes
}

type waitEntry struct {
	refs int
	wake chan struct{} // buffered 1: a message "0" came
}

// Dial connects like Redisson's single-server mode: PING on connect, then
// (4.x) the start-up probe, whose error is ignored unless it is CROSSSLOT.
func Dial(ctx context.Context, addr string, prof Profile) (*Client, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	var raw [16]byte
	crand.Read(raw[:])
	id := hex.EncodeToString(raw[:])
	id = id[0:8] + "-" + id[8:12] + "-" + id[12:16] + "-" + id[16:20] + "-" + id[20:32]
	c := &Client{Prof: prof, ID: id, addr: addr, nc: nc, rd: resp.NewReader(nc), waiters: map[string]*waitEntry{}, confirm: make(chan string, 16)}
	if _, err := c.do(ctx, "PING"); err != nil {
		nc.Close()
		return nil, err
	}
	if prof.ScriptCache {
		_, err := c.do(ctx, "EVAL", Script("redisson-4.0.0-detectClusterProbe"), "2", "test1", "test2")
		var se *ServerError
		if errors.As(err, &se) && strings.HasPrefix(se.Msg, "CROSSSLOT") {
			nc.Close()
			return nil, fmt.Errorf("redissonwire: a cluster: %w", err)
		}
	}
	return c, nil
}

// Close closes the connections.
func (c *Client) Close() {
	c.mu.Lock()
	if c.nc != nil {
		c.nc.Close()
	}
	c.mu.Unlock()
	c.smu.Lock()
	if c.sub != nil {
		c.sub.Close()
	}
	c.smu.Unlock()
}

// do sends one command and reads its reply; an error reply is a
// *ServerError.
func (c *Client) do(ctx context.Context, args ...string) (resp.Reply, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nc == nil {
		// The last command failed mid-way (its reply may still come):
		// a new connection, as Redisson's pool replaces a broken one.
		var d net.Dialer
		nc, err := d.DialContext(ctx, "tcp", c.addr)
		if err != nil {
			return resp.Reply{}, err
		}
		c.nc, c.rd = nc, resp.NewReader(nc)
	}
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(10 * time.Second)
	}
	c.nc.SetDeadline(dl)
	_, err := c.nc.Write(resp.AppendCommandStrings(nil, args...))
	var r resp.Reply
	if err == nil {
		r, err = c.rd.ReadReply()
	}
	if err != nil {
		c.nc.Close()
		c.nc = nil
		return resp.Reply{}, err
	}
	if r.IsError() {
		return r, &ServerError{Msg: r.Text()}
	}
	return r.Clone(), nil
}

// Request is one script call as the client makes it: the script (a file
// name in scripts/), its keys and its arguments.
type Request struct {
	Script     string
	Keys, Args []string
}

// Latch returns the unlock latch key r carries (an unlock of 3.24.0+, the
// request id that makes its retries act once), or "".
func (r Request) Latch() string {
	for _, k := range r.Keys {
		if strings.HasPrefix(k, "redisson_unlock_latch:") {
			return k
		}
	}
	return ""
}

// eval makes a script call: through Resend when it is set, else Send.
func (c *Client) eval(ctx context.Context, script string, keys []string, args ...string) (resp.Reply, error) {
	r := Request{Script: script, Keys: keys, Args: args}
	if c.Resend != nil {
		return c.Resend(ctx, c, r)
	}
	return c.Send(ctx, r)
}

// Send sends r once on c's connection as this release does: EVALSHA
// (NOSCRIPT: SCRIPT LOAD, then EVALSHA again) with the script cache, EVAL
// without.
func (c *Client) Send(ctx context.Context, req Request) (resp.Reply, error) {
	script, keys, args := req.Script, req.Keys, req.Args
	text := Script(script)
	tail := append(append([]string{strconv.Itoa(len(keys))}, keys...), args...)
	if !c.Prof.ScriptCache {
		return c.do(ctx, append([]string{"EVAL", text}, tail...)...)
	}
	sum := sha1.Sum([]byte(text))
	sha := hex.EncodeToString(sum[:])
	r, err := c.do(ctx, append([]string{"EVALSHA", sha}, tail...)...)
	var se *ServerError
	if errors.As(err, &se) && strings.HasPrefix(se.Msg, "NOSCRIPT") {
		lr, err := c.do(ctx, "SCRIPT", "LOAD", text)
		if err != nil {
			return r, err
		}
		if lr.Text() != sha {
			return r, fmt.Errorf("redissonwire: SCRIPT LOAD answered %q, not the SHA1 %s", lr.Text(), sha)
		}
		return c.do(ctx, append([]string{"EVALSHA", sha}, tail...)...)
	}
	return r, err
}

// LoadScripts sends SCRIPT LOAD for every script of the profile (what
// Redisson's batch path does before EVALSHA) and checks each answer is
// the script's SHA1.
func (c *Client) LoadScripts(ctx context.Context) error {
	for _, s := range []string{c.Prof.TryLock, c.Prof.Unlock, c.Prof.ForceUnlock, c.Prof.Renew} {
		sum := sha1.Sum([]byte(Script(s)))
		r, err := c.do(ctx, "SCRIPT", "LOAD", Script(s))
		if err != nil {
			return fmt.Errorf("SCRIPT LOAD %s: %w", s, err)
		}
		if r.Text() != hex.EncodeToString(sum[:]) {
			return fmt.Errorf("SCRIPT LOAD %s answered %q", s, r.Text())
		}
	}
	return nil
}

// Owner is Redisson's lock name for a thread: <client id>:<thread id>.
func (c *Client) Owner(thread int64) string { return c.ID + ":" + strconv.FormatInt(thread, 10) }

// prefixName is RedissonObject.prefixName.
func prefixName(p, name string) string {
	if strings.Contains(name, "{") {
		return p + ":" + name
	}
	return p + ":{" + name + "}"
}

// Channel is the lock's wake-up channel.
func Channel(name string) string { return prefixName("redisson_lock__channel", name) }

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// TryLock runs the tryLock script once: acquired (nil reply), or the
// holder's TTL in ms.
func (c *Client) TryLock(ctx context.Context, name string, thread int64, lease time.Duration) (bool, int64, error) {
	r, err := c.eval(ctx, c.Prof.TryLock, []string{name}, ms(lease), c.Owner(thread))
	if err != nil {
		return false, 0, err
	}
	if r.IsNull() {
		return true, 0, nil
	}
	if r.Type != resp.TypeInteger {
		return false, 0, fmt.Errorf("redissonwire: tryLock answered %s", r)
	}
	return false, r.Int, nil
}

// Lock is RLock.lock(leaseTime): try; when held, subscribe to the lock's
// channel and try again after each message or when the TTL runs out,
// until acquired or ctx ends; then unsubscribe.
func (c *Client) Lock(ctx context.Context, name string, thread int64, lease time.Duration) error {
	_, err := c.LockAt(ctx, name, thread, lease)
	return err
}

// LockAt is Lock, also returning when the successful tryLock was sent
// (the start of the lock's validity).
func (c *Client) LockAt(ctx context.Context, name string, thread int64, lease time.Duration) (time.Time, error) {
	return c.lockLoop(ctx, Channel(name), func() (bool, int64, error) { return c.TryLock(ctx, name, thread, lease) })
}

// lockLoop is Redisson's lock(): try; when not acquired, subscribe to ch
// and try again after each message or when the answered TTL runs out,
// until acquired or ctx ends; then unsubscribe. It returns when the
// successful try was sent.
func (c *Client) lockLoop(ctx context.Context, ch string, try func() (bool, int64, error)) (time.Time, error) {
	t0 := time.Now()
	ok, _, err := try()
	if err != nil || ok {
		return t0, err
	}
	w, err := c.subscribe(ctx, ch)
	if err != nil {
		return t0, err
	}
	defer c.unsubscribe(ch)
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		t0 = time.Now()
		ok, ttl, err := try()
		if err != nil || ok {
			return t0, err
		}
		var tc <-chan time.Time
		if ttl >= 0 {
			t.Reset(time.Duration(ttl) * time.Millisecond)
			tc = t.C
		}
		select {
		case <-w.wake:
		case <-tc:
		case <-ctx.Done():
			return t0, ctx.Err()
		}
	}
}

// Unlock runs the unlock script: 1 released, 0 still held (re-entered);
// ErrNotOwner for nil. With the latch (3.24.0+) it then DELs the latch key.
func (c *Client) Unlock(ctx context.Context, name string, thread int64) (int64, error) {
	return c.UnlockLease(ctx, name, thread, 30*time.Second)
}

// UnlockLease is Unlock with the lock's lease (Redisson's
// internalLockLeaseTime): an unlock that leaves the count above zero
// resets the lock's TTL to it.
func (c *Client) UnlockLease(ctx context.Context, name string, thread int64, lease time.Duration) (int64, error) {
	keys, args, l := unlockTail(c.Prof.Unlock == "redisson-3.24.0-unlock", c.Prof.Unlock == "redisson-3.22.0-unlock",
		name, []string{name, Channel(name)}, []string{"0", ms(lease), c.Owner(thread)})
	r, err := c.eval(ctx, c.Prof.Unlock, keys, args...)
	return c.unlockReply(r, err, l)
}

// UnlockRetry replays an unlock whose reply was lost: the same latch key
// and arguments again (3.24.0+ only); the answer is the first one's.
func (c *Client) UnlockRetry(ctx context.Context, name string, thread int64) (first, retry resp.Reply, err error) {
	keys := []string{name, Channel(name), latch(name)}
	args := []string{"0", "30000", c.Owner(thread), "publish", "17342"}
	if first, err = c.eval(ctx, "redisson-3.24.0-unlock", keys, args...); err != nil {
		return
	}
	retry, err = c.eval(ctx, "redisson-3.24.0-unlock", keys, args...)
	return
}

// ForceUnlock runs the forceUnlock script.
func (c *Client) ForceUnlock(ctx context.Context, name string) (bool, error) {
	args := []string{"0"}
	if c.Prof.ForceUnlock == "redisson-3.22.0-forceUnlock" {
		args = append(args, "publish")
	}
	r, err := c.eval(ctx, c.Prof.ForceUnlock, []string{name, Channel(name)}, args...)
	if err != nil {
		return false, err
	}
	return r.Int == 1, nil
}

// Renew is the watchdog's renewal: one batched call (3.44.0+) or one call
// per lock; 1/0 per lock.
func (c *Client) Renew(ctx context.Context, lease time.Duration, names []string, threads []int64) ([]int64, error) {
	if c.Prof.Renew == "redisson-3.44.0-renewLocksBatch" {
		args := []string{ms(lease)}
		for _, t := range threads {
			args = append(args, c.Owner(t))
		}
		r, err := c.eval(ctx, c.Prof.Renew, names, args...)
		if err != nil {
			return nil, err
		}
		out := make([]int64, len(r.Elems))
		for i, e := range r.Elems {
			out[i] = e.Int
		}
		return out, nil
	}
	var out []int64
	for i, n := range names {
		r, err := c.eval(ctx, c.Prof.Renew, []string{n}, ms(lease), c.Owner(threads[i]))
		if err != nil {
			return nil, err
		}
		out = append(out, r.Int)
	}
	return out, nil
}

// FencedLock runs RFencedLock's tryLockAndGetToken script once: the token
// when acquired (ttl -1), or the holder's TTL (token -1).
func (c *Client) FencedLock(ctx context.Context, name string, thread int64, lease time.Duration) (token, ttl int64, err error) {
	r, err := c.eval(ctx, "redisson-3.19.0-fencedTryLockAndGetToken", []string{name, prefixName("redisson_lock_token", name)}, ms(lease), c.Owner(thread))
	if err != nil {
		return 0, 0, err
	}
	if r.Type != resp.TypeArray || len(r.Elems) != 2 {
		return 0, 0, fmt.Errorf("redissonwire: tryLockAndGetToken answered %s", r)
	}
	if r.Elems[0].Int == -1 {
		return r.Elems[1].Int, -1, nil
	}
	return -1, r.Elems[0].Int, nil
}

// Token is RFencedLock.getToken: GET of the token key (nil: 0, false).
func (c *Client) Token(ctx context.Context, name string) (int64, bool, error) {
	r, err := c.do(ctx, "GET", prefixName("redisson_lock_token", name))
	if err != nil || r.IsNull() {
		return 0, false, err
	}
	n, err := strconv.ParseInt(r.Text(), 10, 64)
	return n, err == nil, err
}

// IsLocked is EXISTS; HeldByThread HEXISTS; HoldCount HGET; TTL PTTL.
func (c *Client) IsLocked(ctx context.Context, name string) (bool, error) {
	r, err := c.do(ctx, "EXISTS", name)
	return r.Int == 1, err
}

func (c *Client) HeldByThread(ctx context.Context, name string, thread int64) (bool, error) {
	r, err := c.do(ctx, "HEXISTS", name, c.Owner(thread))
	return r.Int == 1, err
}

func (c *Client) HoldCount(ctx context.Context, name string, thread int64) (int, error) {
	r, err := c.do(ctx, "HGET", name, c.Owner(thread))
	if err != nil || r.IsNull() {
		return 0, err
	}
	return strconv.Atoi(r.Text())
}

func (c *Client) TTL(ctx context.Context, name string) (int64, error) {
	r, err := c.do(ctx, "PTTL", name)
	return r.Int, err
}

// subscribe joins the waiters of ch, subscribing on the pub/sub
// connection (opened on first use) when it is the first.
func (c *Client) subscribe(ctx context.Context, ch string) (*waitEntry, error) {
	c.smu.Lock()
	if c.sub == nil {
		var d net.Dialer
		nc, err := d.DialContext(ctx, "tcp", c.addr)
		if err != nil {
			c.smu.Unlock()
			return nil, err
		}
		c.sub = nc
		go c.readSub(nc)
	}
	w := c.waiters[ch]
	first := w == nil
	if first {
		w = &waitEntry{wake: make(chan struct{}, 1)}
		c.waiters[ch] = w
	}
	w.refs++
	sub := c.sub
	c.smu.Unlock()
	if !first {
		return w, nil
	}
	c.wmu.Lock()
	_, err := sub.Write(resp.AppendCommandStrings(nil, "SUBSCRIBE", ch))
	c.wmu.Unlock()
	if err != nil {
		return nil, err
	}
	select {
	case got := <-c.confirm:
		if got != "subscribe "+ch {
			return nil, fmt.Errorf("redissonwire: expected the subscription to %s, got %q", ch, got)
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return w, nil
}

func (c *Client) unsubscribe(ch string) {
	c.smu.Lock()
	w := c.waiters[ch]
	if w == nil || c.sub == nil { // the connection was lost meanwhile
		c.smu.Unlock()
		return
	}
	w.refs--
	last := w.refs == 0
	if last {
		delete(c.waiters, ch)
	}
	sub := c.sub
	c.smu.Unlock()
	if last {
		c.wmu.Lock()
		sub.Write(resp.AppendCommandStrings(nil, "UNSUBSCRIBE", ch))
		c.wmu.Unlock()
	}
}

// readSub reads the pub/sub connection: confirmations to c.confirm,
// message "0" or "1" on a channel wakes one try of its waiters.
func (c *Client) readSub(nc net.Conn) {
	rd := resp.NewReader(nc)
	for {
		r, err := rd.ReadReply()
		if err != nil {
			// The server went away (a proxy restarted): the next
			// subscribe opens a new connection; waiters of the old one
			// retry at the holder's TTL.
			c.smu.Lock()
			if c.sub == nc {
				c.sub, c.waiters = nil, map[string]*waitEntry{}
			}
			c.smu.Unlock()
			nc.Close()
			return
		}
		if r.Type != resp.TypeArray || len(r.Elems) != 3 {
			continue
		}
		kind, ch := r.Elems[0].Text(), r.Elems[1].Text()
		switch kind {
		case "subscribe":
			c.confirm <- "subscribe " + ch
		case "message":
			c.smu.Lock()
			w := c.waiters[ch]
			c.smu.Unlock()
			if m := r.Elems[2].Text(); w != nil && (m == "0" || m == "1") { // 1: a read-write lock's write unlock
				select {
				case w.wake <- struct{}{}:
				default:
				}
			}
		}
	}
}
