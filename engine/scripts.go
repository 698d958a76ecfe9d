package engine

import "github.com/redlock-dev/redlock/conn"

// Scripts the engine sends with EVALSHA. They are exported so tools (the
// proxy, tests) can recognise and run the same text.
var (
	// ReleaseScript deletes KEYS[1] if it holds ARGV[1]; returns 1 or 0.
	ReleaseScript = conn.NewScript(`if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`)
	// ReleaseNotifyScript is ReleaseScript that also publishes KEYS[1] on
	// channel ARGV[2] when it deleted it (Config.ReleaseChannel).
	ReleaseNotifyScript = conn.NewScript(`if redis.call("get",KEYS[1]) == ARGV[1] then redis.call("del",KEYS[1]) redis.call("publish",ARGV[2],KEYS[1]) return 1 else return 0 end`)
	// ExtendScript sets the TTL of KEYS[1] to ARGV[2] ms if it holds ARGV[1]; returns 1 or 0.
	ExtendScript = conn.NewScript(`if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("pexpire",KEYS[1],ARGV[2]) else return 0 end`)

	// FenceAcquireScript is the fenced acquire (see [WithFencing]): SET
	// KEYS[1] ARGV[1] NX PX ARGV[2]; when it set the key, it advances the
	// master's fencing counter KEYS[2] to max(counter, the master's clock in
	// microseconds) + 1 and returns it; nil when the key exists. The clock
	// floor makes a counter lost in a restart start again above every
	// number issued before the restart (docs/safety.md, "Fencing tokens").
	FenceAcquireScript = conn.NewScript(`if not redis.call("set",KEYS[1],ARGV[1],"NX","PX",ARGV[2]) then return false end
local t = redis.call("time")
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local c = tonumber(redis.call("get",KEYS[2])) or 0
if c < now then c = now end
c = c + 1
redis.call("set",KEYS[2],string.format("%d",c))
return c`)
	// FenceRaiseScript raises the fencing counter KEYS[1] to ARGV[1] if it
	// is lower (or missing); returns 1.
	FenceRaiseScript = conn.NewScript(`local c = tonumber(redis.call("get",KEYS[1]))
if c == nil or c < tonumber(ARGV[1]) then redis.call("set",KEYS[1],ARGV[1]) end
return 1`)
)
