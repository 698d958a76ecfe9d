package resp_test

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"

	"github.com/redlock-dev/redlock/resp"
)

// Small limits so that no input can make the fuzz target use much memory.
const (
	fuzzMaxBulkLen  = 1 << 16
	fuzzMaxArrayLen = 1024
	fuzzMaxDepth    = 16
)

func newFuzzReader(rd io.Reader, size int) *resp.Reader {
	var r *resp.Reader
	if size > 0 {
		r = resp.NewReaderSize(rd, size)
	} else {
		r = resp.NewReader(rd)
	}
	r.MaxBulkLen = fuzzMaxBulkLen
	r.MaxArrayLen = fuzzMaxArrayLen
	r.MaxDepth = fuzzMaxDepth
	return r
}

type fuzzResult struct {
	replies []resp.Reply // clones
	err     error
}

// fuzzRead reads all replies of data from r, checking the per-reply
// invariants, and returns them with the terminating error.
func fuzzRead(t *testing.T, r *resp.Reader, data []byte) fuzzResult {
	t.Helper()
	var res fuzzResult
	// Every reply consumes at least 3 bytes, so the loop ends.
	for i := 0; i <= len(data); i++ {
		rep, err := r.ReadReply()
		if err != nil {
			if rep.Type != 0 || rep.Str != nil || rep.Elems != nil || rep.Int != 0 || rep.Float != 0 {
				t.Fatalf("ReadReply returned both a reply %v and an error %v", rep, err)
			}
			if err != io.EOF && err != io.ErrUnexpectedEOF && !errors.Is(err, resp.ErrProtocol) {
				t.Fatalf("unexpected error kind %T: %v", err, err)
			}
			if errors.Is(err, resp.ErrTooLarge) && !errors.Is(err, resp.ErrProtocol) {
				t.Fatalf("limit error %v does not match ErrProtocol", err)
			}
			res.err = err
			return res
		}
		if rep.Type == 0 {
			t.Fatalf("ReadReply returned a zero reply and no error")
		}
		c := rep.Clone()
		if !c.Equal(rep) {
			t.Fatalf("Clone %v is not Equal to %v", c, rep)
		}
		// Exercise the accessors; they must not panic.
		_ = rep.String()
		_ = rep.Text()
		_ = rep.HasErrorPrefix("ERR")
		if e := rep.Err(); (e != nil) != rep.IsError() {
			t.Fatalf("Err() = %v but IsError() = %v", e, rep.IsError())
		} else if e != nil {
			var se *resp.Error
			if !errors.As(e, &se) {
				t.Fatalf("Err() is %T, not *resp.Error", e)
			}
			_ = se.Prefix()
		}
		res.replies = append(res.replies, c)
	}
	t.Fatalf("read more than %d replies from %d bytes", len(data)+1, len(data))
	return res
}

// checkRoundTrip re-encodes c and decodes it again.
func checkRoundTrip(t *testing.T, c resp.Reply) {
	t.Helper()
	enc := resp.AppendReply(nil, c)
	r := newFuzzReader(bytes.NewReader(enc), 0)
	again, err := r.ReadReply()
	if err != nil {
		t.Fatalf("re-reading %v encoded as %q: %v", c, enc, err)
	}
	if !again.Equal(c) {
		t.Fatalf("round trip of %q: got %v, want %v", enc, again, c)
	}
	if enc2 := resp.AppendReply(nil, again); !bytes.Equal(enc2, enc) {
		t.Fatalf("re-encoding is not stable: %q then %q", enc, enc2)
	}
	if rep, err := r.ReadReply(); err != io.EOF {
		t.Fatalf("AppendReply(%v) = %q encodes more than one reply: %v, %v", c, enc, rep, err)
	}
}

func fuzzSeeds() [][]byte {
	seeds := [][]byte{
		nil,
		[]byte("\r\n"),
		[]byte("$?\r\n;4\r\nHell\r\n;0\r\n"),
		[]byte("*?\r\n:1\r\n.\r\n"),
		[]byte("$-2\r\n"),
		[]byte("$abc\r\n"),
		[]byte(":abc\r\n"),
		[]byte("+OK\n"),
		[]byte("#x\r\n"),
		[]byte(",abc\r\n"),
		[]byte("*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n"),
		[]byte("*100000\r\n"),
		[]byte("$100000\r\n"),
		[]byte("|1\r\n+a\r\n+b\r\n"),
	}
	for _, tc := range decodeCases {
		seeds = append(seeds, []byte(tc.in))
	}
	// A few replies back to back (kept short: long seeds make the fuzzer
	// spend its time minimizing).
	return append(seeds, []byte("+OK\r\n:1\r\n$-1\r\n-ERR x\r\n$5\r\nhello\r\n*2\r\n+a\r\n_\r\n"))
}

func FuzzReader(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(fuzzReader)
}

