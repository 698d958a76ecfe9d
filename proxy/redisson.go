package proxy

import (
	"bufio"
	"context"
	_ "embed"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/redcon"

	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/resp"
)

// Redisson's RLock and RFencedLock, unmodified, over the quorum.
//
// Redisson keeps a lock as a hash {owner: hold count} on one server and
// changes the count with HINCRBY. Run on each master, those counts drift
// apart when a master misses an increment, and decrements then delete the
// key on a majority while the owner still counts a hold (docs/safety.md,
// "Reentrant"). The proxy therefore does not run Redisson's scripts: it
// recognises them (by text and SHA1, every version since 3.12.0) and
// serves each with an engine.Reentrant per (lock, owner) that it keeps:
// the hold count lives in the proxy, the masters hold one plain lock key
// per hold (the owner and a random part as its value), and every grant,
// re-entry, renewal and release is the engine's quorum operation with its
// validity, cleanup and restart quarantine. Replies are Redisson's: tryLock
// nil when acquired or re-entered, else the holder's PTTL; unlock 1
// (released; a wake-up is published on the lock's channel), 0 (count still
// above zero), nil (not this owner's); renewals 1/0 per lock.
//
// Holds live in this proxy: an owner re-enters and unlocks through the
// proxy that granted its hold (a Redisson client talks to one address),
// and wake-ups reach the subscribers of this proxy (others retry at the
// lock's TTL, as Redisson does anyway).

// rKind is what a recognised Redisson script does.
type rKind uint8

const (
	rTryLock            rKind = iota + 1 // KEYS lock; ARGV lease, owner
	rFencedTryLock                       // KEYS lock, token key; ARGV lease, owner
	rFencedTryLockToken                  // the same, replying {-1, token} / {pttl, -1}
	rUnlock                              // KEYS lock, channel[, latch]; ARGV "0", lease, owner[, publish cmd[, latch ms]]
	rForceUnlock                         // KEYS lock, channel; ARGV "0"[, publish cmd]
	rRenew                               // KEYS lock...; ARGV lease, owner... (one owner per key)
)

// rScript is one Redisson script text the proxy recognises.
type rScript struct {
	Name string
	File string // internal/scripts/lib file, named by the first release that sent it
	Kind rKind
	Keys int // exact KEYS count; 0 for a renewal batch (1..maxRenewKeys)
	Argc int // exact ARGV count; 0 for a renewal batch (KEYS + 1)
	SHA  string
	// LatchArg is the ARGV index (0-based) of the unlock latch's TTL in
	// ms, for an unlock with the latch key KEYS[3] (0: none).
	LatchArg int
}

// maxRenewKeys bounds a batched renewal (Redisson sends up to 100).
const maxRenewKeys = 128

// rTable lists the Redisson scripts, each version's text byte for byte
// (copied from redisson/redisson, the Java string evaluated; the file
// names the first release that sent it, docs/proxy.md the last).
var rTable = []rScript{
	{Name: "Redisson tryLock (3.19.0+)", File: "redisson-3.19.0-tryLock", Kind: rTryLock, Keys: 1, Argc: 2},
	{Name: "Redisson tryLock (3.12.3-3.18.1)", File: "redisson-3.12.3-tryLock", Kind: rTryLock, Keys: 1, Argc: 2},
	{Name: "Redisson tryLock (3.12.0-3.12.2)", File: "redisson-3.12.0-tryLock", Kind: rTryLock, Keys: 1, Argc: 2},
	{Name: "Redisson RFencedLock tryLock (3.19.0+)", File: "redisson-3.19.0-fencedTryLock", Kind: rFencedTryLock, Keys: 2, Argc: 2},
	{Name: "Redisson RFencedLock tryLockAndGetToken (3.19.0+)", File: "redisson-3.19.0-fencedTryLockAndGetToken", Kind: rFencedTryLockToken, Keys: 2, Argc: 2},
	{Name: "Redisson unlock (3.24.0+)", File: "redisson-3.24.0-unlock", Kind: rUnlock, Keys: 3, Argc: 5, LatchArg: 4},
	{Name: "Redisson unlock (3.22.0-3.23.5)", File: "redisson-3.22.0-unlock", Kind: rUnlock, Keys: 2, Argc: 4},
	{Name: "Redisson unlock (3.12.0-3.21.3)", File: "redisson-3.12.0-unlock", Kind: rUnlock, Keys: 2, Argc: 3},
	{Name: "Redisson forceUnlock (3.22.0+)", File: "redisson-3.22.0-forceUnlock", Kind: rForceUnlock, Keys: 2, Argc: 2},
	{Name: "Redisson forceUnlock (3.12.0-3.21.3)", File: "redisson-3.12.0-forceUnlock", Kind: rForceUnlock, Keys: 2, Argc: 1},
	{Name: "Redisson watchdog renewal, batched (3.44.0+)", File: "redisson-3.44.0-renewLocksBatch", Kind: rRenew},
	{Name: "Redisson watchdog renewal (3.12.0-3.43.0)", File: "redisson-3.12.0-renewExpiration", Kind: rRenew, Keys: 1, Argc: 2},

	// npm node-redisson 1.0.4 (a Node port; its own texts, Pub/Sub mode:
	// the unlock's latch TTL is ARGV[4], the publish is literal).
	{Name: "node-redisson 1.0.4 tryLock", File: "node-redisson-1.0.4-rTryLockInner", Kind: rTryLock, Keys: 1, Argc: 2},
	{Name: "node-redisson 1.0.4 unlock", File: "node-redisson-1.0.4-rUnlockInner", Kind: rUnlock, Keys: 3, Argc: 4, LatchArg: 3},
	{Name: "node-redisson 1.0.4 renewal", File: "node-redisson-1.0.4-rRenewExpiration", Kind: rRenew, Keys: 1, Argc: 2},
	{Name: "node-redisson 1.0.4 forceUnlock", File: "node-redisson-1.0.4-rForceUnlock", Kind: rForceUnlock, Keys: 2, Argc: 1},
}

