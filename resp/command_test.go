package resp_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/redlock-dev/redlock/resp"
)

func readCommands(t *testing.T, r *resp.CommandReader) ([][]string, error) {
	t.Helper()
	var out [][]string
	for range 1000 {
		cmd, err := r.ReadCommand()
		if err != nil {
			if cmd.Args != nil {
				t.Fatalf("error %v with args %q", err, cmd.Args)
			}
			return out, err
		}
		var words []string
		for _, a := range cmd.Args {
			words = append(words, string(a))
		}
		out = append(out, words)
	}
	t.Fatal("too many commands")
	return nil, nil
}

func TestCommandReader(t *testing.T) {
	cases := []struct {
		name   string
		in     string
		want   [][]string
		err    string // substring of the final error; "EOF" for a clean end
		tooBig bool   // the error matches ErrTooLarge
	}{
		{name: "multibulk", in: "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", want: [][]string{{"GET", "k"}}, err: "EOF"},
		{name: "pipeline", in: "*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$0\r\n\r\n", want: [][]string{{"PING"}, {"ECHO", ""}}, err: "EOF"},
		{name: "binary", in: "*1\r\n$4\r\n\x00\r\n\xff\r\n", want: [][]string{{"\x00\r\n\xff"}}, err: "EOF"},
		{name: "empty multibulk skipped", in: "*0\r\n*-1\r\n*1\r\n$1\r\nx\r\n", want: [][]string{{"x"}}, err: "EOF"},
		{name: "inline", in: "SET k v NX PX 100\r\n", want: [][]string{{"SET", "k", "v", "NX", "PX", "100"}}, err: "EOF"},
		{name: "inline lf", in: "PING\nPING\n", want: [][]string{{"PING"}, {"PING"}}, err: "EOF"},
		{name: "inline blank skipped", in: "\r\n   \r\nPING\r\n", want: [][]string{{"PING"}}, err: "EOF"},
		{name: "inline quotes", in: `SET "a b" 'c d' "\x41\n\"" 'it\'s'` + "\r\n", want: [][]string{{"SET", "a b", "c d", "A\n\"", "it's"}}, err: "EOF"},
		{name: "inline unbalanced", in: "SET \"a\r\n", err: resp.ReasonQuotes},
		{name: "inline quote then text", in: "SET \"a\"b\r\n", err: resp.ReasonQuotes},
		{name: "inline too long", in: strings.Repeat("a", 70<<10) + "\r\n", err: resp.ReasonInlineLen, tooBig: true},
		{name: "bad count", in: "*x\r\n", err: resp.ReasonMultibulkLen},
		{name: "plus count", in: "*+1\r\n$1\r\nx\r\n", err: resp.ReasonMultibulkLen},
		{name: "leading zero count", in: "*01\r\n$1\r\nx\r\n", err: resp.ReasonMultibulkLen},
		{name: "overflowing count", in: "*9223372036854775808\r\n", err: resp.ReasonMultibulkLen},
		{name: "huge count", in: "*9223372036854775807\r\n", err: resp.ReasonMultibulkLen, tooBig: true},
		{name: "million args", in: "*1000000\r\n", err: resp.ReasonMultibulkLen, tooBig: true},
		{name: "huge bulk", in: "*1\r\n$9223372036854775807\r\n", err: resp.ReasonBulkLen, tooBig: true},
		{name: "overflowing bulk", in: "*1\r\n$99999999999999999999999\r\n", err: resp.ReasonBulkLen},
		{name: "negative bulk", in: "*1\r\n$-1\r\n", err: resp.ReasonBulkLen},
		{name: "not a bulk", in: "*1\r\n:1\r\n", err: "expected '$'"},
		{name: "bulk without crlf", in: "*1\r\n$1\r\nxyz", err: "not terminated"},
		{name: "count without cr", in: "*1\n$1\r\nx\r\n", err: "not terminated by CRLF"},
		{name: "long count line", in: "*" + strings.Repeat("1", 100) + "\r\n", err: "too big count string"},
		{name: "unterminated", in: "*2\r\n$3\r\nGET\r\n", err: io.ErrUnexpectedEOF.Error()},
		{name: "unterminated bulk", in: "*1\r\n$10\r\nabc", err: io.ErrUnexpectedEOF.Error()},
		{name: "args over command limit", in: "*2\r\n$60\r\n" + strings.Repeat("a", 60) + "\r\n$60\r\n", err: resp.ReasonCommandLen, tooBig: true},
	}
	for _, tc := range cases {
		for _, mk := range []struct {
			name string
			f    func(io.Reader) io.Reader
		}{{"full", func(r io.Reader) io.Reader { return r }}, {"onebyte", iotest.OneByteReader}, {"half", iotest.HalfReader}} {
			t.Run(tc.name+"/"+mk.name, func(t *testing.T) {
				r := resp.NewCommandReader(mk.f(strings.NewReader(tc.in)), 64)
				r.MaxArgs = 1024
				r.MaxBulkLen = 1 << 20
				r.MaxCommandLen = 100
				got, err := readCommands(t, r)
				if fmt.Sprint(got) != fmt.Sprint(tc.want) {
					t.Fatalf("commands %q, want %q", got, tc.want)
				}
				if tc.err == "EOF" {
					if err != io.EOF {
						t.Fatalf("error %v, want io.EOF", err)
					}
					return
				}
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				if errors.Is(err, resp.ErrTooLarge) != tc.tooBig {
					t.Fatalf("errors.Is(%v, ErrTooLarge) = %v", err, !tc.tooBig)
				}
			})
		}
	}
}

