package lockcmds

import (
	_ "embed"
	"fmt"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/resp"
)

// ScriptOp is the quorum operation a recognised script maps to.
type ScriptOp uint8

const (
	OpAcquire ScriptOp = iota + 1 // creates keys: quorum + validity, partial grants released on failure
	OpExtend                      // moves TTLs of held keys: quorum + validity, nothing released on failure
	OpRelease                     // deletes held keys: quorum
	OpPTTL                        // reads the remaining TTL: the value a quorum guarantees
)

// contract is the reply shape a library expects from its script.
type contract uint8

const (
	replyInt10    contract = iota + 1 // :1 success, :0 failure
	replyOKNil                        // +OK success, nil failure
	replyNKeys                        // :#KEYS success, :0 failure (node-redlock)
	replyRedsync                      // redsync delete: :1 released, :-1 key missing, :0 held by another
	replyPTTLNeg3                     // bsm v0.9.4 pttl: ms, or :-3 when not held
	replyPTTLNil                      // bsm v0.10 pttl: ms, or nil when not held
)

// LibScript is one script a client library sends, with its mapping.
type LibScript struct {
	Name     string // "redis-py release"
	Source   string // exact text
	SHA      string // lower-case hex SHA1 of Source
	Op       ScriptOp
	Reply    contract
	MultiKey bool // accepts several KEYS (all-or-nothing per master)
	TokenArg int  // ARGV index (0-based) of the lock value
	TTLArg   int  // ARGV index of the TTL in ms, -1 if none
	// PrefixArg is the ARGV index (0 = none: ARGV[0] is always the token)
	// of bsm/redislock's token length: its obtain script overwrites a
	// lock whose value starts with that many bytes of ARGV[1] (the same
	// token, other metadata). It must be at least minOverridePrefix and at
	// most the token's length: a shorter one (0 matches any value) would
	// overwrite another client's lock without its token.
	PrefixArg int
	// Engine routes the single-key form through the engine's
	// Attach(...).Unlock/Extend instead of a broadcast of Source.
	Engine bool
	// AddOrReplace marks redis-py's extend: ARGV[3] "1" replaces the TTL
	// (engine extend), "0" adds to each master's current TTL (broadcast).
	AddOrReplace bool
	// Tells is the proxy's equivalent of an acquisition's Source that
	// also says what it wrote (internal/scripts: 1 created, 2 overwrote
	// the caller's own lock, 0 nothing) and marks each key it writes with
	// the attempt's nonce, sent instead of Source: a failed acquisition's
	// cleanup removes only what it created and still marks
	// (scripts.CleanupMarked), not the client's own lock it overwrote
	// (bsm/redislock's obtain) nor a retry's grant. An extension that
	// creates a missing key (redsync's touch-with-setnx) has one too: it
	// writes the caller's value, so it must take the mark over.
	Tells  *conn.Script
	script *conn.Script
}

// fits reports whether keys and argv have the shape the library sends, the
// only shape the proxy maps to a quorum operation.
// Beyond the shape, the token is at most 512 bytes (the engine's limit
// for SET NX PX too) and a multi-key script names at most maxScriptKeys
// keys: a lock value is what GET answers every client with, and a
// recognised script must not write more than a lock's worth per key.
func (ls *LibScript) fits(keys, argv [][]byte) bool { return ls.misfit(keys, argv) == "" }

// misfit says why a call of ls is not served as a lock operation ("": it
// is).
func (ls *LibScript) misfit(keys, argv [][]byte) string {
	ok := len(keys) > 0 && len(keys) <= maxScriptKeys && (ls.MultiKey || len(keys) == 1) &&
		ls.TokenArg < len(argv) && len(argv[ls.TokenArg]) <= maxTokenLen &&
		ls.TTLArg < len(argv) && (!ls.AddOrReplace || len(argv) >= 3)
	if !ok {
		return "called in a shape its library never sends (or with more than 64 keys, or a value over 512 bytes)"
	}
	if ls.PrefixArg > 0 {
		if ls.PrefixArg >= len(argv) {
			return "called in a shape its library never sends"
		}
		n, isInt := resp.ParseInt(argv[ls.PrefixArg])
		switch {
		case !isInt:
			return "called in a shape its library never sends"
		case n < minOverridePrefix:
			return fmt.Sprintf("a token (Options.Token) of %d bytes is refused: the token is what tells a lock's holder from every other client, "+
				"and one under %d bytes may be another client's too (two holders of one lock); leave Options.Token unset (16 random bytes) "+
				"or set one of at least %d bytes", n, minOverridePrefix, minOverridePrefix)
		case n > int64(len(argv[ls.TokenArg])):
			return "called in a shape its library never sends (a token length over the value's)"
		}
	}
	return ""
}

