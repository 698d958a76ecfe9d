package resp_test

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/redlock-dev/redlock/resp"
)

// TestLimitKeepsPlaceOverLongLines: lines longer than the reader's buffer
// never cost the stream its place. A simple string over MaxBulkLen among
// the siblings of a dropped reply is skipped with them (the skip stopped
// at it and the rest of the map was read as replies: found by
// FuzzReaderLimits). A length line longer than the buffer is read whole
// whatever MaxBulkLen says (it was dropped as a line over MaxBulkLen, a
// limit error after which its payload was read as the next replies; then
// refused as a protocol error, even for a valid length written with
// leading zeros): a valid one is read, one whose payload the stream
// lacks ends inside the reply.
func TestLimitKeepsPlaceOverLongLines(t *testing.T) {
	const next = "+next\r\n"
	read := func(in string) (*resp.Reader, error) {
		r := resp.NewReaderSize(bytes.NewReader([]byte(in+next)), 16)
		r.MaxBulkLen = 8
		_, err := r.ReadReply()
		return r, err
	}
	r, err := read("%2\r\n+aaaaaaaaaaaaaaaaaaaa\r\n:1\r\n+bbbbbbbbbbbbbbbbbbbb\r\n:2\r\n")
	if !errors.Is(err, resp.ErrTooLarge) {
		t.Fatalf("a map with long simple strings: %v; want a limit error", err)
	}
	if got, err := r.ReadReply(); err != nil || got.Text() != "next" {
		t.Fatalf("after the dropped map: %v, %v; want next: the stream lost its place", got, err)
	}
	for _, in := range []string{"$10000000000000\r\n", "*2\r\n+cccccccccccccccccccc\r\n$10000000000000\r\n"} {
		if _, err := read(in); err != io.ErrUnexpectedEOF {
			t.Errorf("%q then %q: %v; want io.ErrUnexpectedEOF (%q is the bulk string's payload, not a reply)", in, next, err, next)
		}
	}
	for _, size := range []int{16, 4096} {
		r := resp.NewReaderSize(bytes.NewReader([]byte("$00000000000000005\r\nhello\r\n")), size)
		r.MaxBulkLen = 8
		if got, err := r.ReadReply(); err != nil || string(got.Str) != "hello" {
			t.Errorf("a 5-byte bulk string whose length line (leading zeros) is 18 bytes, buffer %d: %v, %v; want hello", size, got, err)
		}
	}
}
