// Package scripts holds every Lua script of this module as a file, with
// its SHA1 computed when the package loads (conn.NewScript):
//
//   - engine/: the engine's own scripts (release, extend, fencing, their
//     multi-key forms, the marked acquire and its cleanup). A file is the
//     script without its final newline.
//   - proxy/: scripts the proxy sends on its own account (redis-py's
//     adding extend capped at MaxTTL, bsm/redislock's obtains telling
//     "created" from "overwrote" and node-redlock's acquire, both
//     marking what they write, the Redisson holds it keeps on the
//     masters). Same convention.
//   - lib/: the exact text client libraries send (redis-py, bsm/redislock,
//     redsync, node-redlock, redis.io's examples), byte for byte with no
//     newline added or removed: the proxy recognises them by SHA1.
//
// The package is internal: which scripts the engine sends is not part of
// its API.
package scripts

import (
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redlock-dev/redlock/conn"
)

//go:embed engine/*.lua proxy/*.lua lib/*.lua
var files embed.FS

// load returns dir/name.lua as a script, without the final newline.
func load(dir, name string) *conn.Script {
	b, err := files.ReadFile(dir + "/" + name + ".lua")
	if err != nil {
		panic("scripts: missing embedded script " + dir + "/" + name) // a build error, caught by every test
	}
	return conn.NewScript(strings.TrimSuffix(string(b), "\n"))
}

// Engine returns every script of engine/, for a connection to load at
// its handshake: a call whose script a master lacks (NOSCRIPT) is re-sent
// as EVAL only when nothing of its key was sent after it (conn), so an
// engine script first sent on a connection that had not loaded it could
// fail instead (an election's first record right after its lock).
func Engine() []*conn.Script { return slices.Clone(engineAll) }

// engineAll is every script of engine/, read once.
var engineAll = func() []*conn.Script {
	ents, err := files.ReadDir("engine")
	if err != nil {
		panic("scripts: " + err.Error())
	}
	out := make([]*conn.Script, 0, len(ents))
	for _, e := range ents {
		out = append(out, load("engine", strings.TrimSuffix(e.Name(), ".lua")))
	}
	return out
}()

// loadNative is load for a script that does what native says: a
// connection sends it as that command to a server that has it.
func loadNative(dir, name string, native conn.Native) *conn.Script {
	return conn.NewNativeScript(load(dir, name).Source(), native)
}

// MaxFence is the largest fencing token the scripts issue, 2^53 − 1: the
// masters' Lua numbers are doubles, exact up to 2^53. A counter or a
// clock reading (µs since 1970) at it — a clock set to the year 2255 —
// ends fencing on that master with an error rather than repeat tokens.
const MaxFence = 1<<53 - 1

