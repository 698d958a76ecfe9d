package proxy

import (
	"bufio"
	"context"
	_ "embed"
	"strings"
	"time"

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
// serves each with quorum operations of its own (redisson_hold.go) on a
// plain string per lock whose value carries the whole hold — owner, kind,
// hold count, fencing token — so that every change is a compare-and-set of
// one value by a quorum. Nothing that decides a grant, renewal, re-entry
// or unlock is kept in the proxy: any proxy on the same masters serves any
// Redisson command of any client, and a restart loses nothing. Replies are
// Redisson's: tryLock nil when acquired or re-entered, else the holder's
// PTTL; unlock 1 (released; a wake-up is published on the lock's channel
// to this proxy's subscribers), 0 (count still above zero), nil (not this
// owner's); renewals 1/0 per lock.

// rKind is what a recognised Redisson script does.
type rKind uint8

const (
	rTryLock            rKind = iota + 1 // KEYS lock; ARGV lease, owner
	rFencedTryLock                       // KEYS lock, token key; ARGV lease, owner
	rFencedTryLockToken                  // the same, replying {-1, token} / {pttl, -1}
	rUnlock                              // KEYS lock, channel[, latch]; ARGV "0", lease, owner[, publish cmd[, latch ms]]
	rForceUnlock                         // KEYS lock, channel; ARGV "0"[, publish cmd]
	rRenew                               // KEYS lock...; ARGV lease, owner... (one owner per key)

	// RReadWriteLock (redisson_rw.go).
	rRWRead        // KEYS lock, timeout prefix; ARGV lease, owner, owner:write
	rRWWrite       // KEYS lock; ARGV lease, owner:write
	rRWUnlockRead  // KEYS lock, channel, timeout prefix, key prefix[, latch]; ARGV "0", owner[, publish cmd[, latch ms]]
	rRWUnlockWrite // KEYS lock, channel[, latch]; ARGV "1", lease, owner:write[, publish cmd[, latch ms]]
	rRWForceRead   // KEYS lock, channel; ARGV "0"[, publish cmd]
	rRWForceWrite  // KEYS lock, channel; ARGV "1"[, publish cmd]
	rRWIsLocked    // KEYS lock (the read lock's isLocked)
	rRWRenew       // KEYS lock, key prefix; ARGV lease, owner (3.20.0-3.43.0)
	rRWRenewTask   // KEYS (lock, key prefix)...; ARGV lease, owner per lock (3.44.0-4.3.1)
	rRWRenewTask44 // KEYS (lock, key prefix)...; ARGV lease, (count, owners...) per lock (4.4.0+)

	// RFairLock (redisson_fair.go).
	rFairTry    // KEYS lock, queue, timeouts; ARGV lease, owner, now, wait (tryLock(): no queue)
	rFairWait   // KEYS lock, queue, timeouts; ARGV lease, owner, wait, now (tryLock(wait), lock())
	rFairUnlock // KEYS lock, queue, timeouts, channel[, latch]; ARGV "0", lease, owner, now[, publish cmd[, latch ms]]
	rFairForce  // KEYS lock, queue, timeouts, channel; ARGV "0", now[, publish cmd]
	rFairLeave  // KEYS queue, timeouts; ARGV owner, wait (acquireFailed)
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
	// LatchKey is the KEYS index (0-based) of a read-write unlock's latch
	// key (0: none); LatchArg is then its TTL's ARGV index.
	LatchKey int
	// FreeNil: unlocking a free read-write lock answers nil (3.44.0+),
	// not 1.
	FreeNil bool
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

	// RReadWriteLock, releases 3.20.0 and later (redisson_rw.go). Its
	// write lock's watchdog sends RLock's renewal (above) for the owner
	// <id>:<thread>:write.
	{Name: "Redisson RReadWriteLock readLock tryLock (3.20.0+)", File: "redisson-3.20.0-rwReadTryLock", Kind: rRWRead, Keys: 2, Argc: 3},
	{Name: "Redisson RReadWriteLock writeLock tryLock (3.20.0+)", File: "redisson-3.20.0-rwWriteTryLock", Kind: rRWWrite, Keys: 1, Argc: 2},
	{Name: "Redisson RReadWriteLock readLock unlock (3.44.0+)", File: "redisson-3.44.0-rwReadUnlock", Kind: rRWUnlockRead, Keys: 5, Argc: 4, LatchKey: 4, LatchArg: 3, FreeNil: true},
	{Name: "Redisson RReadWriteLock readLock unlock (3.24.0-3.43.0)", File: "redisson-3.24.0-rwReadUnlock", Kind: rRWUnlockRead, Keys: 5, Argc: 4, LatchKey: 4, LatchArg: 3},
	{Name: "Redisson RReadWriteLock readLock unlock (3.22.0-3.23.5)", File: "redisson-3.22.0-rwReadUnlock", Kind: rRWUnlockRead, Keys: 4, Argc: 3},
	{Name: "Redisson RReadWriteLock readLock unlock (3.20.0-3.21.3)", File: "redisson-3.20.0-rwReadUnlock", Kind: rRWUnlockRead, Keys: 4, Argc: 2},
	{Name: "Redisson RReadWriteLock writeLock unlock (3.44.0+)", File: "redisson-3.44.0-rwWriteUnlock", Kind: rRWUnlockWrite, Keys: 3, Argc: 5, LatchKey: 2, LatchArg: 4, FreeNil: true},
	{Name: "Redisson RReadWriteLock writeLock unlock (3.24.0-3.43.0)", File: "redisson-3.24.0-rwWriteUnlock", Kind: rRWUnlockWrite, Keys: 3, Argc: 5, LatchKey: 2, LatchArg: 4},
	{Name: "Redisson RReadWriteLock writeLock unlock (3.22.0-3.23.5)", File: "redisson-3.22.0-rwWriteUnlock", Kind: rRWUnlockWrite, Keys: 2, Argc: 4},
	{Name: "Redisson RReadWriteLock writeLock unlock (3.20.0-3.21.3)", File: "redisson-3.20.0-rwWriteUnlock", Kind: rRWUnlockWrite, Keys: 2, Argc: 3},
	{Name: "Redisson RReadWriteLock readLock forceUnlock (3.22.0+)", File: "redisson-3.22.0-rwReadForceUnlock", Kind: rRWForceRead, Keys: 2, Argc: 2},
	{Name: "Redisson RReadWriteLock readLock forceUnlock (3.20.0-3.21.3)", File: "redisson-3.20.0-rwReadForceUnlock", Kind: rRWForceRead, Keys: 2, Argc: 1},
	{Name: "Redisson RReadWriteLock writeLock forceUnlock (3.22.0+)", File: "redisson-3.22.0-rwWriteForceUnlock", Kind: rRWForceWrite, Keys: 2, Argc: 2},
	{Name: "Redisson RReadWriteLock writeLock forceUnlock (3.20.0-3.21.3)", File: "redisson-3.20.0-rwWriteForceUnlock", Kind: rRWForceWrite, Keys: 2, Argc: 1},
	{Name: "Redisson RReadWriteLock readLock isLocked (3.24.0+)", File: "redisson-3.24.0-rwReadIsLocked", Kind: rRWIsLocked, Keys: 1, Argc: 0},
	{Name: "Redisson RReadWriteLock readLock renewal (3.20.0-3.43.0)", File: "redisson-3.20.0-rwReadRenew", Kind: rRWRenew, Keys: 2, Argc: 2},
	{Name: "Redisson RReadWriteLock readLock renewal, batched (4.4.0+)", File: "redisson-4.4.0-rwReadLockTask", Kind: rRWRenewTask44},
	{Name: "Redisson RReadWriteLock readLock renewal, batched (4.0.0-4.3.1)", File: "redisson-4.0.0-rwReadLockTask", Kind: rRWRenewTask},
	{Name: "Redisson RReadWriteLock readLock renewal, batched (3.44.0-3.52.0)", File: "redisson-3.44.0-rwReadLockTask", Kind: rRWRenewTask},

	// RFairLock, releases 3.20.0 and later but 3.31.0's waiting tryLock
	// (redisson_fair.go). Its renewal is RLock's.
	{Name: "Redisson RFairLock tryLock (3.31.0+)", File: "redisson-3.31.0-fairTryLock", Kind: rFairTry, Keys: 3, Argc: 4},
	{Name: "Redisson RFairLock tryLock (3.20.0-3.30.0)", File: "redisson-3.20.0-fairTryLock", Kind: rFairTry, Keys: 3, Argc: 4},
	{Name: "Redisson RFairLock waiting tryLock (3.45.0+)", File: "redisson-3.45.0-fairTryLockWait", Kind: rFairWait, Keys: 3, Argc: 4},
	{Name: "Redisson RFairLock waiting tryLock (3.32.0-3.44.0)", File: "redisson-3.32.0-fairTryLockWait", Kind: rFairWait, Keys: 3, Argc: 4},
	{Name: "Redisson RFairLock waiting tryLock (3.20.0-3.30.0)", File: "redisson-3.20.0-fairTryLockWait", Kind: rFairWait, Keys: 3, Argc: 4},
	{Name: "Redisson RFairLock unlock (3.31.0+)", File: "redisson-3.31.0-fairUnlock", Kind: rFairUnlock, Keys: 5, Argc: 6, LatchKey: 4, LatchArg: 5},
	{Name: "Redisson RFairLock unlock (3.24.0-3.30.0)", File: "redisson-3.24.0-fairUnlock", Kind: rFairUnlock, Keys: 5, Argc: 6, LatchKey: 4, LatchArg: 5},
	{Name: "Redisson RFairLock unlock (3.22.0-3.23.5)", File: "redisson-3.22.0-fairUnlock", Kind: rFairUnlock, Keys: 4, Argc: 5},
	{Name: "Redisson RFairLock unlock (3.20.0-3.21.3)", File: "redisson-3.20.0-fairUnlock", Kind: rFairUnlock, Keys: 4, Argc: 4},
	{Name: "Redisson RFairLock forceUnlock (3.31.0+)", File: "redisson-3.31.0-fairForceUnlock", Kind: rFairForce, Keys: 4, Argc: 3},
	{Name: "Redisson RFairLock forceUnlock (3.22.0-3.30.0)", File: "redisson-3.22.0-fairForceUnlock", Kind: rFairForce, Keys: 4, Argc: 3},
	{Name: "Redisson RFairLock forceUnlock (3.20.0-3.21.3)", File: "redisson-3.20.0-fairForceUnlock", Kind: rFairForce, Keys: 4, Argc: 2},
	{Name: "Redisson RFairLock acquireFailed (3.20.0+)", File: "redisson-3.20.0-fairAcquireFailed", Kind: rFairLeave, Keys: 2, Argc: 2},
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

// fits reports whether keys and argv have the shape Redisson sends.
func (rs *rScript) fits(keys, argv [][]byte) bool {
	if rs.Kind >= rFairTry {
		return rs.rFairFits(keys, argv)
	}
	if rs.Kind >= rRWRead {
		return rs.rwFits(keys, argv)
	}
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
		return validOwner(argv[2]) && isMillis(argv[1]) && (rs.LatchArg == 0 || isMillis(argv[rs.LatchArg]))
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
	if (rs.Kind == rForceUnlock || rs.Kind == rRWForceRead || rs.Kind == rRWForceWrite || rs.Kind == rFairForce) && !c.s.cfg.AllowTokenlessWrites {
		return errCall(msgTokenless("Redisson's forceUnlock", "Redisson unlock"))
	}
	s := c.s
	if rs.Kind >= rFairTry {
		return c.runFair(rs, keys, argv)
	}
	if rs.Kind >= rRWRead {
		return c.runRW(rs, keys, argv)
	}
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

// Redisson's other lock kinds — semaphores, count-down latch, spin lock
// — keep counters without a TTL or unmapped per-holder state: the proxy
// refuses them by SHA1 (redisson_refused.tsv: every text of releases
// 3.20.0 to 4.7.0) with an error that says why and names what it serves
// instead. (RReadWriteLock and RFairLock are served: redisson_rw.go,
// redisson_fair.go.)
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

// msgRedissonKind is the refusal of a Redisson script the proxy does not
// serve, with why its kind cannot be served safely over the quorum.
func msgRedissonKind(what string) string {
	why := "it keeps per-master state that no script-by-script translation makes quorum-safe"
	switch {
	case strings.Contains(what, "RedissonFairLock"):
		why = "this release's text was not available to map (RFairLock of releases 3.20.0-3.30.0 and 3.32.0 on is served)"
	case strings.Contains(what, "PermitExpirableSemaphore"):
		why = "its permit count is kept without a TTL, which a master restarted empty loses (the quorum's safety rests on every value expiring within --max-ttl), and its leases end by the client's clock"
	case strings.Contains(what, "Semaphore"):
		why = "its permits have no owner and no lease (a holder that crashes loses its permit for ever) and their count is kept without a TTL, which a master restarted empty loses (the quorum's safety rests on every value expiring within --max-ttl)"
	case strings.Contains(what, "CountDownLatch"):
		why = "its count is kept without a TTL: a master restarted empty loses it, so a quorum could read zero early and release the waiters (the quorum's safety rests on every value expiring within --max-ttl)"
	case strings.Contains(what, "SpinLock"):
		why = "its unlock is not yet mapped (RLock's is)"
	}
	return "ERR redlock proxy: " + what + " is not supported: " + why + ". Through the proxy, use RLock, " +
		"RFencedLock, RReadWriteLock or RFairLock (reentrant, with the watchdog); semaphores and multi-key locks are the engine's " +
		"FairLock, Semaphore and LockAll, and leader election its Election (docs/proxy.md)"
}

// maxRLockName bounds a Redisson lock's name (the masters keep it in the
// hold's value, and names derived from it).
const maxRLockName = 1024

// rNames checks the keys besides the lock that a Redisson script names:
// each is derived from the lock's name as Redisson (prefixName: p + ":" +
// name when it has a brace, else p + ":{" + name + "}") or node-redisson
// (braces added unless it starts with one) derives it — the channel the
// proxy publishes on, the latch it keeps on the masters, the fencing
// token key it answers GET for — so that a client cannot name another lock's.
func (s *Server) rNames(rs *rScript, keys [][]byte) bool {
	if rs.Kind >= rFairTry {
		return s.rFairNames(rs, keys)
	}
	if rs.Kind >= rRWRead {
		return s.rwNames(rs, keys)
	}
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
	derived := func(k []byte, p string) bool { return s.derived(name, k, p) }
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

// derived reports whether key k is derived with prefix p from the lock
// name (without the key prefix) as Redisson's prefixName derives it.
func (s *Server) derived(name string, k []byte, p string) bool {
	got := s.unprefixed(k)
	return (strings.Contains(name, "{") && got == p+":"+name) || (!strings.HasPrefix(name, "{") && got == p+":{"+name+"}")
}