// rBySHA indexes rTable by SHA1.
var rBySHA = func() map[string]*rScript {
	m := map[string]*rScript{}
	for i := range rTable {
		rs := &rTable[i]
		rs.SHA = sha1Hex([]byte(scripts.Lib(rs.File)))
		m[rs.SHA] = rs
	}
	return m
}()

// Names Redisson derives from a lock's name (RedissonObject.prefixName).
const (
	rLatchPrefix = "redisson_unlock_latch:"
	rTokenPrefix = "redisson_lock_token:"
)

// Bounds of the proxy's Redisson state.
const (
	maxRHolds   = 1 << 20 // holds kept (each is a lock held on the masters)
	maxRLatches = 1 << 16 // unlock results kept for a retried unlock
	maxLatchTTL = time.Minute
)

// rLocks is the proxy's Redisson state. Its entries are charged to
// MaxClientMemory (they outlive the requests that made them); holds that
// ended and latches past their TTL are swept whenever their maps doubled
// since the last sweep.
type rLocks struct {
	s       *Server
	mu      sync.Mutex
	sweepH  int                    // len(holds) that triggers the next sweep (guarded by mu)
	sweepL  int                    // len(latches) likewise
	holds   map[string]*rHold      // lock key → hold (guarded by mu)
	byToken map[string]*rHold      // RFencedLock token key → hold (guarded by mu)
	latches map[string]latchResult // unlock latch key → result (guarded by mu)
}

// rHold is the hold of one owner on one lock key.
type rHold struct {
	owner    string
	r        *engine.Reentrant
	l        *engine.Lock // the hold's lock, for sweeping without r's mutex
	fenced   bool
	tokenKey string
	cost     int64 // charged to MaxClientMemory (Server.charge)
}

// ended reports whether h's lock ended (unlocked, lost, validity over);
// rl.mu held (relock writes h.l under it).
func (h *rHold) ended() bool { return h.l.Err() != nil }

type latchResult struct {
	v     int64
	until time.Time
}

// holdLive returns key's hold and whether its lock is still live.
func (rl *rLocks) holdLive(key string) (*rHold, bool) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	h := rl.holds[key]
	return h, h != nil && !h.ended()
}

func (rl *rLocks) hold(key string) *rHold {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	return rl.holds[key]
}

// put records h as key's hold; false when the table is full of live holds
// or MaxClientMemory is reached.
func (rl *rLocks) put(key string, h *rHold) bool {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if rl.holds == nil {
		rl.holds, rl.byToken = map[string]*rHold{}, map[string]*rHold{}
	}
	if len(rl.holds) >= max(rl.sweepH, 1024) {
		for k, old := range rl.holds {
			if old.ended() {
				rl.dropLocked(k, old)
			}
		}
		rl.sweepH = 2 * len(rl.holds)
	}
	if len(rl.holds) >= maxRHolds {
		return false
	}
	h.cost = int64(2*len(key)+len(h.owner)+len(h.tokenKey)) + 512
	if !rl.s.charge(h.cost) {
		return false
	}
	if old := rl.holds[key]; old != nil {
		rl.dropLocked(key, old)
	}
	rl.holds[key] = h
	if h.tokenKey != "" {
		rl.byToken[h.tokenKey] = h
	}
	return true
}