// fuzzReader is the body of FuzzReader.
func fuzzReader(t *testing.T, data []byte) {
	// Decode with a tiny buffer (long lines, refills mid-aggregate)...
	small := fuzzRead(t, newFuzzReader(bytes.NewReader(data), 16), data)
	for _, c := range small.replies {
		checkRoundTrip(t, c)
	}

	// A clean io.EOF means the input ended exactly after the last reply:
	// without the final byte, that reply must be truncated.
	if small.err == io.EOF && len(data) > 0 {
		if len(small.replies) == 0 {
			t.Fatalf("io.EOF without any reply from %d bytes of input", len(data))
		}
		cut := fuzzRead(t, newFuzzReader(bytes.NewReader(data[:len(data)-1]), 16), data)
		if len(cut.replies) != len(small.replies)-1 || cut.err != io.ErrUnexpectedEOF {
			t.Fatalf("without its last byte, input gave %d replies then %v; want %d then io.ErrUnexpectedEOF",
				len(cut.replies), cut.err, len(small.replies)-1)
		}
	}

	// ...and with the default buffer fed one byte at a time: the result
	// must not depend on buffering. (The long-line limit is only checked
	// at buffer boundaries, so skip inputs that could reach it.)
	if len(data) > fuzzMaxBulkLen {
		return
	}
	big := fuzzRead(t, newFuzzReader(iotest.OneByteReader(bytes.NewReader(data)), 0), data)
	if len(big.replies) != len(small.replies) {
		t.Fatalf("16-byte buffer read %d replies (then %v), default buffer read %d (then %v)",
			len(small.replies), small.err, len(big.replies), big.err)
	}
	for i := range small.replies {
		if d := diffReply(big.replies[i], small.replies[i]); d != "" {
			t.Fatalf("reply %d differs between buffer sizes: %s", i, d)
		}
	}
	if small.err.Error() != big.err.Error() {
		t.Fatalf("final error differs between buffer sizes: %v vs %v", small.err, big.err)
	}
}

func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte(""), byte(0))
	f.Add([]byte("PING"), byte(' '))
	f.Add([]byte("SET key value NX PX 30000"), byte(' '))
	f.Add([]byte("a\r\nb\x00c\r\n"), byte('\x00'))
	f.Add([]byte("EVALSHA,abc,1,key,,arg"), byte(','))
	f.Fuzz(func(t *testing.T, data []byte, sep byte) {
		var args [][]byte
		if len(data) > 0 || sep != 0 {
			args = bytes.Split(data, []byte{sep})
		}
		strs := make([]string, len(args))
		for i, a := range args {
			strs[i] = string(a)
		}
		enc := resp.AppendCommand([]byte("prefix"), args...)
		if !bytes.HasPrefix(enc, []byte("prefix")) {
			t.Fatalf("AppendCommand lost the prefix: %q", enc)
		}
		enc = enc[len("prefix"):]
		if s := resp.AppendCommandStrings(nil, strs...); !bytes.Equal(s, enc) {
			t.Fatalf("AppendCommandStrings = %q, AppendCommand = %q", s, enc)
		}
		manual := resp.AppendArrayHeader(nil, len(args))
		for _, a := range args {
			manual = resp.AppendBulk(manual, a)
		}
		if !bytes.Equal(manual, enc) {
			t.Fatalf("header+AppendBulk = %q, AppendCommand = %q", manual, enc)
		}

		for _, size := range []int{16, 0} {
			r := newFuzzReader(bytes.NewReader(enc), size)
			r.MaxArrayLen = len(args) + 1
			r.MaxBulkLen = len(data) + 1
			rep, err := r.ReadReply()
			if err != nil {
				t.Fatalf("decoding %q: %v", enc, err)
			}
			if rep.Type != resp.TypeArray || len(rep.Elems) != len(args) {
				t.Fatalf("decoded %v, want an array of %d bulk strings", rep, len(args))
			}
			for i, e := range rep.Elems {
				if e.Type != resp.TypeBulkString || !bytes.Equal(e.Str, args[i]) {
					t.Fatalf("element %d = %v, want bulk %q", i, e, args[i])
				}
			}
			if _, err := r.ReadReply(); err != io.EOF {
				t.Fatalf("trailing data after the command: %v", err)
			}
		}
	})
}

// FuzzReaderLimits: a reply over a limit is dropped whole. Read with tight
// limits, continuing past limit errors, every reply that the fuzz limits
// decode must come back either equal or as one limit error, in the same
// place: the stream never loses its position.
func FuzzReaderLimits(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	f.Add([]byte("*2\r\n$20\r\n01234567890123456789\r\n:1\r\n+after\r\n"))
	f.Add([]byte("*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n:2\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		want := fuzzRead(t, newFuzzReader(bytes.NewReader(data), 16), data)
		r := newFuzzReader(bytes.NewReader(data), 16)
		r.MaxBulkLen, r.MaxArrayLen, r.MaxDepth = 8, 3, 3
		for i, w := range want.replies {
			got, err := r.ReadReply()
			switch {
			case errors.Is(err, resp.ErrTooLarge):
			case err != nil:
				t.Fatalf("reply %d (%v): %v; want it or a limit error", i, w, err)
			case !got.Equal(w):
				t.Fatalf("reply %d: got %v, want %v: the stream lost its place", i, got, w)
			}
		}
	})
}