// The engine's scripts, sent with EVALSHA (Release and Extend as the
// server's native command where it has one: conn.Native).
var (
	// Release deletes KEYS[1] if it holds ARGV[1]; returns 1 or 0.
	Release = loadNative("engine", "release", conn.NativeDeleteIfEqual)
	// ReleaseNotify is Release that also publishes KEYS[1] on channel
	// ARGV[2] when it deleted it (engine.Config.ReleaseChannel).
	ReleaseNotify = load("engine", "release_notify")
	// Extend sets the TTL of KEYS[1] to ARGV[2] ms if it holds ARGV[1];
	// returns 1 or 0.
	Extend = loadNative("engine", "extend", conn.NativeExpireIfEqual)

	// FenceAcquire is the fenced acquire: SET KEYS[1] ARGV[1] NX PX
	// ARGV[2]; when it set the key, it advances the master's fencing
	// counter KEYS[2] to max(counter, the master's clock in microseconds)
	// + 1 and returns it; nil when the key exists. The clock floor makes a
	// counter lost in a restart start again above every number issued
	// before the restart (docs/safety.md, "Fencing tokens"). When that
	// maximum is 2^53 − 1 or more it writes nothing and returns an error:
	// Lua's numbers are doubles, past 2^53 one more is the same number, and
	// tokens would repeat (MaxFence).
	//
	// With a third key, the attempt's mark (AcquireMarked), it also sets
	// the mark to ARGV[3] for ARGV[2] ms where it set the key.
	FenceAcquire = load("engine", "fence_acquire")
	// AcquireMarked is SET KEYS[1] ARGV[1] NX PX ARGV[2] that, where it
	// set the key, also sets the key's mark KEYS[2] (AppendMark) to the
	// attempt's nonce ARGV[3] for the same ARGV[2] ms; it replies as SET
	// NX does (+OK, or nil when the key exists). The engine sends it for an
	// acquisition with the caller's token (engine.WithToken: the proxy's
	// SET NX PX), whose cleanup is CleanupMarked: a later attempt with the
	// same token — a client's retry while this one is still under way —
	// takes the mark over where it creates the key, and this attempt's
	// cleanup then leaves that key alone.
	AcquireMarked = load("engine", "acquire_marked")
	// CleanupMarked undoes a failed acquisition whose writes were marked
	// (AcquireMarked, FenceAcquire with a mark, the proxy's BsmObtainV094/
	// V010 and NodeRedlockAcquire): KEYS are the lock keys then their
	// marks (the same count); where a key's mark is still the attempt's
	// nonce ARGV[2] it deletes the mark, and the key if it holds ARGV[1];
	// it returns how many keys it deleted. A key whose mark a later
	// attempt took over is that attempt's, the same value or not.
	CleanupMarked = load("engine", "cleanup_marked")
	// FenceRaise is the fencing write-back: if the lock key KEYS[1] holds
	// the token ARGV[1], it raises the fencing counter KEYS[2] to ARGV[2]
	// if it is lower (or missing) and returns 1; otherwise it returns 0 and
	// writes nothing. A master that answers 1 held the lock when the raise
	// ran, so it grants the key to a later holder only after the raise
	// (docs/safety.md, "Fencing tokens").
	FenceRaise = load("engine", "fence_raise")

	// ReleaseMulti is Release over n keys in one call (KEYS[i], token
	// ARGV[i]); it returns an array of n integers. The engine merges
	// releases queued for the same write into it (engine.Config.MergeMax).
	ReleaseMulti = load("engine", "release_multi")
	// HandOff is a release and the next acquire in one call: if KEYS[1]
	// holds the holder's token ARGV[1] it sets KEYS[1] to the waiter's
	// token ARGV[2] for ARGV[3] ms and returns 1 (released and taken); if
	// KEYS[1] is missing it sets it the same way and returns 2 (nothing to
	// release, taken: SET NX); otherwise it writes nothing and returns 0
	// (another holder's: neither). engine's FIFO hand-off (wait.go).
	HandOff = load("engine", "handoff")
	// ReleaseNotifyMulti is ReleaseNotify over n keys (token ARGV[2i-1],
	// channel ARGV[2i]).
	ReleaseNotifyMulti = load("engine", "release_notify_multi")
	// ExtendMulti is Extend over n keys (token ARGV[2i-1], TTL ARGV[2i] ms).
	ExtendMulti = load("engine", "extend_multi")

	// Reenter is a Reentrant's re-acquisition: if KEYS[1] holds ARGV[1],
	// it raises the key's TTL to ARGV[2] ms when it is lower (never
	// lowers it) and returns 1; otherwise 0.
	Reenter = load("engine", "reenter")
	// Holder reads KEYS[1]: {value, PTTL} in one step, nil when the key
	// does not exist (engine.Holder's quorum read). With KEYS[2], an
	// RWLock's readers (KEYS[1]..":readers"), it reads them in the same
	// step: {value or nil, PTTL, {token, ms left or -1 (+inf), …}, count}
	// with the 1,024 longest-lived unexpired readers on the master's clock
	// (before Redis 6.2, without ZRANGE … REV: the soonest-expiring) and
	// their count (the set's ZCARD, when 1,024 were read); a readers key
	// of another type has none; nil when there is neither a value nor a
	// reader.
	Holder = load("engine", "holder")

	// The election's scripts (engine.Election). KEYS are the election's
	// lock key (a fenced lock's string: the leader's token) and its leader
	// record (redlock:leader:{key}), a hash {token, term, seq, value} that
	// shares the lock key's hash tag.
	//
	// ElectionProclaim (ARGV token, term, seq, value) writes the record
	// when the lock key holds ARGV[1] and the record is not already this
	// token's with a seq at least ARGV[3] (a later proclamation stands);
	// returns 1 where the key holds the token, else 0.
	ElectionProclaim = load("engine", "election_proclaim")
	// ElectionLeader reads both: nil when the lock key does not exist,
	// {token, PTTL} when the record is not the holder's (not published
	// yet), else {token, PTTL, term, seq, value}.
	ElectionLeader = load("engine", "election_leader")
	// ElectionResign deletes the record KEYS[1] if it is ARGV[1]'s (the
	// resigning leader's token); returns 1 or 0.
	ElectionResign = load("engine", "election_resign")

	// The fair lock's scripts (engine.FairLock). KEYS are the lock key (a
	// plain lock's string), the waiters' queue (a sorted set of waiter
	// ids scored by ticket), their expiries (ids scored by the master's
	// clock in ms) and the ticket counter, all sharing the lock key's hash
	// tag; FairTicket and FairRegister take the counter first.
	//
	// FairTicket (KEYS counter; ARGV counter TTL ms) advances the counter
	// to max(counter, the master's clock in µs) + 1 and returns it.
	FairTicket = load("engine", "fair_ticket")
	// FairRegister (KEYS counter, queue, expiries; ARGV id, ticket, entry
	// TTL ms) raises the counter to the ticket and queues id with it.
	FairRegister = load("engine", "fair_register")
	// FairAcquire (KEYS lock, queue, expiries, counter; ARGV token, TTL
	// ms, id, ticket, entry TTL ms) drops expired waiters, queues (or
	// refreshes, with the counter's TTL) id unless it is "", and sets
	// the lock key to the token — returning 1 — only when the key is free
	// and id is the head of the queue (or the queue is empty); else 0.
	FairAcquire = load("engine", "fair_acquire")
	// FairLeave (KEYS lock, queue, expiries, counter; ARGV id) removes id
	// from the queue, and the counter with the last waiter (no ticket
	// taken before then is owed an order: its waiter has not arrived).
	FairLeave = load("engine", "fair_leave")

	// The read-write lock's scripts. KEYS are the writer key (a plain
	// lock's string, token as value), the readers' sorted set (member:
	// token, score: its expiry in the master's milliseconds) and the
	// waiting writer's intent key; every script reads the master's TIME.
	//
	// ReadAcquire (KEYS readers, the writer key + ":readers"; ARGV token,
	// ttl ms) returns 0 while a writer holds the key or waits for it (the
	// writer and intent keys are derived from KEYS[1], so that the call
	// names one key and merges; they share its hash tag), else drops
	// expired readers, adds ARGV[1] expiring in ttl, keeps the set's TTL at
	// least ttl and returns 1.
	ReadAcquire = load("engine", "read_acquire")
	// ReadAcquireMulti is ReadAcquire over n keys (token ARGV[2i-1], TTL
	// ARGV[2i]); the engine merges read acquisitions queued for the same
	// write.
	ReadAcquireMulti = load("engine", "read_acquire_multi")
	// ReadRelease (KEYS readers; ARGV token) removes the reader: 1 or 0.
	ReadRelease = load("engine", "read_release")
	// ReadReleaseMulti is ReadRelease over n keys (KEYS[i], token ARGV[i]);
	// the engine merges readers' releases queued for the same write.
	ReadReleaseMulti = load("engine", "read_release_multi")
	// ReadExtend (KEYS readers; ARGV token, ttl ms) moves an unexpired
	// reader's expiry to now + ttl: 1, or 0 when it holds none.
	ReadExtend = load("engine", "read_extend")
	// WriteAcquire (KEYS writer, readers, intent; ARGV token, ttl ms,
	// waiter id or "") returns 0 while the writer key exists; while
	// unexpired readers hold it, it returns 0 and — for a waiting writer
	// (ARGV[3] set) — sets or refreshes the intent key to its id for ttl,
	// which makes new readers wait; otherwise it sets the writer key to the
	// token for ttl, deletes its own intent and returns 1.
	WriteAcquire = load("engine", "write_acquire")
)