// relock records h's current lock after a TryLock that may have been an
// acquisition from zero.
func (rl *rLocks) relock(h *rHold) {
	if l := h.r.Held(); l != nil {
		rl.mu.Lock()
		h.l = l
		rl.mu.Unlock()
	}
}

// drop forgets h if it is still key's hold.
func (rl *rLocks) drop(key string, h *rHold) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if rl.holds[key] == h {
		rl.dropLocked(key, h)
	}
}

func (rl *rLocks) dropLocked(key string, h *rHold) {
	delete(rl.holds, key)
	if h.tokenKey != "" && rl.byToken[h.tokenKey] == h {
		delete(rl.byToken, h.tokenKey)
	}
	rl.s.charge(-h.cost)
}

func (rl *rLocks) latch(key string) (int64, bool) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	lr, ok := rl.latches[key]
	if !ok || time.Now().After(lr.until) {
		return 0, false
	}
	return lr.v, true
}

func (rl *rLocks) setLatch(key string, v int64, ttl time.Duration) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if rl.latches == nil {
		rl.latches = map[string]latchResult{}
	}
	now := time.Now()
	if len(rl.latches) >= max(rl.sweepL, 1024) {
		for k, lr := range rl.latches {
			if now.After(lr.until) {
				rl.dropLatchLocked(k)
			}
		}
		rl.sweepL = 2 * len(rl.latches)
	}
	if _, ok := rl.latches[key]; ok || len(rl.latches) >= maxRLatches || !rl.s.charge(latchCost(key)) {
		return // a retried unlock of this one answers nil instead
	}
	rl.latches[key] = latchResult{v: v, until: now.Add(min(ttl, maxLatchTTL))}
}

func latchCost(key string) int64 { return int64(len(key)) + 128 }

func (rl *rLocks) dropLatchLocked(key string) {
	delete(rl.latches, key)
	rl.s.charge(-latchCost(key))
}

// delLatches deletes the latch keys and returns how many existed.
func (rl *rLocks) delLatches(keys [][]byte) int64 {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	n := int64(0)
	for _, k := range keys {
		if lr, ok := rl.latches[string(k)]; ok {
			if time.Now().Before(lr.until) {
				n++
			}
			rl.dropLatchLocked(string(k))
		}
	}
	return n
}

// tokenOf returns the fencing token of the hold whose RFencedLock token key
// is key.
func (rl *rLocks) tokenOf(key string) (int64, bool) {
	rl.mu.Lock()
	h := rl.byToken[key]
	rl.mu.Unlock()
	if h == nil {
		return 0, false
	}
	l := h.r.Held()
	if l == nil {
		return 0, false
	}
	return l.FencingToken(), true
}

// fits reports whether keys and argv have the shape Redisson sends.
func (rs *rScript) fits(keys, argv [][]byte) bool {
	if rs.Keys == 0 {
		if len(keys) < 1 || len(keys) > maxRenewKeys || len(argv) != len(keys)+1 {
			return false
		}
	} else if len(keys) != rs.Keys || len(argv) != rs.Argc {
		return false
	}
	switch rs.Kind {
	case rTryLock, rFencedTryLock, rFencedTryLockToken:
		return validOwner(argv[1]) && isMillis(argv[0])
	case rUnlock:
		return validOwner(argv[2]) && (rs.LatchArg == 0 || isMillis(argv[rs.LatchArg]))
	case rRenew:
		for _, o := range argv[1:] {
			if !validOwner(o) {
				return false
			}
		}
		return isMillis(argv[0])
	}
	return true
}

func validOwner(b []byte) bool { return len(b) > 0 && len(b) <= 256 }

func isMillis(b []byte) bool {
	n, ok := resp.ParseInt(b)
	return ok && n > 0 && n <= int64(1<<62)/int64(time.Millisecond)
}

