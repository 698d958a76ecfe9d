package resp_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/redlock-dev/redlock/resp"
)

func TestReadReply(t *testing.T) {
	for _, tc := range decodeCases {
		t.Run(tc.name, func(t *testing.T) {
			r := resp.NewReader(strings.NewReader(tc.in))
			got, err := r.ReadReply()
			if err != nil {
				t.Fatalf("ReadReply(%q): %v", tc.in, err)
			}
			mustNoDiff(t, got, tc.want)
			if _, err := r.ReadReply(); err != io.EOF {
				t.Errorf("ReadReply after the reply: err = %v, want io.EOF", err)
			}
		})
	}
}

// TestReadReplyStream reads every table case back to back from one stream.
func TestReadReplyStream(t *testing.T) {
	var in strings.Builder
	for _, tc := range decodeCases {
		in.WriteString(tc.in)
	}
	r := resp.NewReader(strings.NewReader(in.String()))
	for _, tc := range decodeCases {
		got, err := r.ReadReply()
		if err != nil {
			t.Fatalf("%s: ReadReply: %v", tc.name, err)
		}
		if d := diffReply(got, tc.want); d != "" {
			t.Errorf("%s: %s", tc.name, d)
		}
	}
	for i := 0; i < 3; i++ {
		if rep, err := r.ReadReply(); err != io.EOF {
			t.Fatalf("ReadReply at end of stream = %v, %v; want io.EOF", rep, err)
		}
	}
}

// readMakers wrap the input in readers that deliver it in odd chunks, as in
// the bufio package's tests.
var readMakers = []struct {
	name string
	fn   func(io.Reader) io.Reader
}{
	{"full", func(r io.Reader) io.Reader { return r }},
	{"byte", iotest.OneByteReader},
	{"half", iotest.HalfReader},
	{"data+err", iotest.DataErrReader},
}

// readerMakers build a resp.Reader with different buffer sizes.
var readerMakers = []struct {
	name string
	fn   func(io.Reader) *resp.Reader
}{
	{"default", resp.NewReader},
	{"buf16", func(r io.Reader) *resp.Reader { return resp.NewReaderSize(r, 16) }},
	{"buf64", func(r io.Reader) *resp.Reader { return resp.NewReaderSize(r, 64) }},
	{"bufio16", func(r io.Reader) *resp.Reader { return resp.NewReader(bufio.NewReaderSize(r, 16)) }},
}

func TestReadReplyShortReads(t *testing.T) {
	var all strings.Builder
	for _, tc := range decodeCases {
		all.WriteString(tc.in)
	}
	for _, rm := range readMakers {
		for _, nm := range readerMakers {
			t.Run(rm.name+"/"+nm.name, func(t *testing.T) {
				for _, tc := range decodeCases {
					r := nm.fn(rm.fn(strings.NewReader(tc.in)))
					got, err := r.ReadReply()
					if err != nil {
						t.Errorf("%s: ReadReply: %v", tc.name, err)
						continue
					}
					if d := diffReply(got, tc.want); d != "" {
						t.Errorf("%s: %s", tc.name, d)
					}
					if _, err := r.ReadReply(); err != io.EOF {
						t.Errorf("%s: second ReadReply err = %v, want io.EOF", tc.name, err)
					}
				}

				// And all of them back to back in one stream.
				r := nm.fn(rm.fn(strings.NewReader(all.String())))
				for _, tc := range decodeCases {
					got, err := r.ReadReply()
					if err != nil {
						t.Fatalf("stream: %s: ReadReply: %v", tc.name, err)
					}
					if d := diffReply(got, tc.want); d != "" {
						t.Errorf("stream: %s: %s", tc.name, d)
					}
				}
				if _, err := r.ReadReply(); err != io.EOF {
					t.Errorf("stream: final ReadReply err = %v, want io.EOF", err)
				}
			})
		}
	}
}

