package proxy

import (
	"context"
	"strconv"
	"time"
)

// The native compare-and-delete and compare-and-set commands of newer
// servers (DELEX key IFEQ v and SET … IFEQ v in Redis ≥ 8.4, DELIFEQ in
// Valkey ≥ 9.0, SET … IFEQ in Valkey ≥ 8.1), which redis.io's lock
// pattern now uses instead of the release script: the proxy runs them as
// the quorum release and extension the plain scripts get (runLib), with
// the command's own reply.
var (
	nativeRelease = &libScript{Name: "DELEX/DELIFEQ (compare-and-delete)", Op: opRelease, Reply: replyInt10, TTLArg: -1, Engine: true}
	nativeExtend  = &libScript{Name: "SET IFEQ (compare-and-set)", Op: opExtend, Reply: replyOKNil, TTLArg: 1, Engine: true}
)

// cmdDelIfEq runs DELIFEQ key token and DELEX key IFEQ token as a quorum
// release. DELEX without a condition is a token-less DEL; IFNE and the
// digest conditions are not a release of one's own lock: both refused.
func (c *client) cmdDelIfEq(args [][]byte) *call {
	var token []byte
	switch name := lower(args[0]); {
	case name == "delifeq" && len(args) == 3:
		token = args[2]
	case name == "delex" && len(args) == 2:
		if !c.s.cfg.AllowTokenlessWrites {
			return errCall(msgTokenless("DELEX without IFEQ", "compare-and-delete (DELEX key IFEQ value)"))
		}
		return c.cmdCountKeys([][]byte{[]byte("del"), args[1]})
	case name == "delex" && len(args) == 4 && lower(args[2]) == "ifeq":
		token = args[3]
	case name == "delex" && len(args) == 4:
		return errCall("ERR redlock proxy: only DELEX key IFEQ value (a lock release) is supported; IFNE and the digest conditions are not")
	default:
		return errCall(msgSyntax)
	}
	return c.native(nativeRelease, args[1], [][]byte{token})
}

// setIfEq runs SET key value IFEQ value PX ms | EX s as a quorum extension:
// the lock whose token is value gets the new TTL where it holds. The value
// must be the one compared (a lock's token cannot be changed) and the TTL
// is required (a lock without one would be held forever).
func (c *client) setIfEq(args [][]byte) *call {
	var cmp []byte
	var ttl time.Duration
	for i := 3; i < len(args); i++ {
		switch opt := lower(args[i]); opt {
		case "ifeq":
			if cmp != nil || i+1 >= len(args) {
				return errCall(msgSyntax)
			}
			cmp = args[i+1]
			i++
		case "px", "ex":
			if ttl != 0 || i+1 >= len(args) {
				return errCall(msgSyntax)
			}
			var bad *call
			if ttl, bad = c.s.setExpire(opt, args[i+1]); bad != nil {
				return bad
			}
			i++
		default:
			return errCall(msgSetIfEqForm)
		}
	}
	switch {
	case cmp == nil || ttl == 0:
		return errCall(msgSetIfEqForm)
	case string(cmp) != string(args[2]):
		return errCall("ERR redlock proxy: SET IFEQ may extend a lock, not change its value: the new value must be the one compared")
	}
	return c.native(nativeExtend, args[1], [][]byte{args[2], strconv.AppendInt(nil, ttl.Milliseconds(), 10)})
}

var ifeqOpt = []byte("ifeq")

const msgSetIfEqForm = "ERR redlock proxy: only SET key value IFEQ value PX milliseconds | EX seconds (a lock extension) is supported with IFEQ"

// native runs ls on key with argv as a quorum operation, as a recognised
// script call of the same shape is run.
func (c *client) native(ls *libScript, key []byte, argv [][]byte) *call {
	keys := [][]byte{key}
	if bad := c.fenceCheck(keys); bad != nil {
		return bad
	}
	if !ls.fits(keys, argv) {
		return errCall("ERR redlock proxy: " + ls.Name + ": lock values are at most 512 bytes")
	}
	s := c.s
	return c.asyncCB(keys, func(ctx context.Context, dst []byte) []byte { return s.runLib(ctx, dst, ls, keys, argv) }, s.libStart(ls, keys, argv))
}