// The proxy's own scripts.
var (
	// RedisPyExtendAdd is what the proxy sends for redis-py's extend in its
	// adding mode (ARGV[3] "0": new TTL = what is left + ARGV[2]): the
	// same compare, with the sum capped at ARGV[3], the engine's MaxTTL, so
	// that no grant path leaves a key with a TTL beyond the restart
	// quarantine period. The reply contract (1/0) is redis-py's.
	RedisPyExtendAdd = load("proxy", "redispy_extend_add")
	// BsmObtainV094 and BsmObtainV010 are what the proxy sends for
	// bsm/redislock's obtain scripts (v0.9.4, single key; v0.10, several
	// keys): the same writes — SET NX PX, or, where every key holds a
	// value that starts with the first ARGV[2] bytes of the token ARGV[1],
	// an overwrite with it for ARGV[3] ms (the caller re-obtaining its own
	// lock) — replying 1 when they created the keys, 2 when they
	// overwrote the caller's own and 0 when they wrote nothing, so that
	// the cleanup of a failed obtain deletes only what it created. KEYS
	// are the lock keys, then one mark per key (the same count): where
	// they write, they set each key's mark to the attempt's nonce ARGV[4]
	// for ARGV[3] ms, so that a later attempt with the same value — the
	// client's retry of an attempt still under way — takes the marks over
	// (CleanupMarked).
	BsmObtainV094 = load("proxy", "bsm_obtain_v094")
	BsmObtainV010 = load("proxy", "bsm_obtain_v010")
	// NodeRedlockAcquire is what the proxy sends for node-redlock's
	// acquire (v5) and lock (v4) scripts: the same writes — where none of
	// the lock keys exists, each set to ARGV[1] for ARGV[2] ms — that also
	// set each key's mark (KEYS are the lock keys, then one mark per key)
	// to the attempt's nonce, the last ARGV, for ARGV[2] ms; it replies 1
	// when it set the keys, 0 when it wrote nothing (the proxy answers the
	// client with node-redlock's #KEYS). Its cleanup is CleanupMarked.
	NodeRedlockAcquire = load("proxy", "node_redlock_acquire")
	// RedsyncTouchSetNXMarked is what the proxy sends for redsync's
	// touch-with-setnx (an extension that sets the key where it is
	// missing): the same writes — where KEYS[1] holds ARGV[1], PEXPIRE it
	// to ARGV[2] ms and reply what PEXPIRE does; where it is missing, set
	// it to ARGV[1] for ARGV[2] ms and reply 1; else 0 — that, where it
	// sets the key, also sets the key's mark KEYS[2] to a nonce of the
	// call, ARGV[3], for ARGV[2] ms: a writer of the caller's value, it
	// takes the mark over from an earlier attempt of that value still
	// under way, whose cleanup (CleanupMarked) then leaves the key alone
	// (found by the review of the marks, issue #46).
	RedsyncTouchSetNXMarked = load("proxy", "redsync_touch_setnx_marked")

	// The Redisson scripts (proxy/internal/redisson/redisson.go). Each master holds a
	// Redisson lock as a plain string whose value carries the hold:
	// "<owner>|<kind R or F>|<hold count>|<random hex>|<fencing token>",
	// a fresh random part on every write, so that every value is unique to
	// the attempt that wrote it and every change is a compare-and-set.

	// RedissonAcquire (KEYS lock[, fencing counter]; ARGV value, lease ms)
	// is SET NX PX: {1} when it set the key ({1, counter} with the
	// counter, advanced as FenceAcquire does, with its error at 2^53),
	// else {0, value, PTTL}.
	RedissonAcquire = load("proxy", "redisson_acquire")
	// RedissonFence (KEYS lock, fencing counter; ARGV value, token, value
	// with the token): if the lock holds the value with a TTL, raises the
	// counter to the token (FenceRaise), stores the value with the token
	// (same PTTL) and returns 1; else 0 and writes nothing.
	RedissonFence = load("proxy", "redisson_fence")
	// RedissonCAS (KEYS lock[, latch]; ARGV expected, new value or "" to
	// delete, ms, latch value or "" to delete it, latch ms[, "exact"]): if
	// the lock holds the expected value, replaces it (its PTTL raised to
	// ms when lower, never lowered — or set to ms with "exact", as
	// Redisson's nested unlock resets the lease; a value without a TTL is
	// never written) or deletes it, sets or deletes the latch, and returns
	// 1; else 0 and writes nothing. With a latch value, a change is made
	// at most once per master per latch (one client request): where the
	// latch is already set, it writes nothing and returns 1 if the lock
	// holds the new value (or none, for a delete) under the same latch
	// value — a duplicate run of the same request — else 0.
	RedissonCAS = load("proxy", "redisson_cas")
	// RedissonRead (KEYS lock[, latch]) returns {value or "", PTTL[,
	// latch value or ""]}.
	RedissonRead = load("proxy", "redisson_read")
	// RedissonRenew (KEYS lock; ARGV owner or "", lease ms, hex owners...):
	// if the lock's value is an RLock hold of exactly that owner, PEXPIRE
	// lease and 1; if it is a read-write lock with an entry of one of the
	// hex-encoded owners, its PTTL raised to lease (never lowered: the
	// other holders' leases are in it) and 1; else 0.
	RedissonRenew = load("proxy", "redisson_renew")
	// RedissonFairRead (KEYS lock, queue, expiries — an engine FairLock's;
	// ARGV waiter id or "") drops expired waiters (as FairAcquire does) and
	// returns {lock value or "", its PTTL, the waiter's ticket if it is
	// queued, else "", the queue's head, else "", the ms left of the
	// head's place}.
	RedissonFairRead = load("proxy", "redisson_fair_read")
	// RedissonCleanup (KEYS lock; ARGV values...) deletes the lock if it
	// holds one of the values (all unique to one attempt): 1 or 0.
	RedissonCleanup = load("proxy", "redisson_cleanup")
)