// TestAggregateSurvivesBufferRefill checks that the elements of an aggregate
// that were parsed from lines (simple strings, errors, doubles, big numbers)
// stay intact when the bufio buffer is refilled while reading later elements.
func TestAggregateSurvivesBufferRefill(t *testing.T) {
	build := func(n int, line func(i int) (string, resp.Reply)) (string, resp.Reply) {
		var b strings.Builder
		fmt.Fprintf(&b, "*%d\r\n", n)
		var elems []resp.Reply
		for i := 0; i < n; i++ {
			s, want := line(i)
			b.WriteString(s)
			elems = append(elems, want)
		}
		return b.String(), array(elems...)
	}
	type gen func(i int) (string, resp.Reply)
	cases := []struct {
		name string
		n    int
		line gen
	}{
		{"simple strings", 50, func(i int) (string, resp.Reply) {
			s := fmt.Sprintf("element-%02d", i)
			return "+" + s + "\r\n", simple(s)
		}},
		{"errors", 50, func(i int) (string, resp.Reply) {
			s := fmt.Sprintf("ERR number %d", i)
			return "-" + s + "\r\n", errReply(s)
		}},
		{"long simple strings", 20, func(i int) (string, resp.Reply) {
			s := fmt.Sprintf("%03d-%s", i, strings.Repeat("x", 40+i))
			return "+" + s + "\r\n", simple(s)
		}},
		{"doubles", 50, func(i int) (string, resp.Reply) {
			s := fmt.Sprintf("%d.5", i)
			return "," + s + "\r\n", double(s, float64(i)+0.5)
		}},
		{"big numbers", 50, func(i int) (string, resp.Reply) {
			s := fmt.Sprintf("1234567890123456789012345%03d", i)
			return "(" + s + "\r\n", bigNum(s)
		}},
		{"mixed with bulk", 60, func(i int) (string, resp.Reply) {
			s := fmt.Sprintf("v%d", i)
			switch i % 3 {
			case 0:
				return "+" + s + "\r\n", simple(s)
			case 1:
				return fmt.Sprintf("$%d\r\n%s\r\n", len(s), s), bulk(s)
			}
			return "*1\r\n+" + s + "\r\n", array(simple(s))
		}},
	}
	for _, tc := range cases {
		in, want := build(tc.n, tc.line)
		for _, rm := range readMakers {
			for _, nm := range readerMakers {
				t.Run(tc.name+"/"+rm.name+"/"+nm.name, func(t *testing.T) {
					// Two copies so the second also reuses the arenas of the first.
					r := nm.fn(rm.fn(strings.NewReader(in + in)))
					for k := 0; k < 2; k++ {
						got, err := r.ReadReply()
						if err != nil {
							t.Fatalf("ReadReply #%d: %v", k, err)
						}
						mustNoDiff(t, got, want)
					}
				})
			}
		}
	}
}

// TestReplyValidUntilNextRead checks that a reply aliases the reader and
// that Clone detaches it.
func TestReplyValidUntilNextRead(t *testing.T) {
	r := resp.NewReaderSize(strings.NewReader("*2\r\n+first\r\n$6\r\nsecond\r\n*2\r\n+xxxxx\r\n$6\r\nyyyyyy\r\n"), 16)
	first, err := r.ReadReply()
	if err != nil {
		t.Fatal(err)
	}
	kept := first.Clone()
	if _, err := r.ReadReply(); err != nil {
		t.Fatal(err)
	}
	mustNoDiff(t, kept, array(simple("first"), bulk("second")))
}

func TestServerErrorIsData(t *testing.T) {
	cases := []struct {
		name     string
		in       string
		typ      resp.Type
		msg      string
		prefix   string
		has      []string // HasErrorPrefix true
		hasNot   []string // HasErrorPrefix false
		isClient bool
	}{
		{
			name: "ERR", in: "-ERR unknown command 'foo'\r\n", typ: resp.TypeError,
			msg: "ERR unknown command 'foo'", prefix: "ERR",
			has: []string{"ERR"}, hasNot: []string{"ER", "ERR unknown command 'foo' x", "NOSCRIPT", "err", ""},
		},
		{
			name: "NOSCRIPT", in: "-NOSCRIPT No matching script. Please use EVAL.\r\n", typ: resp.TypeError,
			msg: "NOSCRIPT No matching script. Please use EVAL.", prefix: "NOSCRIPT",
			has: []string{"NOSCRIPT"}, hasNot: []string{"NOSCRIP", "NOSCRIPTS", "ERR", "noscript"},
		},
		{
			name: "WRONGTYPE", in: "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n", typ: resp.TypeError,
			msg: "WRONGTYPE Operation against a key holding the wrong kind of value", prefix: "WRONGTYPE",
			has: []string{"WRONGTYPE"}, hasNot: []string{"WRONG", "ERR", "NOSCRIPT"},
		},
		{
			name: "code only", in: "-BUSY\r\n", typ: resp.TypeError,
			msg: "BUSY", prefix: "BUSY", has: []string{"BUSY"}, hasNot: []string{"BUS", "BUSYKEY"},
		},
		{
			name: "code with underscore and digits", in: "-CROSS_SLOT2 Keys in request don't hash to the same slot\r\n", typ: resp.TypeError,
			msg: "CROSS_SLOT2 Keys in request don't hash to the same slot", prefix: "CROSS_SLOT2", has: []string{"CROSS_SLOT2"},
		},
		{
			name: "lower-case message has no code", in: "-something went wrong\r\n", typ: resp.TypeError,
			msg: "something went wrong", prefix: "", has: []string{"something"}, hasNot: []string{"ERR"},
		},
		{
			name: "empty message", in: "-\r\n", typ: resp.TypeError,
			msg: "", prefix: "", has: []string{""}, hasNot: []string{"ERR"},
		},
		{
			name: "blob error", in: "!21\r\nSYNTAX invalid syntax\r\n", typ: resp.TypeBlobError,
			msg: "SYNTAX invalid syntax", prefix: "SYNTAX", has: []string{"SYNTAX"}, hasNot: []string{"ERR", "SYN"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Follow the error with another reply: the stream stays usable.
			r := resp.NewReader(strings.NewReader(tc.in + "+OK\r\n"))
			rep, err := r.ReadReply()
			if err != nil {
				t.Fatalf("ReadReply returned error %v for a server error reply", err)
			}
			if rep.Type != tc.typ || !rep.IsError() {
				t.Fatalf("Type = %v, IsError = %v; want %v, true", rep.Type, rep.IsError(), tc.typ)
			}
			for _, p := range tc.has {
				if !rep.HasErrorPrefix(p) {
					t.Errorf("HasErrorPrefix(%q) = false, want true", p)
				}
			}
			for _, p := range tc.hasNot {
				if rep.HasErrorPrefix(p) {
					t.Errorf("HasErrorPrefix(%q) = true, want false", p)
				}
			}
			e := rep.Err()
			if e == nil {
				t.Fatal("Err() = nil for an error reply")
			}
			var se *resp.Error
			if !errors.As(e, &se) {
				t.Fatalf("Err() = %T, not a *resp.Error", e)
			}
			if se.Msg != tc.msg || e.Error() != tc.msg {
				t.Errorf("Msg = %q, Error() = %q; want %q", se.Msg, e.Error(), tc.msg)
			}
			if got := se.Prefix(); got != tc.prefix {
				t.Errorf("Prefix() = %q, want %q", got, tc.prefix)
			}
			if errors.Is(e, resp.ErrProtocol) {
				t.Error("a server error matches ErrProtocol")
			}

			// Err must not alias the reader's buffer.
			next, err := r.ReadReply()
			if err != nil || !next.IsOK() {
				t.Fatalf("reply after the error = %v, %v; want +OK", next, err)
			}
			if se.Msg != tc.msg {
				t.Errorf("Msg changed to %q after the next ReadReply", se.Msg)
			}
		})
	}
}

