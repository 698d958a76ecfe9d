package redisson

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

// Kind is what a recognised Redisson script does.
type Kind uint8

const (
	KindTryLock            Kind = iota + 1 // KEYS lock; ARGV lease, owner
	KindFencedTryLock                      // KEYS lock, token key; ARGV lease, owner
	KindFencedTryLockToken                 // the same, replying {-1, token} / {pttl, -1}
	KindUnlock                             // KEYS lock, channel[, latch]; ARGV "0", lease, owner[, publish cmd[, latch ms]]
	KindForceUnlock                        // KEYS lock, channel; ARGV "0"[, publish cmd]
	KindRenew                              // KEYS lock...; ARGV lease, owner... (one owner per key)

	// RReadWriteLock (redisson_rw.go).
	KindRWRead        // KEYS lock, timeout prefix; ARGV lease, owner, owner:write
	KindRWWrite       // KEYS lock; ARGV lease, owner:write
	KindRWUnlockRead  // KEYS lock, channel, timeout prefix, key prefix[, latch]; ARGV "0", owner[, publish cmd[, latch ms]]
	KindRWUnlockWrite // KEYS lock, channel[, latch]; ARGV "1", lease, owner:write[, publish cmd[, latch ms]]
	KindRWForceRead   // KEYS lock, channel; ARGV "0"[, publish cmd]
	KindRWForceWrite  // KEYS lock, channel; ARGV "1"[, publish cmd]
	KindRWIsLocked    // KEYS lock (the read lock's isLocked)
	KindRWRenew       // KEYS lock, key prefix; ARGV lease, owner (3.20.0-3.43.0)
	KindRWRenewTask   // KEYS (lock, key prefix)...; ARGV lease, owner per lock (3.44.0-4.3.1)
	KindRWRenewTask44 // KEYS (lock, key prefix)...; ARGV lease, (count, owners...) per lock (4.4.0+)

	// RFairLock (redisson_fair.go).
	KindFairTry    // KEYS lock, queue, timeouts; ARGV lease, owner, now, wait (tryLock(): no queue)
	KindFairWait   // KEYS lock, queue, timeouts; ARGV lease, owner, wait, now (tryLock(wait), lock())
	KindFairUnlock // KEYS lock, queue, timeouts, channel[, latch]; ARGV "0", lease, owner, now[, publish cmd[, latch ms]]
	KindFairForce  // KEYS lock, queue, timeouts, channel; ARGV "0", now[, publish cmd]
	KindFairLeave  // KEYS queue, timeouts; ARGV owner, wait (acquireFailed)
)