// TestCommandReaderGrow: the buffer grows only as bytes arrive, every byte
// is charged through Grow before it is allocated, and a refusal fails the
// read with ErrTooLarge.
func TestCommandReaderGrow(t *testing.T) {
	t.Run("claimed length costs nothing", func(t *testing.T) {
		charged := 0
		r := resp.NewCommandReader(strings.NewReader("*1\r\n$536870912\r\nabc"), 64)
		r.Grow = func(n int) bool { charged += n; return true }
		cmd, err := r.ReadCommand()
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatal(err)
		}
		if charged > 1024 || cmd.Size != charged {
			t.Fatalf("charged %d, Size %d for 3 bytes sent", charged, cmd.Size)
		}
	})
	t.Run("size matches charge", func(t *testing.T) {
		charged := 0
		var in []byte
		for i := range 50 {
			in = resp.AppendCommandStrings(in, "SET", fmt.Sprint("k", i), strings.Repeat("v", i*100))
		}
		r := resp.NewCommandReader(iotest.HalfReader(bytes.NewReader(in)), 128)
		r.Grow = func(n int) bool { charged += n; return true }
		total := 0
		for i := range 50 {
			cmd, err := r.ReadCommand()
			if err != nil {
				t.Fatal(err)
			}
			if got := string(cmd.Args[2]); got != strings.Repeat("v", i*100) {
				t.Fatalf("command %d: value of %d bytes", i, len(got))
			}
			need := 3 + len(cmd.Args[1]) + i*100
			if cmd.Size < need || cmd.Size > 2*need+512 {
				t.Fatalf("command %d: Size %d for %d bytes", i, cmd.Size, need)
			}
			total += cmd.Size
		}
		if total != charged {
			t.Fatalf("Sizes add up to %d, Grow was charged %d", total, charged)
		}
	})
	t.Run("refused", func(t *testing.T) {
		left := 1000
		r := resp.NewCommandReader(strings.NewReader(string(resp.AppendCommandStrings(nil, "ECHO", strings.Repeat("x", 5000)))), 64)
		r.Grow = func(n int) bool {
			if n > left {
				return false
			}
			left -= n
			return true
		}
		cmd, err := r.ReadCommand()
		if !errors.Is(err, resp.ErrTooLarge) || !strings.Contains(err.Error(), resp.ReasonMemory) {
			t.Fatalf("err %v", err)
		}
		if cmd.Size != 1000-left {
			t.Fatalf("Size %d, charged %d", cmd.Size, 1000-left)
		}
	})
}

func TestParseInt(t *testing.T) {
	for _, tc := range []struct {
		in string
		v  int64
		ok bool
	}{
		{"0", 0, true}, {"5", 5, true}, {"-5", -5, true}, {"9223372036854775807", 1<<63 - 1, true},
		{"-9223372036854775808", -1 << 63, true}, {"9223372036854775808", 0, false}, {"05", 0, false},
		{"+5", 0, false}, {"-0", 0, false}, {"", 0, false}, {"-", 0, false}, {" 5", 0, false},
		{"5 ", 0, false}, {"1e3", 0, false}, {"00", 0, false}, {"99999999999999999999", 0, false},
	} {
		v, ok := resp.ParseInt([]byte(tc.in))
		if v != tc.v || ok != tc.ok {
			t.Errorf("ParseInt(%q) = %d, %v; want %d, %v", tc.in, v, ok, tc.v, tc.ok)
		}
	}
}

