package lockcmds

import "github.com/redlock-dev/redlock/proxy/internal/respserver"

// msgTokenless is the refusal of a command that changes a lock without its
// token (Config.AllowTokenlessWrites off).
func msgTokenless(cmd, script string) string {
	return "ERR redlock proxy: " + cmd + " changes a lock without checking its token (it could be another client's by now); use a " +
		script + " script, or start the proxy with --allow-tokenless-writes"
}

// Reply texts shared by several commands (Redis wording where Redis has one).
const (
	msgNotInteger   = respserver.MsgNotInteger
	msgSyntax       = respserver.MsgSyntax
	msgNoScript     = "NOSCRIPT No matching script. Please use EVAL."
	msgShuttingDown = respserver.MsgShuttingDown
	msgSetForm      = "ERR redlock proxy: only SET key value NX PX milliseconds | NX EX seconds (a lock acquisition) is supported"
	msgSetNoTTL     = "ERR redlock proxy: SET NX without PX or EX: a lock without a TTL would never be released if its holder died; send SET key value NX PX milliseconds (give the lock a timeout: redis-py Lock(timeout=seconds), go-redis SetNX with an expiration)"
	msgBadExpire    = "ERR invalid expire time in 'set' command"
	msgFenceKey     = "ERR redlock proxy: that key is the masters' fencing counter; clients may not touch it (REDLOCK.LOCK returns fencing tokens)"
	msgReservedKey  = "ERR redlock proxy: keys beginning redlock:fair:, redlock:leader:, redlock:rlatch: or redlock:obtain: are kept beside locks (fair lock queues, leader records, unlock latches, obtain marks); clients may not touch them"
	msgMarkSlot     = "ERR redlock proxy: a bsm/redislock, node-redlock or redsync touch-with-setnx lock whose hash tag contains a brace, or whose name is empty, cannot keep its attempt mark in its slot on Redis Cluster members; rename the lock"
	msgMemory       = respserver.MsgMemory
	msgScriptsOff   = "other scripts are disabled (start the proxy with --allow-scripts to run them on every master)"
)
