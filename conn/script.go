package conn

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"strconv"

	"github.com/redlock-dev/redlock/resp"
)

// Script is a Lua script addressed by its SHA1, for EVALSHA.
type Script struct {
	src    string
	sha    string
	native Native // the server command it may be sent as (native.go)
	head   []byte // with native: "EVALSHA sha 1" sized for its arguments, the prefix appendNative strips
}

// NewScript returns the Script for src.
func NewScript(src string) *Script {
	sum := sha1.Sum([]byte(src))
	return &Script{src: src, sha: hex.EncodeToString(sum[:])}
}

// Source returns the script text.
func (s *Script) Source() string { return s.src }

// SHA returns the lower-case hex SHA1 of the script text.
func (s *Script) SHA() string { return s.sha }

// AppendEvalSha appends the head of "EVALSHA sha numkeys" to dst, sized for
// nkeys keys and nargs arguments that the caller appends next as bulk strings
// (with [resp.AppendBulkString]).
func (s *Script) AppendEvalSha(dst []byte, nkeys, nargs int) []byte {
	dst = resp.AppendArrayHeader(dst, 3+nkeys+nargs)
	dst = resp.AppendBulkString(dst, "EVALSHA")
	dst = resp.AppendBulkString(dst, s.sha)
	return resp.AppendBulkInt(dst, int64(nkeys))
}

// AppendCall appends the whole "EVALSHA sha numkeys keys... args..." to
// dst.
func (s *Script) AppendCall(dst []byte, keys, args [][]byte) []byte {
	dst = s.AppendEvalSha(dst, len(keys), len(args))
	for _, k := range keys {
		dst = resp.AppendBulk(dst, k)
	}
	for _, a := range args {
		dst = resp.AppendBulk(dst, a)
	}
	return dst
}

// appendEvalFromEvalSha rewrites an encoded "EVALSHA <sha> ..." command into
// "EVAL <source> ...", appending it to dst. ok is false when cmd does not
// have that shape.
func (s *Script) appendEvalFromEvalSha(dst, cmd []byte) (out []byte, ok bool) {
	i := bytes.Index(cmd, []byte("\r\n"))
	if i < 2 || cmd[0] != '*' {
		return dst, false
	}
	head := []byte("\r\n$7\r\nEVALSHA\r\n$40\r\n" + s.sha + "\r\n")
	rest := cmd[i:]
	if len(rest) < len(head) || !bytes.EqualFold(rest[:len(head)], head) {
		return dst, false
	}
	dst = append(dst, cmd[:i]...)
	dst = append(dst, "\r\n$4\r\nEVAL\r\n$"...)
	dst = strconv.AppendInt(dst, int64(len(s.src)), 10)
	dst = append(dst, '\r', '\n')
	dst = append(dst, s.src...)
	dst = append(dst, '\r', '\n')
	return append(dst, rest[len(head):]...), true
}