// runRedisson serves a recognised Redisson script (keys already carry the
// proxy's key prefix).
func (c *client) runRedisson(rs *rScript, keys, argv [][]byte) *call {
	if !rs.fits(keys, argv) || !c.s.rNames(rs, keys) {
		return errCall("ERR redlock proxy: " + rs.Name + " called in a shape Redisson never sends (or a lock name over 1024 bytes, or a channel, latch or token key not derived from the lock's name)")
	}
	if rs.Kind == rForceUnlock && !c.s.cfg.AllowTokenlessWrites {
		return errCall(msgTokenless("Redisson's forceUnlock", "Redisson unlock"))
	}
	s := c.s
	return c.async(keys, func(ctx context.Context, dst []byte) []byte {
		switch rs.Kind {
		case rTryLock, rFencedTryLock, rFencedTryLockToken:
			return s.rTryLock(ctx, dst, rs, keys, argv)
		case rUnlock:
			return s.rUnlock(ctx, dst, rs, keys, argv)
		case rForceUnlock:
			return s.rForceUnlock(ctx, dst, keys)
		}
		return s.rRenew(ctx, dst, rs, keys, argv)
	})
}

func millis(b []byte) time.Duration {
	n, _ := resp.ParseInt(b)
	return time.Duration(n) * time.Millisecond
}

func (s *Server) rTryLock(ctx context.Context, dst []byte, rs *rScript, keys, argv [][]byte) []byte {
	key, owner, lease := string(keys[0]), string(argv[1]), millis(argv[0])
	fenced := rs.Kind != rTryLock
	var opts []engine.Option
	if fenced {
		opts = append(opts, engine.WithFencing())
	}
	h, live := s.rl.holdLive(key)
	var err error
	if h != nil && h.owner == owner && live {
		// Re-entry: one script per master (an acquisition from zero if
		// the hold ended just now).
		if err = h.r.TryLock(ctx, lease, opts...); err == nil {
			s.rl.relock(h)
		}
	} else {
		var r *engine.Reentrant
		if r, err = s.eng.NewReentrant(key, owner); err == nil {
			if err = r.TryLock(ctx, lease, opts...); err == nil {
				h = &rHold{owner: owner, r: r, l: r.Held(), fenced: fenced}
				if fenced {
					h.tokenKey = string(keys[1])
				}
				if h.l == nil || !s.rl.put(key, h) {
					r.Unlock(context.WithoutCancel(ctx))
					return redcon.AppendError(dst, "ERR redlock proxy: too many Redisson locks held through this proxy, or "+msgMemory[len("ERR redlock proxy: "):])
				}
			}
		}
	}
	if err == nil {
		if rs.Kind == rFencedTryLockToken {
			l := h.r.Held()
			if l == nil { // force-unlocked by another client meanwhile
				return redcon.AppendError(dst, "ERR redlock proxy: "+strings.TrimPrefix(engine.ErrLockLost.Error(), "engine: "))
			}
			dst = redcon.AppendArray(dst, 2)
			dst = redcon.AppendInt(dst, -1)
			return redcon.AppendInt(dst, l.FencingToken())
		}
		return redcon.AppendNull(dst)
	}
	if !errors.Is(err, engine.ErrNotAcquired) {
		return s.engineErr(err)
	}
	hd, err := s.eng.Holder(ctx, key)
	if err != nil {
		return s.engineErr(err)
	}
	ms := hd.Remaining.Milliseconds()
	if rs.Kind == rFencedTryLockToken {
		dst = redcon.AppendArray(dst, 2)
		dst = redcon.AppendInt(dst, ms)
		return redcon.AppendInt(dst, -1)
	}
	return redcon.AppendInt(dst, ms)
}

func (s *Server) rUnlock(ctx context.Context, dst []byte, rs *rScript, keys, argv [][]byte) []byte {
	key, owner := string(keys[0]), string(argv[2])
	latch, latchTTL := "", time.Duration(0)
	if rs.LatchArg > 0 {
		latch, latchTTL = string(keys[2]), millis(argv[rs.LatchArg])
		if v, ok := s.rl.latch(latch); ok {
			return redcon.AppendInt(dst, v) // a retried unlock: the first one's answer
		}
	}
	h := s.rl.hold(key)
	if h == nil || h.owner != owner || h.r.Count() == 0 {
		return redcon.AppendNull(dst)
	}
	if h.r.Count() > 1 {
		h.r.Unlock(ctx) // the count only: no master traffic
		if latch != "" {
			s.rl.setLatch(latch, 0, latchTTL)
		}
		return redcon.AppendInt(dst, 0)
	}
	err := h.r.Unlock(ctx)
	switch {
	case err == nil:
		s.rl.drop(key, h)
		s.publish(s.unprefixed(keys[1]), "0")
		if latch != "" {
			s.rl.setLatch(latch, 1, latchTTL)
		}
		return redcon.AppendInt(dst, 1)
	case errors.Is(err, engine.ErrUnavailable), ctx.Err() != nil:
		return s.engineErr(err)
	}
	// A quorum said the key no longer holds the token: lost before the
	// unlock, as Redisson's "not locked by current thread".
	s.rl.drop(key, h)
	return redcon.AppendNull(dst)
}