func TestNonErrorReplies(t *testing.T) {
	for _, in := range []string{"+NOSCRIPT\r\n", "$8\r\nNOSCRIPT\r\n", ":1\r\n", "_\r\n", "*1\r\n-NOSCRIPT x\r\n"} {
		t.Run(in, func(t *testing.T) {
			rep, err := resp.NewReader(strings.NewReader(in)).ReadReply()
			if err != nil {
				t.Fatal(err)
			}
			if rep.IsError() || rep.Err() != nil || rep.HasErrorPrefix("NOSCRIPT") {
				t.Errorf("%v: IsError = %v, Err = %v, HasErrorPrefix = %v; want false, nil, false",
					rep, rep.IsError(), rep.Err(), rep.HasErrorPrefix("NOSCRIPT"))
			}
		})
	}
}

func TestProtocolErrors(t *testing.T) {
	long := strings.Repeat("z", 100)
	cases := []struct {
		name   string
		in     string
		reason string // substring of the error message
	}{
		{"unknown type byte", "?foo\r\n", "unknown reply type"},
		{"unknown type byte in array", "*1\r\n@x\r\n", "unknown reply type"},
		{"unknown type long line", "x" + long + "\r\n", "unknown reply type"},
		{"inline command", "PING\r\n", "unknown reply type"},
		{"missing CR", "+OK\n", "line not terminated by CRLF"},
		{"missing CR bare LF", "\n", "line not terminated by CRLF"},
		{"missing CR long line", "+" + long + "\n", "line not terminated by CRLF"},
		{"missing CR in array", "*1\r\n:1\n", "line not terminated by CRLF"},
		{"empty line", "\r\n", "empty line"},
		{"empty line in array", "*2\r\n:1\r\n\r\n", "empty line"},
		{"bad integer", ":abc\r\n", "invalid integer"},
		{"bad integer empty", ":\r\n", "invalid integer"},
		{"bad integer sign only", ":-\r\n", "invalid integer"},
		{"bad integer space", ": 1\r\n", "invalid integer"},
		{"bad integer trailing", ":12x\r\n", "invalid integer"},
		{"bad integer float", ":1.5\r\n", "invalid integer"},
		{"integer overflow", ":9223372036854775808\r\n", "invalid integer"},
		{"integer underflow", ":-9223372036854775809\r\n", "invalid integer"},
		{"integer huge", ":99999999999999999999\r\n", "invalid integer"},
		{"bulk length abc", "$abc\r\n", "invalid bulk length"},
		{"bulk length -2", "$-2\r\n", "invalid bulk length"},
		{"bulk length empty", "$\r\n", "invalid bulk length"},
		{"bulk length overflow", "$99999999999999999999\r\n", "invalid bulk length"},
		{"blob error null", "!-1\r\n", "invalid bulk length"},
		{"verbatim null", "=-1\r\n", "invalid bulk length"},
		{"bulk not ending in CRLF", "$3\r\nabcde\r\n", "bulk string not terminated by CRLF"},
		{"bulk ending in LF only", "$3\r\nabc\n\r\n", "bulk string not terminated by CRLF"},
		{"bulk longer than its length", "$5\r\nabc\r\nxy", "bulk string not terminated by CRLF"},
		{"bulk shorter than its length", "$5\r\nabc\r\n:1\r\n", "bulk string not terminated by CRLF"},
		{"streamed bulk", "$?\r\n;4\r\nHell\r\n;0\r\n", "streamed strings are not supported"},
		{"streamed array", "*?\r\n:1\r\n.\r\n", "streamed aggregates are not supported"},
		{"streamed map", "%?\r\n", "streamed aggregates are not supported"},
		{"array length abc", "*abc\r\n", "invalid aggregate length"},
		{"array length -2", "*-2\r\n", "invalid aggregate length"},
		{"null map", "%-1\r\n", "invalid aggregate length"},
		{"null set", "~-1\r\n", "invalid aggregate length"},
		{"null push", ">-1\r\n", "invalid aggregate length"},
		{"null attribute", "|-1\r\n+OK\r\n", "invalid aggregate length"},
		{"invalid boolean", "#x\r\n", "invalid boolean"},
		{"invalid boolean long", "#true\r\n", "invalid boolean"},
		{"invalid boolean empty", "#\r\n", "invalid boolean"},
		{"invalid boolean upper", "#T\r\n", "invalid boolean"},
		{"invalid double", ",abc\r\n", "invalid double"},
		{"invalid double empty", ",\r\n", "invalid double"},
		{"invalid double trailing", ",1.5x\r\n", "invalid double"},
		{"invalid null", "_x\r\n", "invalid null"},
		{"bad element in map", "%1\r\n+k\r\n#maybe\r\n", "invalid boolean"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, nm := range readerMakers {
				rep, err := nm.fn(strings.NewReader(tc.in)).ReadReply()
				if err == nil {
					t.Fatalf("%s: ReadReply(%q) = %v, nil; want a protocol error", nm.name, tc.in, rep)
				}
				if !errors.Is(err, resp.ErrProtocol) {
					t.Errorf("%s: err = %v, does not match ErrProtocol", nm.name, err)
				}
				if errors.Is(err, resp.ErrTooLarge) {
					t.Errorf("%s: syntax error %v matches ErrTooLarge", nm.name, err)
				}
				var pe *resp.ProtocolError
				if !errors.As(err, &pe) {
					t.Errorf("%s: err is %T, not *resp.ProtocolError", nm.name, err)
				} else if pe.Limit {
					t.Errorf("%s: Limit = true for a syntax error", nm.name)
				}
				if !strings.Contains(err.Error(), tc.reason) {
					t.Errorf("%s: error %q does not mention %q", nm.name, err, tc.reason)
				}
				if !strings.HasPrefix(err.Error(), "resp: protocol error: ") {
					t.Errorf("%s: error %q lacks the package prefix", nm.name, err)
				}
				if rep.Type != 0 || rep.Str != nil || rep.Elems != nil {
					t.Errorf("%s: non-zero reply %v returned with error", nm.name, rep)
				}
			}
		})
	}
}

