package conn

// Native server commands that replace a script: a Conn whose server has
// them sends the command instead of the script's EVALSHA (no Lua on the
// hot path), and keeps the script elsewhere. What a server has is read at
// each connect (COMMAND INFO, COMMAND DOCS), so that each master, and
// each node of a cluster, falls back on its own.

import (
	"bytes"
	"strings"

	"github.com/redlock-dev/redlock/resp"
)

// Native is the server command a [Script] may be sent as.
type Native uint8

const (
	// NativeNone: the script has no native form.
	NativeNone Native = iota
	// NativeDeleteIfEqual is a script that deletes KEYS[1] if it holds
	// ARGV[1] and returns 1, else 0 (one key, one argument). It is sent
	// as "DELEX key IFEQ value" (Redis ≥ 8.4) or "DELIFEQ key value"
	// (Valkey ≥ 9.0), which reply the same.
	NativeDeleteIfEqual
	// NativeExpireIfEqual is a script that sets the TTL of KEYS[1] to
	// ARGV[2] milliseconds if it holds ARGV[1] and returns 1, else 0 (one
	// key, two arguments). It is sent as "SET key value IFEQ value PX ms"
	// (Redis ≥ 8.4, Valkey ≥ 8.1), whose OK or nil reply the Conn hands
	// to the callback as the integer 1 or 0.
	NativeExpireIfEqual
)

// NewNativeScript returns the Script for src, which does what native
// says (see [Native]): a Conn sends it as that command to a server that
// has it, unless [Config.DisableNative].
func NewNativeScript(src string, native Native) *Script {
	s := NewScript(src)
	s.native = native
	nargs := 1
	if native == NativeExpireIfEqual {
		nargs = 2
	}
	s.head = s.AppendEvalSha(nil, 1, nargs)
	return s
}

// Native returns the native command s may be sent as.
func (s *Script) Native() Native { return s.native }

// nativeProbe is the handshake's question: which of the compare-and-delete
// commands the server has (COMMAND INFO answers nil for an unknown one),
// and whether SET documents IFEQ.
var nativeProbe = resp.AppendCommandStrings(resp.AppendCommandStrings(nil, "COMMAND", "INFO", "DELEX", "DELIFEQ"), "COMMAND", "DOCS", "SET")

// parseNativeInfo records in info what the replies to nativeProbe say. A
// reply of another shape (an error, an older server, an embedded master
// that answers COMMAND with its whole table) means "none": the scripts
// are used, which every server runs.
func parseNativeInfo(cmdInfo, setDocs resp.Reply, info *ServerInfo) {
	if cmdInfo.Type == resp.TypeArray && len(cmdInfo.Elems) == 2 {
		switch {
		case isCommandEntry(cmdInfo.Elems[0], "delex"):
			info.DeleteIfEqual = "DELEX"
		case isCommandEntry(cmdInfo.Elems[1], "delifeq"):
			info.DeleteIfEqual = "DELIFEQ"
		}
	}
	if setDocs.Type == resp.TypeArray || setDocs.Type == resp.TypeMap {
		info.SetIfEqual = hasToken(setDocs, "IFEQ", 8)
	}
}

// isCommandEntry reports whether r is COMMAND INFO's entry for name: an
// array whose first element is the name.
func isCommandEntry(r resp.Reply, name string) bool {
	return r.Type == resp.TypeArray && len(r.Elems) > 0 &&
		strings.EqualFold(string(r.Elems[0].Str), name)
}

// hasToken reports whether the string tok appears as an element of r,
// searching at most depth levels of nesting (COMMAND DOCS nests an
// argument's tokens a few levels down).
func hasToken(r resp.Reply, tok string, depth int) bool {
	switch r.Type {
	case resp.TypeBulkString, resp.TypeSimpleString:
		return strings.EqualFold(string(r.Str), tok)
	case resp.TypeArray, resp.TypeMap, resp.TypeSet:
		if depth == 0 {
			return false
		}
		for _, e := range r.Elems {
			if hasToken(e, tok, depth-1) {
				return true
			}
		}
	}
	return false
}

