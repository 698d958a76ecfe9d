package resp

import (
	"bytes"
	"errors"
	"strings"
)

// ErrProtocol is matched (with [errors.Is]) by every error a [Reader]
// returns because the byte stream is not valid RESP.
var ErrProtocol = errors.New("resp: protocol error")

// ErrTooLarge is matched by protocol errors caused by a configured limit
// (bulk length, aggregate length or nesting depth) rather than bad syntax.
var ErrTooLarge = errors.New("resp: size limit exceeded")

// ProtocolError describes malformed or over-limit input. It matches
// [ErrProtocol], and [ErrTooLarge] when Limit is set.
type ProtocolError struct {
	// Reason says what was wrong, e.g. "invalid bulk length".
	Reason string
	// Data is a short excerpt of the offending input, if any.
	Data string
	// Limit is true when a size limit, not the syntax, was violated.
	Limit bool
}

// Error implements the error interface.
func (e *ProtocolError) Error() string {
	if e.Data == "" {
		return "resp: protocol error: " + e.Reason
	}
	return "resp: protocol error: " + e.Reason + ": " + quoteExcerpt(e.Data)
}

// Is reports whether target is [ErrProtocol], or [ErrTooLarge] for limit errors.
func (e *ProtocolError) Is(target error) bool {
	return target == ErrProtocol || (e.Limit && target == ErrTooLarge)
}

func protoErr(reason string, data []byte) error {
	if len(data) > 32 {
		data = data[:32]
	}
	return &ProtocolError{Reason: reason, Data: string(data)}
}

func limitErr(reason string) error {
	return &ProtocolError{Reason: reason, Limit: true}
}

func quoteExcerpt(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\n':
			b.WriteString(`\n`)
		case c < 0x20 || c >= 0x7f:
			const hex = "0123456789abcdef"
			b.WriteString(`\x`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// Error is an error reply sent by the server ("-ERR ...", "-NOSCRIPT ...",
// "-WRONGTYPE ..."): the command failed, the connection is fine. It is
// distinct from I/O and protocol errors.
type Error struct {
	// Msg is the whole message without the leading '-' and trailing CRLF,
	// e.g. "NOSCRIPT No matching script. Please use EVAL.".
	Msg string
}

// Error implements the error interface. It returns the server's message as-is.
func (e *Error) Error() string { return e.Msg }

// Prefix returns the error code: the first word of the message when it is
// in upper case ("ERR", "NOSCRIPT", "WRONGTYPE"), else "".
func (e *Error) Prefix() string { return errorPrefix(e.Msg) }

func errorPrefix(msg string) string {
	i := strings.IndexByte(msg, ' ')
	if i < 0 {
		i = len(msg)
	}
	p := msg[:i]
	for j := 0; j < len(p); j++ {
		if c := p[j]; !(c >= 'A' && c <= 'Z') && c != '_' && !(c >= '0' && c <= '9') {
			return ""
		}
	}
	return p
}

// HasErrorPrefix reports whether msg (an error reply's text) starts with the
// code prefix followed by a space or the end, without allocating.
func HasErrorPrefix(msg []byte, prefix string) bool {
	if !bytes.HasPrefix(msg, []byte(prefix)) {
		return false
	}
	return len(msg) == len(prefix) || msg[len(prefix)] == ' '
}
