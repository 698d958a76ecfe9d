package engine

import (
	"embed"
	"strings"

	"github.com/redlock-dev/redlock/conn"
)

// The scripts' text lives in engine/lua/*.lua; the SHA1s EVALSHA uses are
// computed from it when the package loads (conn.NewScript). A script is its
// file without the final newline.
//
//go:embed lua/*.lua
var luaFiles embed.FS

func script(name string) *conn.Script {
	b, err := luaFiles.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic("engine: missing embedded script " + name) // a build error, caught by every test
	}
	return conn.NewScript(strings.TrimSuffix(string(b), "\n"))
}

// Scripts the engine sends with EVALSHA. They are exported so tools (the
// proxy, tests) can recognise and run the same text.
var (
	// ReleaseScript deletes KEYS[1] if it holds ARGV[1]; returns 1 or 0.
	ReleaseScript = script("release")
	// ReleaseNotifyScript is ReleaseScript that also publishes KEYS[1] on
	// channel ARGV[2] when it deleted it (Config.ReleaseChannel).
	ReleaseNotifyScript = script("release_notify")
	// ExtendScript sets the TTL of KEYS[1] to ARGV[2] ms if it holds ARGV[1]; returns 1 or 0.
	ExtendScript = script("extend")

	// FenceAcquireScript is the fenced acquire (see [WithFencing]): SET
	// KEYS[1] ARGV[1] NX PX ARGV[2]; when it set the key, it advances the
	// master's fencing counter KEYS[2] to max(counter, the master's clock in
	// microseconds) + 1 and returns it; nil when the key exists. The clock
	// floor makes a counter lost in a restart start again above every
	// number issued before the restart (docs/safety.md, "Fencing tokens").
	FenceAcquireScript = script("fence_acquire")
	// FenceRaiseScript is the fencing write-back: if the lock key KEYS[1]
	// holds the token ARGV[1], it raises the fencing counter KEYS[2] to
	// ARGV[2] if it is lower (or missing) and returns 1; otherwise it
	// returns 0 and writes nothing. A master that answers 1 held the lock
	// when the raise ran, so it grants the key to a later holder only after
	// the raise (docs/safety.md, "Fencing tokens").
	FenceRaiseScript = script("fence_raise")

	// ReleaseMultiScript is ReleaseScript over n keys in one call (KEYS[i],
	// token ARGV[i]); it returns an array of n integers. The engine merges
	// releases queued for the same write into it (Config.MergeMax).
	ReleaseMultiScript = script("release_multi")
	// ReleaseNotifyMultiScript is ReleaseNotifyScript over n keys (token
	// ARGV[2i-1], channel ARGV[2i]).
	ReleaseNotifyMultiScript = script("release_notify_multi")
	// ExtendMultiScript is ExtendScript over n keys (token ARGV[2i-1], TTL
	// ARGV[2i] ms).
	ExtendMultiScript = script("extend_multi")
)
