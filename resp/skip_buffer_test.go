package resp_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/redlock-dev/redlock/resp"
)

// TestSkipIndependentOfBuffer: the elements of an aggregate over
// MaxArrayLen are dropped (skip) with the same checks whatever the read
// buffer's size: a line longer than the buffer must still end in CRLF and
// start with a known type. (Found by FuzzReader: with a 16-byte buffer a
// long line was dropped unchecked, and the stream's end read as a
// truncated reply instead of a protocol error.)
func TestSkipIndependentOfBuffer(t *testing.T) {
	long := strings.Repeat("0", 40)
	for _, tc := range []struct {
		name, in string
		proto    bool // a protocol error (else: the aggregate dropped whole, then the next reply)
	}{
		{"long line without CR", "*3\r\n+" + long + "\n", true},
		{"long line of an unknown type", "*3\r\n?" + long + "\r\n+a\r\n+b\r\n+next\r\n", true},
		{"long simple lines", "*3\r\n+" + long + "\r\n-" + long + "\r\n:1\r\n+next\r\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, size := range []int{16, 4096} {
				r := resp.NewReaderSize(bytes.NewReader([]byte(tc.in)), size)
				r.MaxArrayLen = 2 // the 3-element aggregate is skipped
				_, err := r.ReadReply()
				switch {
				case tc.proto && !errors.Is(err, resp.ErrProtocol):
					t.Fatalf("buffer %d: %v, want a protocol error", size, err)
				case tc.proto && errors.Is(err, io.ErrUnexpectedEOF):
					t.Fatalf("buffer %d: %v, want a protocol error, not a truncated reply", size, err)
				case !tc.proto && !errors.Is(err, resp.ErrTooLarge):
					t.Fatalf("buffer %d: %v, want the aggregate refused as too large", size, err)
				case !tc.proto:
					next, err := r.ReadReply()
					if err != nil || string(next.Str) != "next" {
						t.Fatalf("buffer %d: after the dropped aggregate %v %v, want +next", size, next, err)
					}
				}
				got = append(got, err.Error())
			}
			if got[0] != got[1] {
				t.Errorf("16-byte buffer: %s; 4096-byte buffer: %s", got[0], got[1])
			}
		})
	}
}