// Script is one Redisson script text the proxy recognises.
type Script struct {
	Name string
	File string // internal/scripts/lib file, named by the first release that sent it
	Kind Kind
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

// Table lists the Redisson scripts (read-only), each version's text byte for byte
// (copied from redisson/redisson, the Java string evaluated; the file
// names the first release that sent it, docs/proxy.md the last).
var Table = []Script{
	{Name: "Redisson tryLock (3.19.0+)", File: "redisson-3.19.0-tryLock", Kind: KindTryLock, Keys: 1, Argc: 2},
	{Name: "Redisson tryLock (3.12.3-3.18.1)", File: "redisson-3.12.3-tryLock", Kind: KindTryLock, Keys: 1, Argc: 2},
	{Name: "Redisson tryLock (3.12.0-3.12.2)", File: "redisson-3.12.0-tryLock", Kind: KindTryLock, Keys: 1, Argc: 2},
	{Name: "Redisson RFencedLock tryLock (3.19.0+)", File: "redisson-3.19.0-fencedTryLock", Kind: KindFencedTryLock, Keys: 2, Argc: 2},
	{Name: "Redisson RFencedLock tryLockAndGetToken (3.19.0+)", File: "redisson-3.19.0-fencedTryLockAndGetToken", Kind: KindFencedTryLockToken, Keys: 2, Argc: 2},
	{Name: "Redisson unlock (3.24.0+)", File: "redisson-3.24.0-unlock", Kind: KindUnlock, Keys: 3, Argc: 5, LatchArg: 4},
	{Name: "Redisson unlock (3.22.0-3.23.5)", File: "redisson-3.22.0-unlock", Kind: KindUnlock, Keys: 2, Argc: 4},
	{Name: "Redisson unlock (3.12.0-3.21.3)", File: "redisson-3.12.0-unlock", Kind: KindUnlock, Keys: 2, Argc: 3},
	{Name: "Redisson forceUnlock (3.22.0+)", File: "redisson-3.22.0-forceUnlock", Kind: KindForceUnlock, Keys: 2, Argc: 2},
	{Name: "Redisson forceUnlock (3.12.0-3.21.3)", File: "redisson-3.12.0-forceUnlock", Kind: KindForceUnlock, Keys: 2, Argc: 1},
	{Name: "Redisson watchdog renewal, batched (3.44.0+)", File: "redisson-3.44.0-renewLocksBatch", Kind: KindRenew},
	{Name: "Redisson watchdog renewal (3.12.0-3.43.0)", File: "redisson-3.12.0-renewExpiration", Kind: KindRenew, Keys: 1, Argc: 2},

	// npm node-redisson 1.0.4 (a Node port; its own texts, Pub/Sub mode:
	// the unlock's latch TTL is ARGV[4], the publish is literal).
	{Name: "node-redisson 1.0.4 tryLock", File: "node-redisson-1.0.4-rTryLockInner", Kind: KindTryLock, Keys: 1, Argc: 2},
	{Name: "node-redisson 1.0.4 unlock", File: "node-redisson-1.0.4-rUnlockInner", Kind: KindUnlock, Keys: 3, Argc: 4, LatchArg: 3},
	{Name: "node-redisson 1.0.4 renewal", File: "node-redisson-1.0.4-rRenewExpiration", Kind: KindRenew, Keys: 1, Argc: 2},
	{Name: "node-redisson 1.0.4 forceUnlock", File: "node-redisson-1.0.4-rForceUnlock", Kind: KindForceUnlock, Keys: 2, Argc: 1},

	// RReadWriteLock, releases 3.20.0 and later (redisson_rw.go). Its
	// write lock's watchdog sends RLock's renewal (above) for the owner
	// <id>:<thread>:write.
	{Name: "Redisson RReadWriteLock readLock tryLock (3.20.0+)", File: "redisson-3.20.0-rwReadTryLock", Kind: KindRWRead, Keys: 2, Argc: 3},
	{Name: "Redisson RReadWriteLock writeLock tryLock (3.20.0+)", File: "redisson-3.20.0-rwWriteTryLock", Kind: KindRWWrite, Keys: 1, Argc: 2},
	{Name: "Redisson RReadWriteLock readLock unlock (3.44.0+)", File: "redisson-3.44.0-rwReadUnlock", Kind: KindRWUnlockRead, Keys: 5, Argc: 4, LatchKey: 4, LatchArg: 3, FreeNil: true},
	{Name: "Redisson RReadWriteLock readLock unlock (3.24.0-3.43.0)", File: "redisson-3.24.0-rwReadUnlock", Kind: KindRWUnlockRead, Keys: 5, Argc: 4, LatchKey: 4, LatchArg: 3},
	{Name: "Redisson RReadWriteLock readLock unlock (3.22.0-3.23.5)", File: "redisson-3.22.0-rwReadUnlock", Kind: KindRWUnlockRead, Keys: 4, Argc: 3},
	{Name: "Redisson RReadWriteLock readLock unlock (3.20.0-3.21.3)", File: "redisson-3.20.0-rwReadUnlock", Kind: KindRWUnlockRead, Keys: 4, Argc: 2},
	{Name: "Redisson RReadWriteLock writeLock unlock (3.44.0+)", File: "redisson-3.44.0-rwWriteUnlock", Kind: KindRWUnlockWrite, Keys: 3, Argc: 5, LatchKey: 2, LatchArg: 4, FreeNil: true},
	{Name: "Redisson RReadWriteLock writeLock unlock (3.24.0-3.43.0)", File: "redisson-3.24.0-rwWriteUnlock", Kind: KindRWUnlockWrite, Keys: 3, Argc: 5, LatchKey: 2, LatchArg: 4},
	{Name: "Redisson RReadWriteLock writeLock unlock (3.22.0-3.23.5)", File: "redisson-3.22.0-rwWriteUnlock", Kind: KindRWUnlockWrite, Keys: 2, Argc: 4},
	{Name: "Redisson RReadWriteLock writeLock unlock (3.20.0-3.21.3)", File: "redisson-3.20.0-rwWriteUnlock", Kind: KindRWUnlockWrite, Keys: 2, Argc: 3},
	{Name: "Redisson RReadWriteLock readLock forceUnlock (3.22.0+)", File: "redisson-3.22.0-rwReadForceUnlock", Kind: KindRWForceRead, Keys: 2, Argc: 2},
	{Name: "Redisson RReadWriteLock readLock forceUnlock (3.20.0-3.21.3)", File: "redisson-3.20.0-rwReadForceUnlock", Kind: KindRWForceRead, Keys: 2, Argc: 1},
	{Name: "Redisson RReadWriteLock writeLock forceUnlock (3.22.0+)", File: "redisson-3.22.0-rwWriteForceUnlock", Kind: KindRWForceWrite, Keys: 2, Argc: 2},
	{Name: "Redisson RReadWriteLock writeLock forceUnlock (3.20.0-3.21.3)", File: "redisson-3.20.0-rwWriteForceUnlock", Kind: KindRWForceWrite, Keys: 2, Argc: 1},
	{Name: "Redisson RReadWriteLock readLock isLocked (3.24.0+)", File: "redisson-3.24.0-rwReadIsLocked", Kind: KindRWIsLocked, Keys: 1, Argc: 0},
	{Name: "Redisson RReadWriteLock readLock renewal (3.20.0-3.43.0)", File: "redisson-3.20.0-rwReadRenew", Kind: KindRWRenew, Keys: 2, Argc: 2},
	{Name: "Redisson RReadWriteLock readLock renewal, batched (4.4.0+)", File: "redisson-4.4.0-rwReadLockTask", Kind: KindRWRenewTask44},
	{Name: "Redisson RReadWriteLock readLock renewal, batched (4.0.0-4.3.1)", File: "redisson-4.0.0-rwReadLockTask", Kind: KindRWRenewTask},
	{Name: "Redisson RReadWriteLock readLock renewal, batched (3.44.0-3.52.0)", File: "redisson-3.44.0-rwReadLockTask", Kind: KindRWRenewTask},

	// RFairLock, releases 3.20.0 and later but 3.31.0's waiting tryLock
	// (redisson_fair.go). Its renewal is RLock's.
	{Name: "Redisson RFairLock tryLock (3.31.0+)", File: "redisson-3.31.0-fairTryLock", Kind: KindFairTry, Keys: 3, Argc: 4},
	{Name: "Redisson RFairLock tryLock (3.20.0-3.30.0)", File: "redisson-3.20.0-fairTryLock", Kind: KindFairTry, Keys: 3, Argc: 4},
	{Name: "Redisson RFairLock waiting tryLock (3.45.0+)", File: "redisson-3.45.0-fairTryLockWait", Kind: KindFairWait, Keys: 3, Argc: 4},
	{Name: "Redisson RFairLock waiting tryLock (3.32.0-3.44.0)", File: "redisson-3.32.0-fairTryLockWait", Kind: KindFairWait, Keys: 3, Argc: 4},
	{Name: "Redisson RFairLock waiting tryLock (3.20.0-3.30.0)", File: "redisson-3.20.0-fairTryLockWait", Kind: KindFairWait, Keys: 3, Argc: 4},
	{Name: "Redisson RFairLock unlock (3.31.0+)", File: "redisson-3.31.0-fairUnlock", Kind: KindFairUnlock, Keys: 5, Argc: 6, LatchKey: 4, LatchArg: 5},
	{Name: "Redisson RFairLock unlock (3.24.0-3.30.0)", File: "redisson-3.24.0-fairUnlock", Kind: KindFairUnlock, Keys: 5, Argc: 6, LatchKey: 4, LatchArg: 5},
	{Name: "Redisson RFairLock unlock (3.22.0-3.23.5)", File: "redisson-3.22.0-fairUnlock", Kind: KindFairUnlock, Keys: 4, Argc: 5},
	{Name: "Redisson RFairLock unlock (3.20.0-3.21.3)", File: "redisson-3.20.0-fairUnlock", Kind: KindFairUnlock, Keys: 4, Argc: 4},
	{Name: "Redisson RFairLock forceUnlock (3.31.0+)", File: "redisson-3.31.0-fairForceUnlock", Kind: KindFairForce, Keys: 4, Argc: 3},
	{Name: "Redisson RFairLock forceUnlock (3.22.0-3.30.0)", File: "redisson-3.22.0-fairForceUnlock", Kind: KindFairForce, Keys: 4, Argc: 3},
	{Name: "Redisson RFairLock forceUnlock (3.20.0-3.21.3)", File: "redisson-3.20.0-fairForceUnlock", Kind: KindFairForce, Keys: 4, Argc: 2},
	{Name: "Redisson RFairLock acquireFailed (3.20.0+)", File: "redisson-3.20.0-fairAcquireFailed", Kind: KindFairLeave, Keys: 2, Argc: 2},
}

// BySHA indexes Table by SHA1 (read-only).
var BySHA = func() map[string]*Script {
	m := map[string]*Script{}
	for i := range Table {
		rs := &Table[i]
		rs.SHA = scripts.SHA1([]byte(scripts.Lib(rs.File)))
		m[rs.SHA] = rs
	}
	return m
}()

// Names Redisson derives from a lock's name (RedissonObject.prefixName):
// the unlock latch, and TokenPrefix, an RFencedLock's token key (whose
// GET [Locks.Token] answers).
const (
	rLatchPrefix = "redisson_unlock_latch:"
	TokenPrefix  = "redisson_lock_token:"
)

// fits reports whether keys and argv have the shape Redisson sends.
func (rs *Script) fits(keys, argv [][]byte) bool {
	if rs.Kind >= KindFairTry {
		return rs.rFairFits(keys, argv)
	}
	if rs.Kind >= KindRWRead {
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
	case KindTryLock, KindFencedTryLock, KindFencedTryLockToken:
		return validOwner(argv[1]) && isMillis(argv[0])
	case KindUnlock:
		return validOwner(argv[2]) && isMillis(argv[1]) && (rs.LatchArg == 0 || isMillis(argv[rs.LatchArg]))
	case KindRenew:
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

// Serve serves a recognised Redisson script (keys already carry the
// proxy's key prefix): the locks the command is ordered on (after the
// connection's earlier commands on them) and its Run, or a refusal (an
// error reply's text) when the call is not in a shape Redisson sends.
func (s *Locks) Serve(rs *Script, keys, argv [][]byte) (locks [][]byte, run Run, refusal string) {
	if !rs.fits(keys, argv) || !s.rNames(rs, keys) {
		return nil, nil, "ERR redlock proxy: " + rs.Name + " called in a shape Redisson never sends (or a lock name over 1024 bytes, or a channel, latch or token key not derived from the lock's name)"
	}
	if (rs.Kind == KindForceUnlock || rs.Kind == KindRWForceRead || rs.Kind == KindRWForceWrite || rs.Kind == KindFairForce) && !s.cfg.AllowTokenlessWrites {
		return nil, nil, s.cfg.Replies.Tokenless("Redisson's forceUnlock", "Redisson unlock")
	}
	if rs.Kind >= KindFairTry {
		locks, run = s.serveFair(rs, keys, argv)
		return locks, run, ""
	}
	if rs.Kind >= KindRWRead {
		locks, run = s.serveRW(rs, keys, argv)
		return locks, run, ""
	}
	return keys, func(ctx context.Context, dst []byte) []byte {
		switch rs.Kind {
		case KindTryLock, KindFencedTryLock, KindFencedTryLockToken:
			return s.rTryLock(ctx, dst, rs, keys, argv)
		case KindUnlock:
			return s.rUnlock(ctx, dst, rs, keys, argv)
		case KindForceUnlock:
			return s.rForceUnlock(ctx, dst, keys)
		}
		return s.rRenew(ctx, dst, rs, keys, argv)
	}, ""
}

func millis(b []byte) time.Duration {
	n, _ := resp.ParseInt(b)
	return time.Duration(n) * time.Millisecond
}

// unprefixed returns a key without the proxy's key prefix (a Redisson
// channel is named by the client, which subscribes without it).
func (s *Locks) unprefixed(k []byte) string {
	return strings.TrimPrefix(string(k), s.cfg.KeyPrefix)
}

// LatchKeys reports whether every key is a Redisson unlock latch (a DEL
// of them is [Locks.DelLatches]).
func (s *Locks) LatchKeys(keys [][]byte) bool {
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

// Refused maps a refused script's SHA1 to "<class>.<method> (first-last)"
// (read-only); [RefusedMsg] is the refusal a client gets.
var Refused = func() map[string]string {
	m := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(rRefusedTSV))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 5 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if BySHA[f[0]] != nil {
			panic("proxy: a served Redisson script is listed as refused: " + f[2])
		}
		m[f[0]] = f[2] + " (Redisson " + f[3] + "-" + f[4] + ", " + f[1] + ")"
	}
	return m
}()

// RefusedMsg is the refusal of a Redisson script the proxy does not
// serve, with why its kind cannot be served safely over the quorum.
func RefusedMsg(what string) string {
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
func (s *Locks) rNames(rs *Script, keys [][]byte) bool {
	if rs.Kind >= KindFairTry {
		return s.rFairNames(rs, keys)
	}
	if rs.Kind >= KindRWRead {
		return s.rwNames(rs, keys)
	}
	if rs.Kind == KindRenew {
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
	case KindFencedTryLock, KindFencedTryLockToken:
		return derived(keys[1], "redisson_lock_token")
	case KindUnlock, KindForceUnlock:
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
func (s *Locks) derived(name string, k []byte, p string) bool {
	got := s.unprefixed(k)
	return (strings.Contains(name, "{") && got == p+":"+name) || (!strings.HasPrefix(name, "{") && got == p+":{"+name+"}")
}
