package lockcmds

import (
	"strconv"
	"time"

	"github.com/redlock-dev/redlock/proxy/internal/respserver"
)

// The native compare-and-delete and compare-and-set commands of newer
// servers (DELEX key IFEQ v and SET … IFEQ v in Redis ≥ 8.4, DELIFEQ in
// Valkey ≥ 9.0, SET … IFEQ in Valkey ≥ 8.1), which redis.io's lock
// pattern now uses instead of the release script: the proxy runs them as
// the quorum release and extension the plain scripts get (runLib), with
// the command's own reply.
var (
	nativeRelease = &LibScript{Name: "DELEX/DELIFEQ (compare-and-delete)", Op: OpRelease, Reply: replyInt10, TTLArg: -1, Engine: true}
	nativeExtend  = &LibScript{Name: "SET IFEQ (compare-and-set)", Op: OpExtend, Reply: replyOKNil, TTLArg: 1, Engine: true}
)

// cmdDelIfEq runs DELIFEQ key token and DELEX key IFEQ token as a quorum
// release. DELEX without a condition is a token-less DEL; IFNE and the
// digest conditions are not a release of one's own lock: both refused.
func (h *Commands) cmdDelIfEq(c *client, args [][]byte) *call {
	var token []byte
	switch name := respserver.Lower(args[0]); {
	case name == "delifeq" && len(args) == 3:
		token = args[2]
	case name == "delex" && len(args) == 2:
		if !h.cfg.AllowTokenlessWrites {
			return respserver.ErrCall(msgTokenless("DELEX without IFEQ", "compare-and-delete (DELEX key IFEQ value)"))
		}
		return h.cmdCountKeys(c, [][]byte{[]byte("del"), args[1]})
	case name == "delex" && len(args) == 4 && respserver.Lower(args[2]) == "ifeq":
		token = args[3]
	case name == "delex" && len(args) == 4:
		return respserver.ErrCall("ERR redlock proxy: only DELEX key IFEQ value (a lock release) is supported; IFNE and the digest conditions are not")
	default:
		return respserver.ErrCall(msgSyntax)
	}
	return h.native(c, nativeRelease, args[1], [][]byte{token})
}

// setIfEq runs SET key value IFEQ value PX ms | EX s as a quorum extension:
// the lock whose token is value gets the new TTL where it holds. The value
// must be the one compared (a lock's token cannot be changed) and the TTL
// is required (a lock without one would be held forever).
func (h *Commands) setIfEq(c *client, args [][]byte) *call {
	var cmp []byte
	var ttl time.Duration
	for i := 3; i < len(args); i++ {
		switch opt := respserver.Lower(args[i]); opt {
		case "ifeq":
			if cmp != nil || i+1 >= len(args) {
				return respserver.ErrCall(msgSyntax)
			}
			cmp = args[i+1]
			i++
		case "px", "ex":
			var bad *call
			if ttl, bad = h.expireOpt(opt, args, i, ttl); bad != nil {
				return bad
			}
			i++
		default:
			return respserver.ErrCall(msgSetIfEqForm)
		}
	}
	switch {
	case cmp == nil || ttl == 0:
		return respserver.ErrCall(msgSetIfEqForm)
	case string(cmp) != string(args[2]):
		return respserver.ErrCall("ERR redlock proxy: SET IFEQ may extend a lock, not change its value: the new value must be the one compared")
	}
	return h.native(c, nativeExtend, args[1], [][]byte{args[2], strconv.AppendInt(nil, ttl.Milliseconds(), 10)})
}

var ifeqOpt = []byte("ifeq")

const msgSetIfEqForm = "ERR redlock proxy: only SET key value IFEQ value PX milliseconds | EX seconds (a lock extension) is supported with IFEQ"

// native runs ls on key with argv as a quorum operation, as a recognised
// script call of the same shape is run.
func (h *Commands) native(c *client, ls *LibScript, key []byte, argv [][]byte) *call {
	keys := [][]byte{key}
	if bad := h.fenceCheck(c, keys); bad != nil {
		return bad
	}
	if !ls.fits(keys, argv) {
		return respserver.ErrCall("ERR redlock proxy: " + ls.Name + ": lock values are at most 512 bytes")
	}
	return h.libCall(c, ls, keys, argv)
}