func TestProtocolErrorMessage(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want string
	}{
		{"unknown type", "?foo\r\n", `resp: protocol error: unknown reply type: "?foo"`},
		{"control bytes quoted", "?a\x00\xff\tb\r\n", `resp: protocol error: unknown reply type: "?a\x00\xff\x09b"`},
		{"missing CR shows LF", "+OK\n", `resp: protocol error: line not terminated by CRLF: "+OK\n"`},
		{"excerpt truncated to 32 bytes", "?" + strings.Repeat("a", 100) + "\r\n",
			`resp: protocol error: unknown reply type: "?` + strings.Repeat("a", 31) + `"`},
		{"empty line has no excerpt", "\r\n", `resp: protocol error: empty line`},
		{"bulk terminator", "$1\r\nab\r\n", `resp: protocol error: bulk string not terminated by CRLF: "b\r"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := resp.NewReader(strings.NewReader(tc.in)).ReadReply()
			if err == nil || err.Error() != tc.want {
				t.Errorf("err = %v\nwant   %s", err, tc.want)
			}
		})
	}
}

func TestLimits(t *testing.T) {
	nest := func(depth int) string {
		return strings.Repeat("*1\r\n", depth) + ":1\r\n"
	}
	cases := []struct {
		name   string
		in     string
		setup  func(r *resp.Reader)
		reason string // "" means the input must decode
	}{
		{"bulk at MaxBulkLen", "$10\r\n0123456789\r\n", func(r *resp.Reader) { r.MaxBulkLen = 10 }, ""},
		{"bulk over MaxBulkLen", "$11\r\n0123456789a\r\n", func(r *resp.Reader) { r.MaxBulkLen = 10 }, "exceeds MaxBulkLen"},
		{"verbatim over MaxBulkLen", "=11\r\ntxt:0123456\r\n", func(r *resp.Reader) { r.MaxBulkLen = 10 }, "exceeds MaxBulkLen"},
		{"blob error over MaxBulkLen", "!11\r\nERR 0123456\r\n", func(r *resp.Reader) { r.MaxBulkLen = 10 }, "exceeds MaxBulkLen"},
		// MaxBulkLen bounds lines that do not fit the read buffer (16 KiB by default).
		{"long line over MaxBulkLen", "+" + strings.Repeat("x", 40000) + "\r\n", func(r *resp.Reader) { r.MaxBulkLen = 50 }, "line exceeds MaxBulkLen"},
		{"long line in array over MaxBulkLen", "*1\r\n-" + strings.Repeat("x", 40000) + "\r\n", func(r *resp.Reader) { r.MaxBulkLen = 20000 }, "line exceeds MaxBulkLen"},
		{"long line under MaxBulkLen", "+" + strings.Repeat("x", 40000) + "\r\n", func(r *resp.Reader) { r.MaxBulkLen = 50000 }, ""},
		{"array at MaxArrayLen", "*2\r\n:1\r\n:2\r\n", func(r *resp.Reader) { r.MaxArrayLen = 2 }, ""},
		{"array over MaxArrayLen", "*3\r\n:1\r\n:2\r\n:3\r\n", func(r *resp.Reader) { r.MaxArrayLen = 2 }, "exceeds MaxArrayLen"},
		{"set over MaxArrayLen", "~3\r\n:1\r\n:2\r\n:3\r\n", func(r *resp.Reader) { r.MaxArrayLen = 2 }, "exceeds MaxArrayLen"},
		{"push over MaxArrayLen", ">3\r\n:1\r\n:2\r\n:3\r\n", func(r *resp.Reader) { r.MaxArrayLen = 2 }, "exceeds MaxArrayLen"},
		{"map over MaxArrayLen", "%3\r\n:1\r\n:2\r\n:3\r\n:4\r\n:5\r\n:6\r\n", func(r *resp.Reader) { r.MaxArrayLen = 2 }, "exceeds MaxArrayLen"},
		{"attribute over MaxArrayLen", "|3\r\n+a\r\n:1\r\n+b\r\n:2\r\n+c\r\n:3\r\n:7\r\n", func(r *resp.Reader) { r.MaxArrayLen = 2 }, "exceeds MaxArrayLen"},
		{"nested array over MaxArrayLen", "*1\r\n*3\r\n:1\r\n:2\r\n:3\r\n", func(r *resp.Reader) { r.MaxArrayLen = 2 }, "exceeds MaxArrayLen"},
		{"depth at MaxDepth", nest(3), func(r *resp.Reader) { r.MaxDepth = 3 }, ""},
		{"depth over MaxDepth", nest(4), func(r *resp.Reader) { r.MaxDepth = 3 }, "nesting exceeds MaxDepth"},
		{"depth at default", nest(resp.DefaultMaxDepth), nil, ""},
		{"depth over default", nest(resp.DefaultMaxDepth + 1), nil, "nesting exceeds MaxDepth"},
		{"depth of maps", "%1\r\n+k\r\n%1\r\n+k\r\n%1\r\n+k\r\n:1\r\n", func(r *resp.Reader) { r.MaxDepth = 2 }, "nesting exceeds MaxDepth"},
		{"depth through attribute", "*1\r\n|1\r\n*1\r\n:1\r\n:2\r\n:3\r\n", func(r *resp.Reader) { r.MaxDepth = 2 }, "nesting exceeds MaxDepth"},
		{"null array is not nesting", "*1\r\n*1\r\n*-1\r\n", func(r *resp.Reader) { r.MaxDepth = 2 }, ""},
		{"over limit inside a deep tree", "*2\r\n*2\r\n$11\r\n0123456789a\r\n*1\r\n$3\r\nabc\r\n%1\r\n+k\r\n~1\r\n:1\r\n", func(r *resp.Reader) { r.MaxBulkLen = 10 }, "exceeds MaxBulkLen"},
		{"deep tree past MaxDepth", strings.Repeat("*2\r\n", 200) + strings.Repeat(":1\r\n", 201), func(r *resp.Reader) { r.MaxDepth = 3 }, "nesting exceeds MaxDepth"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, nm := range readerMakers {
				// Each input is one whole reply; a limit error must leave the
				// stream at the next one.
				r := nm.fn(strings.NewReader(tc.in + ":42\r\n"))
				if tc.setup != nil {
					tc.setup(r)
				}
				rep, err := r.ReadReply()
				if tc.reason == "" {
					if err != nil {
						t.Errorf("%s: ReadReply: %v", nm.name, err)
					}
					continue
				}
				if err == nil {
					t.Fatalf("%s: ReadReply = %v, nil; want a limit error", nm.name, rep)
				}
				if !errors.Is(err, resp.ErrTooLarge) || !errors.Is(err, resp.ErrProtocol) {
					t.Errorf("%s: err = %v; want it to match ErrTooLarge and ErrProtocol", nm.name, err)
				}
				var pe *resp.ProtocolError
				if !errors.As(err, &pe) || !pe.Limit {
					t.Errorf("%s: err = %#v; want a *ProtocolError with Limit set", nm.name, err)
				}
				if !strings.Contains(err.Error(), tc.reason) {
					t.Errorf("%s: error %q does not mention %q", nm.name, err, tc.reason)
				}
				if next, err := r.ReadReply(); err != nil || next.Int != 42 {
					t.Errorf("%s: after the limit error: %v, %v; want :42 (the stream lost its place)", nm.name, next, err)
				}
			}
		})
	}
	// The defaults, with replies too large to run through every reader.
	for _, tc := range []struct {
		name, reason string
		in           io.Reader
	}{
		{"huge bulk with defaults", "exceeds MaxBulkLen", io.MultiReader(strings.NewReader("$536870913\r\n"),
			io.LimitReader(zeros{}, 536870913), strings.NewReader("\r\n:42\r\n"))},
		{"huge array with defaults", "exceeds MaxArrayLen", io.MultiReader(strings.NewReader("*1048577\r\n"),
			strings.NewReader(strings.Repeat(":1\r\n", 1048577)+":42\r\n"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := resp.NewReader(tc.in)
			if _, err := r.ReadReply(); !errors.Is(err, resp.ErrTooLarge) || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("err = %v; want a limit error mentioning %q", err, tc.reason)
			}
			if next, err := r.ReadReply(); err != nil || next.Int != 42 {
				t.Fatalf("after the limit error: %v, %v; want :42", next, err)
			}
		})
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func TestTruncatedInput(t *testing.T) {
	cases := []struct{ name, in string }{
		{"simple without CRLF", "+OK"},
		{"simple without LF", "+OK\r"},
		{"type byte only", "+"},
		{"integer without CRLF", ":12"},
		{"bulk header only", "$5\r\n"},
		{"bulk header without CRLF", "$5"},
		{"bulk partial payload", "$5\r\nhel"},
		{"bulk without CRLF", "$5\r\nhello"},
		{"bulk without LF", "$5\r\nhello\r"},
		{"array header only", "*2\r\n"},
		{"array missing element", "*2\r\n:1\r\n"},
		{"nested array missing element", "*2\r\n*2\r\n:1\r\n:2\r\n*1\r\n"},
		{"map missing value", "%1\r\n+key\r\n"},
		{"attribute without reply", "|1\r\n+key\r\n+value\r\n"},
		{"empty attribute without reply", "|0\r\n"},
		{"attribute partial", "|1\r\n+key\r\n"},
		{"long line without CRLF", "+" + strings.Repeat("x", 100)},
		{"long line in array without CRLF", "*1\r\n+" + strings.Repeat("x", 100)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, rm := range readMakers {
				for _, nm := range readerMakers {
					rep, err := nm.fn(rm.fn(strings.NewReader(tc.in))).ReadReply()
					if err != io.ErrUnexpectedEOF {
						t.Errorf("%s/%s: ReadReply(%q) = %v, %v; want io.ErrUnexpectedEOF", rm.name, nm.name, tc.in, rep, err)
					}
				}
			}
		})
	}
}

// TestTruncatedTableCases cuts every decoding table case at every position:
// a proper prefix of a reply is never a reply, and never a clean EOF.
func TestTruncatedTableCases(t *testing.T) {
	for _, tc := range decodeCases {
		t.Run(tc.name, func(t *testing.T) {
			for n := 1; n < len(tc.in); n++ {
				for _, nm := range readerMakers {
					in := tc.in[:n]
					rep, err := nm.fn(strings.NewReader(in)).ReadReply()
					if err != io.ErrUnexpectedEOF {
						t.Fatalf("%s: ReadReply(%q) = %v, %v; want io.ErrUnexpectedEOF", nm.name, in, rep, err)
					}
				}
			}
		})
	}
}

func TestCleanEOF(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		replies int
	}{
		{"empty input", "", 0},
		{"after one reply", "+OK\r\n", 1},
		{"after bulk", "$3\r\nfoo\r\n", 1},
		{"after aggregate", "*2\r\n:1\r\n:2\r\n", 1},
		{"after three replies", ":1\r\n:2\r\n:3\r\n", 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, rm := range readMakers {
				r := resp.NewReader(rm.fn(strings.NewReader(tc.in)))
				got, err := readAll(r)
				if err != io.EOF || len(got) != tc.replies {
					t.Errorf("%s: read %d replies then %v; want %d then io.EOF", rm.name, len(got), err, tc.replies)
				}
				if _, err := r.ReadReply(); err != io.EOF {
					t.Errorf("%s: ReadReply after EOF: %v, want io.EOF", rm.name, err)
				}
			}
		})
	}
}

func TestReaderIOErrorsPassThrough(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		name string
		rd   io.Reader
		want error
	}{
		{"error before reply", iotest.ErrReader(boom), boom},
		{"error mid line", io.MultiReader(strings.NewReader("+OK"), iotest.ErrReader(boom)), boom},
		{"error mid bulk", io.MultiReader(strings.NewReader("$5\r\nhe"), iotest.ErrReader(boom)), boom},
		{"error mid array", io.MultiReader(strings.NewReader("*2\r\n:1\r\n"), iotest.ErrReader(boom)), boom},
		{"timeout mid line", iotest.TimeoutReader(iotest.OneByteReader(strings.NewReader("+OK\r\n"))), iotest.ErrTimeout},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := resp.NewReader(tc.rd).ReadReply()
			if !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
			if errors.Is(err, resp.ErrProtocol) {
				t.Errorf("I/O error %v matches ErrProtocol", err)
			}
		})
	}
}

func TestReaderReset(t *testing.T) {
	r := resp.NewReaderSize(strings.NewReader("+one\r\n+leftover\r\n"), 16)
	r.MaxBulkLen = 3
	if rep, err := r.ReadReply(); err != nil || string(rep.Str) != "one" {
		t.Fatalf("ReadReply = %v, %v", rep, err)
	}
	if r.Buffered() == 0 {
		t.Fatal("Buffered() = 0, want the leftover reply buffered")
	}
	r.Reset(strings.NewReader("+two\r\n$4\r\nlong\r\n"))
	if r.Buffered() != 0 {
		t.Errorf("Buffered() after Reset = %d, want 0", r.Buffered())
	}
	if rep, err := r.ReadReply(); err != nil || string(rep.Str) != "two" {
		t.Fatalf("after Reset: ReadReply = %v, %v; want \"two\"", rep, err)
	}
	if _, err := r.ReadReply(); !errors.Is(err, resp.ErrTooLarge) {
		t.Errorf("limits not kept across Reset: err = %v", err)
	}

	// Reset with a *bufio.Reader uses it directly.
	br := bufio.NewReader(strings.NewReader(":1\r\n:2\r\n"))
	r.Reset(br)
	if rep, err := r.ReadReply(); err != nil || rep.Int != 1 {
		t.Fatalf("ReadReply = %v, %v", rep, err)
	}
	if br.Buffered() != r.Buffered() || br.Buffered() != 4 {
		t.Errorf("bufio.Reader Buffered = %d, Reader Buffered = %d; want both 4", br.Buffered(), r.Buffered())
	}
}

func TestReadReplyAllocs(t *testing.T) {
	cases := []struct{ name, in string }{
		{"simple", "+OK\r\n"},
		{"integer", ":1\r\n"},
		{"null bulk", "$-1\r\n"},
		{"null array", "*-1\r\n"},
		{"resp3 null", "_\r\n"},
		{"error", "-ERR x\r\n"},
		{"bulk", "$5\r\nhello\r\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := resp.NewReader(&cycleReader{data: []byte(tc.in)})
			for i := 0; i < 10; i++ { // warm up the arenas
				if _, err := r.ReadReply(); err != nil {
					t.Fatal(err)
				}
			}
			var err error
			allocs := testing.AllocsPerRun(1000, func() {
				_, err = r.ReadReply()
			})
			if err != nil {
				t.Fatal(err)
			}
			if allocs != 0 {
				t.Errorf("ReadReply(%q) allocates %v times per call, want 0", tc.in, allocs)
			}
		})
	}
}

// TestAppendReplyRoundTrip re-encodes every decoded table case.
func TestAppendReplyRoundTrip(t *testing.T) {
	for _, tc := range decodeCases {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := resp.NewReader(strings.NewReader(tc.in)).ReadReply()
			if err != nil {
				t.Fatal(err)
			}
			enc := resp.AppendReply(nil, rep)
			want := tc.reenc
			if want == "" {
				want = tc.in
			}
			if string(enc) != want {
				t.Errorf("AppendReply = %q, want %q", enc, want)
			}
			again, err := resp.NewReader(bytes.NewReader(enc)).ReadReply()
			if err != nil {
				t.Fatalf("decoding %q: %v", enc, err)
			}
			if !again.Equal(rep) {
				t.Errorf("round trip: got %v, want %v", again, rep)
			}
			mustNoDiff(t, again, tc.want)
		})
	}
}

func TestResetDoesNotTouchCallersBufio(t *testing.T) {
	callers := bufio.NewReader(strings.NewReader("+mine\r\n+still mine\r\n"))
	r := resp.NewReader(callers)
	if rep, err := r.ReadReply(); err != nil || string(rep.Str) != "mine" {
		t.Fatalf("ReadReply = %v, %v", rep, err)
	}
	// Switching r to another source must leave the caller's reader alone.
	r.Reset(strings.NewReader("+other\r\n"))
	if rep, err := r.ReadReply(); err != nil || string(rep.Str) != "other" {
		t.Fatalf("after Reset: ReadReply = %v, %v", rep, err)
	}
	line, err := callers.ReadString('\n')
	if err != nil || line != "+still mine\r\n" {
		t.Errorf("caller's bufio.Reader now yields %q, %v; want %q", line, err, "+still mine\r\n")
	}

	// The same holds for a *bufio.Reader that NewReaderSize adopted as is.
	big := bufio.NewReaderSize(strings.NewReader(":1\r\n:2\r\n"), 4096)
	r = resp.NewReaderSize(big, 16)
	if rep, err := r.ReadReply(); err != nil || rep.Int != 1 {
		t.Fatalf("ReadReply = %v, %v", rep, err)
	}
	r.Reset(strings.NewReader(":3\r\n"))
	if rep, err := r.ReadReply(); err != nil || rep.Int != 3 {
		t.Fatalf("after Reset: ReadReply = %v, %v", rep, err)
	}
	if line, err := big.ReadString('\n'); err != nil || line != ":2\r\n" {
		t.Errorf("adopted bufio.Reader now yields %q, %v; want %q", line, err, ":2\r\n")
	}
}

func TestResetKeepsOwnBufferSize(t *testing.T) {
	r := resp.NewReaderSize(strings.NewReader(""), 16)
	r.Reset(strings.NewReader(":1\r\n" + strings.Repeat(":2\r\n", 20)))
	if _, err := r.ReadReply(); err != nil {
		t.Fatal(err)
	}
	if got := r.Buffered(); got != 12 {
		t.Errorf("Buffered() = %d after one 4-byte reply, want 12 (the 16-byte buffer kept)", got)
	}
}

// TestLargeHeaderDoesNotPreallocate checks that aggregate headers claiming
// many elements cost memory in proportion to the input actually received,
// not to the claimed length multiplied by the nesting depth.
func TestLargeHeaderDoesNotPreallocate(t *testing.T) {
	cases := []struct{ name, in string }{
		{"array", "*1048576\r\n"},
		{"nested arrays", strings.Repeat("*1048576\r\n", resp.DefaultMaxDepth)},
		{"nested maps", strings.Repeat("%1048576\r\n", resp.DefaultMaxDepth)},
		{"nested sets behind attribute", "|1\r\n+a\r\n" + strings.Repeat("~1048576\r\n", 16)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := resp.NewReader(strings.NewReader(tc.in)).ReadReply()
			runtime.ReadMemStats(&after)
			if err != io.ErrUnexpectedEOF {
				t.Fatalf("err = %v, want io.ErrUnexpectedEOF", err)
			}
			const budget = 16 << 20
			if got := after.TotalAlloc - before.TotalAlloc; got > budget {
				t.Errorf("%d bytes of input allocated %d MiB, want < %d MiB", len(tc.in), got>>20, budget>>20)
			}
		})
	}
}

// TestLargeAggregates decodes aggregates beyond the preallocation size,
// nested and next to small ones.
func TestLargeAggregates(t *testing.T) {
	for _, n := range []int{1023, 1024, 1025, 5000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var in strings.Builder
			var elems, pairs []resp.Reply
			fmt.Fprintf(&in, "*3\r\n*%d\r\n", n)
			for i := 0; i < n; i++ {
				fmt.Fprintf(&in, "+s%d\r\n", i)
				elems = append(elems, simple(fmt.Sprint("s", i)))
			}
			fmt.Fprintf(&in, "%%%d\r\n", n)
			for i := 0; i < n; i++ {
				fmt.Fprintf(&in, ":%d\r\n$%d\r\n%s\r\n", i, len(fmt.Sprint(i)), fmt.Sprint(i))
				pairs = append(pairs, integer(int64(i)), bulk(fmt.Sprint(i)))
			}
			in.WriteString("*1\r\n+tail\r\n")
			want := array(array(elems...), agg(resp.TypeMap, pairs...), array(simple("tail")))
			for _, nm := range readerMakers {
				r := nm.fn(strings.NewReader(in.String() + in.String()))
				for k := 0; k < 2; k++ {
					got, err := r.ReadReply()
					if err != nil {
						t.Fatalf("%s: ReadReply #%d: %v", nm.name, k, err)
					}
					if d := diffReply(got, want); d != "" {
						t.Fatalf("%s: reply #%d: %s", nm.name, k, d)
					}
				}
			}
		})
	}
}