// Bounds of a recognised script call (see fits).
const (
	maxScriptKeys = 64
	maxTokenLen   = 512
	// minOverridePrefix is the shortest token prefix bsm/redislock's
	// obtain may match to overwrite a lock (its own tokens are 22 bytes).
	minOverridePrefix = 16
)

// LibTable lists every recognised script. Each entry's text is atomic per
// master and checks every key before writing, so the proxy sends the
// library's own text to every master (keeping its per-master semantics,
// e.g. bsm's token-prefix override or redis-py's add-vs-replace extend)
// and adds the quorum, validity and cleanup layer around it.
var LibTable = []LibScript{
	// The engine's own compare-and-delete / compare-and-pexpire (also the
	// "plain" scripts found in docs and hand-written clients).
	{Name: "plain compare-and-delete (engine)", Source: scripts.Release.Source(), Op: OpRelease, Reply: replyInt10, TTLArg: -1, Engine: true},
	{Name: "plain compare-and-pexpire (engine)", Source: scripts.Extend.Source(), Op: OpExtend, Reply: replyInt10, TTLArg: 1, Engine: true},
	{Name: "plain compare-and-delete (redis.io)", Source: scripts.Lib("redis.io-compare-and-delete"), Op: OpRelease, Reply: replyInt10, TTLArg: -1, Engine: true},
	{Name: "plain compare-and-pexpire (redis.io style)", Source: scripts.Lib("redis.io-compare-and-pexpire"), Op: OpExtend, Reply: replyInt10, TTLArg: 1, Engine: true},

	// redis-py (Debian python3-redis 4.3.4, redis/lock.py).
	{Name: "redis-py release", Source: scripts.Lib("redis-py-release"), Op: OpRelease, Reply: replyInt10, TTLArg: -1, Engine: true},
	{Name: "redis-py extend", Source: scripts.Lib("redis-py-extend"), Op: OpExtend, Reply: replyInt10, TTLArg: 1, Engine: true, AddOrReplace: true},
	{Name: "redis-py reacquire", Source: scripts.Lib("redis-py-reacquire"), Op: OpExtend, Reply: replyInt10, TTLArg: 1, Engine: true},

	// github.com/bsm/redislock v0.9.4 (single key).
	{Name: "bsm/redislock v0.9.4 obtain", Source: scripts.Lib("bsm-redislock-v0.9.4-luaObtain"), Op: OpAcquire, Reply: replyOKNil, TTLArg: 2, PrefixArg: 1, Tells: scripts.BsmObtainV094},
	{Name: "bsm/redislock v0.9.4 release", Source: scripts.Lib("bsm-redislock-v0.9.4-luaRelease"), Op: OpRelease, Reply: replyInt10, TTLArg: -1, Engine: true},
	{Name: "bsm/redislock v0.9.4 refresh", Source: scripts.Lib("bsm-redislock-v0.9.4-luaRefresh"), Op: OpExtend, Reply: replyInt10, TTLArg: 1, Engine: true},
	{Name: "bsm/redislock v0.9.4 pttl", Source: scripts.Lib("bsm-redislock-v0.9.4-luaPTTL"), Op: OpPTTL, Reply: replyPTTLNeg3, TTLArg: -1},

	// github.com/bsm/redislock v0.10.0 (newest v0.10.x on the module proxy; several keys).
	{Name: "bsm/redislock v0.10 obtain", Source: scripts.Lib("bsm-redislock-v0.10.0-obtain"), Op: OpAcquire, Reply: replyOKNil, MultiKey: true, TTLArg: 2, PrefixArg: 1, Tells: scripts.BsmObtainV010},
	{Name: "bsm/redislock v0.10 release", Source: scripts.Lib("bsm-redislock-v0.10.0-release"), Op: OpRelease, Reply: replyOKNil, MultiKey: true, TTLArg: -1},
	{Name: "bsm/redislock v0.10 refresh", Source: scripts.Lib("bsm-redislock-v0.10.0-refresh"), Op: OpExtend, Reply: replyOKNil, MultiKey: true, TTLArg: 1},
	{Name: "bsm/redislock v0.10 pttl", Source: scripts.Lib("bsm-redislock-v0.10.0-pttl"), Op: OpPTTL, Reply: replyPTTLNil, MultiKey: true, TTLArg: -1},

	// github.com/go-redsync/redsync/v4 (v4.13.0 mutex.go).
	{Name: "redsync delete", Source: scripts.Lib("redsync-v4-deleteScript"), Op: OpRelease, Reply: replyRedsync, TTLArg: -1},
	{Name: "redsync touch", Source: scripts.Lib("redsync-v4-touchScript"), Op: OpExtend, Reply: replyInt10, TTLArg: 1, Engine: true},
	{Name: "redsync touch-with-setnx", Source: scripts.Lib("redsync-v4-touchWithSetNXScript"), Op: OpExtend, Reply: replyInt10, TTLArg: 1, Tells: scripts.RedsyncTouchSetNXMarked},

	// npm redlock 5.0.0-beta.2 and 4.2.0 (several keys; reply #KEYS).
	{Name: "node-redlock v5 acquire", Source: scripts.Lib("node-redlock5-acquire"), Op: OpAcquire, Reply: replyNKeys, MultiKey: true, TTLArg: 1, Tells: scripts.NodeRedlockAcquire},
	{Name: "node-redlock v5 extend", Source: scripts.Lib("node-redlock5-extend"), Op: OpExtend, Reply: replyNKeys, MultiKey: true, TTLArg: 1},
	{Name: "node-redlock v5 release", Source: scripts.Lib("node-redlock5-release"), Op: OpRelease, Reply: replyNKeys, MultiKey: true, TTLArg: -1},
	{Name: "node-redlock v4 lock", Source: scripts.Lib("node-redlock4-lock"), Op: OpAcquire, Reply: replyNKeys, MultiKey: true, TTLArg: 1, Tells: scripts.NodeRedlockAcquire},
	{Name: "node-redlock v4 extend", Source: scripts.Lib("node-redlock4-extend"), Op: OpExtend, Reply: replyNKeys, MultiKey: true, TTLArg: 1},
	{Name: "node-redlock v4 unlock", Source: scripts.Lib("node-redlock4-unlock"), Op: OpRelease, Reply: replyNKeys, MultiKey: true, TTLArg: -1},
}