// MarkPrefix begins the names of the marks the marked acquisitions write
// beside each key (AcquireMarked, CleanupMarked). Clients of the proxy may
// not name such keys.
const MarkPrefix = "redlock:obtain:"

// AppendMark appends the name of key's mark to dst: MarkPrefix{tag}:key,
// in key's slot (tag: conn.HashTag(key), with no brace, so the name
// parses back to one tag and one key: two keys never share a mark), or
// MarkPrefix#key when the hashed part is empty or has a brace. ok is
// false for the second form on a Redis Cluster member (cluster), where
// that mark could not share its key's slot; dst is then returned as it is.
func AppendMark(dst []byte, key string, cluster bool) (out []byte, ok bool) {
	n, tag, ok := markLen(key, cluster)
	if !ok {
		return dst, false
	}
	dst = slices.Grow(dst, n)
	dst = append(dst, MarkPrefix...)
	if tag == "" {
		dst = append(dst, '#')
		return append(dst, key...), true
	}
	dst = append(dst, '{')
	dst = append(dst, tag...)
	dst = append(dst, "}:"...)
	return append(dst, key...), true
}

// AppendBulkMark appends key's mark (AppendMark) as a RESP bulk string,
// without allocating; ok as AppendMark's.
func AppendBulkMark(dst []byte, key string, cluster bool) (out []byte, ok bool) {
	n, _, ok := markLen(key, cluster)
	if !ok {
		return dst, false
	}
	dst = append(dst, '$')
	dst = strconv.AppendInt(dst, int64(n), 10)
	dst = append(dst, "\r\n"...)
	dst, _ = AppendMark(dst, key, cluster)
	return append(dst, "\r\n"...), true
}