func (s *Server) rForceUnlock(ctx context.Context, dst []byte, keys [][]byte) []byte {
	key := string(keys[0])
	if h := s.rl.hold(key); h != nil && h.r.Held() != nil {
		for h.r.Count() > 1 {
			h.r.Unlock(ctx)
		}
		if err := h.r.Unlock(ctx); err != nil && (errors.Is(err, engine.ErrUnavailable) || ctx.Err() != nil) {
			return s.engineErr(err)
		}
		s.rl.drop(key, h)
		s.publish(s.unprefixed(keys[1]), "0")
		return redcon.AppendInt(dst, 1)
	}
	hd, err := s.eng.Holder(ctx, key)
	if err != nil {
		return s.engineErr(err)
	}
	if hd.Token == "" {
		return redcon.AppendInt(dst, 0)
	}
	if !s.cfg.AllowTokenlessWrites {
		return redcon.AppendError(dst, msgTokenless("Redisson's forceUnlock of a lock this proxy did not grant", "Redisson unlock"))
	}
	if err := s.tr.Attach(key, hd.Token, hd.Remaining).Unlock(ctx); err != nil {
		if errors.Is(err, engine.ErrLockLost) && !errors.Is(err, engine.ErrUnavailable) {
			return redcon.AppendInt(dst, 0) // released meanwhile
		}
		return s.engineErr(err)
	}
	s.publish(s.unprefixed(keys[1]), "0")
	return redcon.AppendInt(dst, 1)
}

// rRenew serves the watchdog's renewal (one lock, or a batch): each lock
// this owner holds through the proxy is extended to the lease (concurrently);
// 1 where a quorum extended it, 0 otherwise (Redisson then stops renewing
// it, and the lock ends at its validity).
func (s *Server) rRenew(ctx context.Context, dst []byte, rs *rScript, keys, argv [][]byte) []byte {
	lease := millis(argv[0])
	res := make([]int64, len(keys))
	var wg sync.WaitGroup
	for i, k := range keys {
		h := s.rl.hold(string(k))
		if h == nil || h.owner != string(argv[i+1]) {
			continue
		}
		l := h.r.Held()
		if l == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if l.Extend(ctx, lease) == nil {
				res[i] = 1
			}
		}()
	}
	wg.Wait()
	if rs.Keys == 1 { // the single-lock script of 3.43.0 and earlier
		return redcon.AppendInt(dst, res[0])
	}
	dst = redcon.AppendArray(dst, len(res))
	for _, v := range res {
		dst = redcon.AppendInt(dst, v)
	}
	return dst
}

// unprefixed returns a key without the proxy's key prefix (a Redisson
// channel is named by the client, which subscribes without it).
func (s *Server) unprefixed(k []byte) string {
	return strings.TrimPrefix(string(k), s.cfg.KeyPrefix)
}

// latchKeys reports whether every key is a Redisson unlock latch.
func (s *Server) latchKeys(keys [][]byte) bool {
	for _, k := range keys {
		if !strings.HasPrefix(s.unprefixed(k), rLatchPrefix) {
			return false
		}
	}
	return len(keys) > 0
}

// cmdHExists answers Redisson's isHeldByThread (HEXISTS lock owner) and
// cmdHGet its getHoldCount (HGET lock owner) from the holds this proxy
// granted: the masters hold plain lock keys, not Redisson's hashes.
// (Asynchronous, so that they follow the connection's earlier commands on
// the key.)
func (c *client) cmdHExists(args [][]byte) *call {
	key, owner, s := args[1], args[2], c.s
	return c.async(args[1:2], func(_ context.Context, dst []byte) []byte {
		n := int64(0)
		if s.rHoldCount(key, owner) > 0 {
			n = 1
		}
		return redcon.AppendInt(dst, n)
	})
}