// LibBySHA indexes LibTable by SHA1.
var LibBySHA = func() map[string]*LibScript {
	m := make(map[string]*LibScript, len(LibTable))
	for i := range LibTable {
		ls := &LibTable[i]
		if ls.Source == "" {
			panic("proxy: empty library script " + ls.Name)
		}
		ls.script = conn.NewScript(ls.Source)
		ls.SHA = ls.script.SHA()
		m[ls.SHA] = ls
	}
	return m
}()

// masterScripts are the scripts the server sends to the masters with
// EVALSHA through its engine: every recognised library script (and the
// telling form sent for it), redis-py's capped adding extend, the cleanup
// after a failed acquisition and the Redisson holds' scripts. Its
// engine loads them on every connect (before the session serves a
// request), as the engine loads its own. A NOSCRIPT answer would make the
// connection re-send the call as EVAL only if the call's deadline has not
// passed: a cleanup (100 ms) answered NOSCRIPT later by a slow master
// that had just restarted or was first met was dropped, and the failed
// attempt's key stayed until its TTL (TestCleanupOnFreshMaster).
var masterScripts = func() []*conn.Script {
	var out []*conn.Script
	seen := map[string]bool{}
	add := func(sc *conn.Script) {
		if sc != nil && !seen[sc.SHA()] {
			seen[sc.SHA()] = true
			out = append(out, sc)
		}
	}
	for _, sc := range []*conn.Script{scripts.CleanupMarked, scripts.RedisPyExtendAdd, scripts.RedissonAcquire, scripts.RedissonCAS,
		scripts.RedissonCleanup, scripts.RedissonFence, scripts.RedissonRead, scripts.RedissonRenew} {
		add(sc)
	}
	for _, ls := range LibTable {
		add(LibBySHA[ls.SHA].script)
		add(ls.Tells)
	}
	return out
}()

// MasterScripts returns the scripts the lock commands send to the
// masters with EVALSHA: the engine's connections should load them at
// connect (conn.Config.Scripts), or a cleanup answered NOSCRIPT after its
// timeout is dropped.
func MasterScripts() []*conn.Script { return append([]*conn.Script(nil), masterScripts...) }