// Markable reports whether key can have a mark (AppendMark's ok).
func Markable(key string, cluster bool) bool {
	_, _, ok := markLen(key, cluster)
	return ok
}

// markLen is the length of key's mark name and the tag it carries (""
// for the MarkPrefix#key form).
func markLen(key string, cluster bool) (n int, tag string, ok bool) {
	tag = conn.HashTag(key)
	if tag == "" || strings.ContainsAny(tag, "{}") {
		if cluster {
			return 0, "", false
		}
		return len(MarkPrefix) + 1 + len(key), "", true
	}
	return len(MarkPrefix) + 1 + len(tag) + 2 + len(key), tag, true
}

// Lib returns the exact text of the client-library script lib/name.lua,
// e.g. "redis-py-release" or "bsm-redislock-v0.10.0-obtain". It panics on
// an unknown name (a programming error inside this module).
func Lib(name string) string {
	b, err := files.ReadFile("lib/" + name + ".lua")
	if err != nil {
		panic("scripts: missing embedded library script " + name)
	}
	return string(b)
}

// LibNames returns the names Lib accepts, sorted.
func LibNames() []string {
	ents, _ := files.ReadDir("lib")
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, strings.TrimSuffix(e.Name(), ".lua"))
	}
	return names
}

// callRE finds the command a line of Lua calls.
var callRE = regexp.MustCompile(`redis\.p?call\(\s*['"]([A-Za-z_|]+)['"]`)

