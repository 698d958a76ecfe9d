package engine

import "github.com/redlock-dev/redlock/conn"

// Scripts the engine sends with EVALSHA. They are exported so tools (the
// proxy, tests) can recognise and run the same text.
var (
	// ReleaseScript deletes KEYS[1] if it holds ARGV[1]; returns 1 or 0.
	ReleaseScript = conn.NewScript(`if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`)
	// ExtendScript sets the TTL of KEYS[1] to ARGV[2] ms if it holds ARGV[1]; returns 1 or 0.
	ExtendScript = conn.NewScript(`if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("pexpire",KEYS[1],ARGV[2]) else return 0 end`)
)