// FuzzCommandReader: arbitrary bytes never panic, never make the reader
// allocate more than they carry, and a command re-encoded as RESP reads
// back as itself.
func FuzzCommandReader(f *testing.F) {
	for _, s := range []string{
		"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", "PING\r\n", "SET \"a b\" 'c' \"\\x41\"\r\n", "*1\r\n$9223372036854775807\r\n",
		"*9223372036854775807\r\n", "*0\r\n", "*-1\r\n\r\n", "\"", "*1\r\n$0\r\n\r\n", "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n",
	} {
		f.Add([]byte(s))
	}
	// Many small commands in one stream: each holds a buffer of its own
	// (minCommandBuf), freed with it; the bound is per command.
	f.Add([]byte(strings.Repeat("*1\r\n$1\r\na\r\n", 30) + strings.Repeat("a b\n", 30)))
	f.Fuzz(func(t *testing.T, data []byte) {
		charged := 0
		src := bytes.NewReader(data)
		r := resp.NewCommandReader(src, 16)
		r.MaxArgs, r.MaxBulkLen, r.MaxInlineLen, r.MaxCommandLen = 64, 4096, 4096, 8192
		r.Grow = func(n int) bool { charged += n; return charged <= 1<<20 }
		sized, consumed := 0, 0
		for range len(data) + 1 {
			cmd, err := r.ReadCommand()
			sized += cmd.Size
			// A command holds at most twice its own bytes, its argument
			// headers, one first buffer (128) and one argument's slack
			// (256) ahead of its bytes: a reader's memory is bounded by
			// what the client sent for the commands it holds.
			now := len(data) - src.Len() - r.Buffered()
			if bound := 2*(now-consumed) + 24*len(cmd.Args) + 128 + 256; cmd.Size > bound {
				t.Fatalf("a command of %d bytes (%d args) holds %d bytes, bound %d", now-consumed, len(cmd.Args), cmd.Size, bound)
			}
			consumed = now
			if err != nil {
				if err != io.EOF && err != io.ErrUnexpectedEOF && !errors.Is(err, resp.ErrProtocol) {
					t.Fatalf("unexpected error %T %v", err, err)
				}
				break
			}
			if len(cmd.Args) == 0 || len(cmd.Args) > 64 {
				t.Fatalf("%d args", len(cmd.Args))
			}
			again, err := resp.NewCommandReader(bytes.NewReader(resp.AppendCommand(nil, cmd.Args...)), 16).ReadCommand()
			if err != nil || fmt.Sprintf("%q", again.Args) != fmt.Sprintf("%q", cmd.Args) {
				t.Fatalf("round trip of %q: %q, %v", cmd.Args, again.Args, err)
			}
		}
		if sized != charged {
			t.Fatalf("Sizes %d != charged %d", sized, charged)
		}
	})
}

// TestCommandReaderArgCost: argument headers are charged, and an inline
// line's argument count is checked as the words are split.
func TestCommandReaderArgCost(t *testing.T) {
	charged := 0
	r := resp.NewCommandReader(strings.NewReader(strings.Repeat("*1000\r\n"+strings.Repeat("$0\r\n\r\n", 1000), 1)), 64)
	r.Grow = func(n int) bool { charged += n; return true }
	cmd, err := r.ReadCommand()
	if err != nil || len(cmd.Args) != 1000 {
		t.Fatal(err)
	}
	if charged < 24000 || cmd.Size != charged {
		t.Fatalf("1000 empty arguments charged %d (Size %d)", charged, cmd.Size)
	}
	r = resp.NewCommandReader(strings.NewReader(strings.Repeat("a ", 5000)+"\r\n"), 64)
	r.MaxArgs = 10
	if _, err := r.ReadCommand(); !errors.Is(err, resp.ErrTooLarge) {
		t.Fatalf("inline line with 5000 words and MaxArgs 10: %v", err)
	}
}

// TestCommandReaderAllocs: a command costs its Args and its buffer, no
// more (each argument's CRLF cost one more allocation, six per SET NX PX).
func TestCommandReaderAllocs(t *testing.T) {
	req := []byte("*6\r\n$3\r\nSET\r\n$8\r\nlock:key\r\n$5\r\ntoken\r\n$2\r\nNX\r\n$2\r\nPX\r\n$5\r\n30000\r\n")
	src := bytes.NewReader(req)
	r := resp.NewCommandReader(src, 1<<10)
	allocs := testing.AllocsPerRun(100, func() {
		src.Reset(req)
		r.Reset(src)
		if cmd, err := r.ReadCommand(); err != nil || len(cmd.Args) != 6 {
			t.Fatalf("ReadCommand: %q, %v", cmd.Args, err)
		}
	})
	if allocs > 2 {
		t.Errorf("ReadCommand of a SET NX PX: %.0f allocs, want <= 2", allocs)
	}
}