// bySHA maps the SHA1 of every embedded script, as sent (with and without
// its final newline), to its text.
var bySHA = sync.OnceValue(func() map[string]string {
	m := map[string]string{}
	for _, dir := range []string{"engine", "proxy", "lib"} {
		ents, _ := files.ReadDir(dir)
		for _, e := range ents {
			b, err := files.ReadFile(dir + "/" + e.Name())
			if err != nil {
				continue
			}
			for _, src := range []string{string(b), strings.TrimSuffix(string(b), "\n")} {
				m[SHA1([]byte(src))] = src
			}
		}
	}
	return m
})

// SHA1 returns the SHA1 of a script's text in lower-case hex: the name
// EVALSHA, SCRIPT EXISTS and a server's errors give it.
func SHA1(src []byte) string {
	sum := sha1.Sum(src)
	return hex.EncodeToString(sum[:])
}

// CommandAt returns the command (upper case) that line (1-based) of the
// script whose SHA1 is sha calls, "" when sha is not one of this
// package's scripts or the line calls none; when the line calls several,
// each once, joined by " or " ("GET or PEXPIRE": the server did not say
// which). A server's error about a script names the script's SHA1 and
// line ("script: <sha>, on @user_script:6"), not the command it refused.
func CommandAt(sha string, line int) string {
	src, ok := bySHA()[strings.ToLower(sha)]
	if !ok || line < 1 {
		return ""
	}
	lines := strings.Split(src, "\n")
	if line > len(lines) {
		return ""
	}
	var cmds []string
	for _, m := range callRE.FindAllStringSubmatch(lines[line-1], -1) {
		if c := strings.ToUpper(m[1]); !slices.Contains(cmds, c) {
			cmds = append(cmds, c)
		}
	}
	return strings.Join(cmds, " or ")
}
