package lockcmds

import (
	"context"
	"strconv"
	"strings"
	"sync"

	"github.com/tidwall/redcon"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/internal/enginex"
	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/proxy/internal/respserver"
	"github.com/redlock-dev/redlock/resp"
)

// Opted-in passthrough (Config.AllowScripts): scripts and functions that
// are not lock scripts run on every master, on master connections of their
// own, and answer with the reply a quorum of masters agrees on.

// passthrough runs sc on every master for the client.
func (h *Commands) passthrough(c *client, sc *conn.Script, keys, argv [][]byte) *call {
	return c.Async(keys, func(ctx context.Context, _ []byte) []byte {
		return h.broadcastAgreed(ctx, keys, sc, sc.AppendCall(nil, keys, argv))
	})
}

// cmdFcall runs FCALL / FCALL_RO of a function the operator loaded on the
// masters, when scripts are allowed.
func (h *Commands) cmdFcall(c *client, args [][]byte) *call {
	if !h.cfg.AllowScripts {
		return respserver.ErrCall("ERR redlock proxy: functions are not lock scripts; " + msgScriptsOff)
	}
	keys, _, bad := scriptArgs(args)
	if bad == nil {
		bad = h.fenceCheck(c, keys)
	}
	if bad != nil {
		return bad
	}
	cmd := resp.AppendCommand(nil, args...)
	return c.Async(keys, func(ctx context.Context, _ []byte) []byte { return h.broadcastAgreed(ctx, keys, nil, cmd) })
}

// broadcastAgreed sends cmd (on keys) on the passthrough connections and
// answers the reply a quorum agrees on.
func (h *Commands) broadcastAgreed(ctx context.Context, keys [][]byte, sc *conn.Script, cmd []byte) []byte {
	timeout := h.cfg.ScriptTimeout
	if timeout == 0 {
		timeout = h.passTr.MasterTimeout(0)
	}
	key := ""
	if len(keys) > 0 {
		key = string(keys[0])
	}
	reps, err := h.passTr.Broadcast(ctx, key, timeout, sc, cmd)
	if err != nil {
		return h.engineErr(err)
	}
	return h.agreed(reps)
}

// agreed returns the reply a quorum of masters agrees on, byte for byte,
// else an error naming how far they were from agreeing.
func (h *Commands) agreed(reps []enginex.MasterReply) []byte {
	counts := map[string]int{}
	best, bestN := "", 0
	for _, r := range reps {
		if r.Err != nil {
			continue
		}
		k := string(resp.AppendReply(nil, r.Reply))
		counts[k]++
		if counts[k] > bestN {
			best, bestN = k, counts[k]
		}
	}
	if bestN >= h.eng.Quorum() {
		return []byte(best)
	}
	return redcon.AppendError(nil, "ERR no quorum agreement among masters: best "+
		strconv.Itoa(bestN)+"/"+strconv.Itoa(len(reps))+" agree, quorum "+strconv.Itoa(h.eng.Quorum()))
}

// scriptCache holds scripts clients loaded (SCRIPT LOAD) or sent (EVAL)
// that are not library scripts, so EVALSHA finds them like on Redis. Only
// used with AllowScripts.
type scriptCache struct {
	mu  sync.Mutex
	max int
	m   map[string]*conn.Script // guarded by mu
}

func (c *scriptCache) get(sha string) *conn.Script {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[sha]
}

// maxCachedScript bounds a script the cache remembers: the cache holds at
// most MaxScripts × 64 KiB.
const maxCachedScript = 64 << 10

// put stores src; when the cache is full, or src is over maxCachedScript,
// the script is still usable for this call but not remembered (EVALSHA
// then answers NOSCRIPT and clients send EVAL).
func (c *scriptCache) put(src []byte) *conn.Script {
	sha := scripts.SHA1(src)
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.m[sha]; ok {
		return s
	}
	s := conn.NewScript(string(src))
	if len(c.m) < c.max && len(src) <= maxCachedScript {
		c.m[sha] = s
	}
	return s
}

func (c *scriptCache) exists(sha string) bool {
	sha = strings.ToLower(sha)
	if LibBySHA[sha] != nil {
		return true
	}
	return c.get(sha) != nil
}

func (c *scriptCache) flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.m)
}