func (c *client) cmdHGet(args [][]byte) *call {
	key, owner, s := args[1], args[2], c.s
	return c.async(args[1:2], func(_ context.Context, dst []byte) []byte {
		if n := s.rHoldCount(key, owner); n > 0 {
			return redcon.AppendBulkString(dst, strconv.Itoa(n))
		}
		return redcon.AppendNull(dst)
	})
}

// rHoldCount is owner's hold count on key through this proxy (0: none, or
// its hold ended).
func (s *Server) rHoldCount(key, owner []byte) int {
	h := s.rl.hold(string(key))
	if h == nil || h.owner != string(owner) || h.r.Held() == nil || !h.r.Held().Valid() {
		return 0
	}
	return h.r.Count()
}

// count returns the number of holds kept.
func (rl *rLocks) count() int {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	return len(rl.holds)
}

// Redisson's other lock kinds — fair lock, read-write lock, semaphores,
// count-down latch, spin lock — keep lists, per-reader keys or counters
// whose per-master copies diverge (and the fair lock reads the client's
// clock): translating their scripts one by one cannot make them
// quorum-safe. The proxy refuses them by SHA1 (redisson_refused.tsv: every
// text of releases 3.20.0 to 4.7.0) with an error that names what it
// serves instead.
//
//go:embed redisson_refused.tsv
var rRefusedTSV string

// rRefused maps a refused script's SHA1 to "<class>.<method> (first-last)".
var rRefused = func() map[string]string {
	m := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(rRefusedTSV))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 5 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if rBySHA[f[0]] != nil {
			panic("proxy: a served Redisson script is listed as refused: " + f[2])
		}
		m[f[0]] = f[2] + " (Redisson " + f[3] + "-" + f[4] + ", " + f[1] + ")"
	}
	return m
}()

// msgRedissonKind is the refusal of a Redisson script the proxy does not serve.
func msgRedissonKind(what string) string {
	return "ERR redlock proxy: " + what + " is not supported: Redisson's fair lock, read-write lock, semaphores, " +
		"count-down latch and spin lock cannot be made quorum-safe script by script. Through the proxy, use RLock or " +
		"RFencedLock (reentrant, with the watchdog); read-write locks, semaphores and multi-key locks are the engine's " +
		"RWLock, Semaphore and LockAll (docs/proxy.md)"
}

// maxRLockName bounds a Redisson lock's name (the proxy keeps it with the
// hold and names derived from it).
const maxRLockName = 1024

// rNames checks the keys besides the lock that a Redisson script names:
// each is derived from the lock's name as Redisson (prefixName: p + ":" +
// name when it has a brace, else p + ":{" + name + "}") or node-redisson
// (braces added unless it starts with one) derives it — the channel the
// proxy publishes on, the latch it keeps, the fencing token key it
// answers GET for — so that a client cannot name another lock's.
func (s *Server) rNames(rs *rScript, keys [][]byte) bool {
	if rs.Kind == rRenew {
		for _, k := range keys {
			if len(s.unprefixed(k)) > maxRLockName {
				return false
			}
		}
		return true
	}
	name := s.unprefixed(keys[0])
	if len(name) > maxRLockName {
		return false
	}
	derived := func(k []byte, p string) bool {
		got := s.unprefixed(k)
		return (strings.Contains(name, "{") && got == p+":"+name) || (!strings.HasPrefix(name, "{") && got == p+":{"+name+"}")
	}
	switch rs.Kind {
	case rFencedTryLock, rFencedTryLockToken:
		return derived(keys[1], "redisson_lock_token")
	case rUnlock, rForceUnlock:
		if !derived(keys[1], "redisson_lock__channel") {
			return false
		}
		if rs.LatchArg > 0 {
			// redisson_unlock_latch:{name}:<request id> (32 hex; a UUID).
			l := s.unprefixed(keys[2])
			i := strings.LastIndexByte(l, ':')
			return i > 0 && len(l)-i-1 <= 64 && derived([]byte(s.cfg.KeyPrefix+l[:i]), "redisson_unlock_latch")
		}
	}
	return true
}

// kept returns the bytes charged for the holds and latches kept.
func (rl *rLocks) kept() int64 {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	n := int64(0)
	for _, h := range rl.holds {
		n += h.cost
	}
	for k := range rl.latches {
		n += latchCost(k)
	}
	return n
}
