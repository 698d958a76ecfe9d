package proxy

import "errors"

// ErrServerClosed is returned by [Server.Serve] after [Server.Shutdown] or
// [Server.Close].
var ErrServerClosed = errors.New("proxy: server closed")

// ErrBadConfig is matched by the errors of [New] for invalid settings.
var ErrBadConfig = errors.New("proxy: invalid config")

// msgTokenless is the refusal of a command that changes a lock without its
// token (Config.AllowTokenlessWrites off).
func msgTokenless(cmd, script string) string {
	return "ERR redlock proxy: " + cmd + " changes a lock without checking its token (it could be another client's by now); use a " +
		script + " script, or start the proxy with --allow-tokenless-writes"
}

// Reply texts shared by several commands (Redis wording where Redis has one).
const (
	msgNoAuth       = "NOAUTH Authentication required."
	msgWrongPass    = "WRONGPASS invalid username-password pair or user is disabled."
	msgNoPassword   = "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"
	msgNotInteger   = "ERR value is not an integer or out of range"
	msgSyntax       = "ERR syntax error"
	msgNoScript     = "NOSCRIPT No matching script. Please use EVAL."
	msgNoProto      = "NOPROTO unsupported protocol version"
	msgMaxClients   = "ERR max number of clients reached"
	msgShuttingDown = "ERR proxy shutting down"
	msgSetForm      = "ERR redlock proxy: only SET key value NX PX milliseconds | NX EX seconds (a lock acquisition) is supported"
	msgSetNoTTL     = "ERR redlock proxy: SET NX without PX or EX: a lock without a TTL would never be released if its holder died; send SET key value NX PX milliseconds (give the lock a timeout: redis-py Lock(timeout=seconds), go-redis SetNX with an expiration)"
	msgBadExpire    = "ERR invalid expire time in 'set' command"
	msgFenceKey     = "ERR redlock proxy: that key is the masters' fencing counter; clients may not touch it (REDLOCK.LOCK returns fencing tokens)"
	msgReservedKey  = "ERR redlock proxy: keys beginning redlock:fair:, redlock:leader: or redlock:rlatch: are kept beside locks (fair lock queues, leader records, unlock latches); clients may not touch them"
	msgMemory       = "ERR redlock proxy: client memory limit reached: requests and replies held for all clients together exceed --max-client-memory (raise it, or send fewer commands at once)"
	msgScriptsOff   = "other scripts are disabled (start the proxy with --allow-scripts to run them on every master)"
)