// nativeForLocked returns the native command s is sent as on this
// session's server, or NativeNone.
func (c *Conn) nativeForLocked(s *Script) Native {
	if s == nil || s.native == NativeNone || c.cfg.DisableNative || c.nativeOff {
		return NativeNone
	}
	switch {
	case s.native == NativeDeleteIfEqual && c.info.DeleteIfEqual != "":
		return NativeDeleteIfEqual
	case s.native == NativeExpireIfEqual && c.info.SetIfEqual:
		return NativeExpireIfEqual
	}
	return NativeNone
}

// appendNative appends to dst the native form of cmd, an encoded
// "EVALSHA <sha> 1 key arg…" of s, for a server whose compare-and-delete
// command is del. ok is false when cmd does not have that shape (it is
// then sent as it is).
func (s *Script) appendNative(dst, cmd []byte, del string) (out []byte, ok bool) {
	nargs := 1
	if s.native == NativeExpireIfEqual {
		nargs = 2
	}
	if !bytes.HasPrefix(cmd, s.head) {
		return dst, false
	}
	var bulks [3][]byte // key, then the arguments, each as encoded
	rest := cmd[len(s.head):]
	for i := 0; i <= nargs; i++ {
		n := bulkLen(rest)
		if n < 0 {
			return dst, false
		}
		bulks[i], rest = rest[:n], rest[n:]
	}
	if len(rest) != 0 {
		return dst, false
	}
	key, val := bulks[0], bulks[1]
	switch {
	case s.native == NativeExpireIfEqual:
		dst = append(dst, "*7\r\n$3\r\nSET\r\n"...)
		dst = append(append(dst, key...), val...)
		dst = append(append(dst, "$4\r\nIFEQ\r\n"...), val...)
		dst = append(append(dst, "$2\r\nPX\r\n"...), bulks[2]...)
	case del == "DELIFEQ":
		dst = append(dst, "*3\r\n$7\r\nDELIFEQ\r\n"...)
		dst = append(append(dst, key...), val...)
	default:
		dst = append(dst, "*4\r\n$5\r\nDELEX\r\n"...)
		dst = append(append(append(dst, key...), "$4\r\nIFEQ\r\n"...), val...)
	}
	return dst, true
}

// bulkLen returns the length of the encoded bulk string at the start of
// b, or -1 if b does not start with a whole one.
func bulkLen(b []byte) int {
	i := bytes.IndexByte(b, '\r')
	if len(b) < 4 || b[0] != '$' || i < 2 || i+1 >= len(b) || b[i+1] != '\n' {
		return -1
	}
	n, ok := resp.ParseInt(b[1:i])
	if !ok || n < 0 || n > int64(len(b)) {
		return -1
	}
	end := int64(i) + 2 + n + 2
	if end > int64(len(b)) || b[end-2] != '\r' || b[end-1] != '\n' {
		return -1
	}
	return int(end)
}

// refusesNative reports whether r, the reply to a native command, says
// the server will not run it — an ACL without it (NOPERM), a server that
// claimed a command it lacks (ERR unknown command, syntax error), SET
// refused under maxmemory where the script's PEXPIRE is not (OOM) — so
// that the session goes back to the scripts. The request itself fails
// (no vote): re-sending it behind the requests queued since could put an
// extension after a later one.
func refusesNative(r resp.Reply) bool {
	return r.HasErrorPrefix("ERR") || r.HasErrorPrefix("NOPERM") || r.HasErrorPrefix("OOM")
}

// nativeReply turns the reply of a native command into the reply of the
// script it replaced.
func nativeReply(n Native, r resp.Reply) resp.Reply {
	if n == NativeExpireIfEqual {
		switch {
		case r.IsOK():
			return resp.Reply{Type: resp.TypeInteger, Int: 1}
		case r.IsNull():
			return resp.Reply{Type: resp.TypeInteger, Int: 0}
		}
	}
	return r
}
