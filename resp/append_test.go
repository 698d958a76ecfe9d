package resp_test

import (
	"math"
	"strings"
	"testing"

	"github.com/redlock-dev/redlock/resp"
)

func TestAppendCommand(t *testing.T) {
	cases := []struct {
		name string
		args [][]byte
		want string
	}{
		{"no args", nil, "*0\r\n"},
		{"PING", [][]byte{[]byte("PING")}, "*1\r\n$4\r\nPING\r\n"},
		{"SET", [][]byte{[]byte("SET"), []byte("key"), []byte("value")}, "*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n"},
		{"empty arg", [][]byte{[]byte("GET"), {}}, "*2\r\n$3\r\nGET\r\n$0\r\n\r\n"},
		{"nil arg", [][]byte{nil}, "*1\r\n$0\r\n\r\n"},
		{"binary arg", [][]byte{[]byte("SET"), []byte("k"), []byte("a\r\nb\x00\xff")}, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$6\r\na\r\nb\x00\xff\r\n"},
		{"long arg", [][]byte{[]byte(strings.Repeat("x", 1234))}, "*1\r\n$1234\r\n" + strings.Repeat("x", 1234) + "\r\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := resp.AppendCommand(nil, tc.args...); string(got) != tc.want {
				t.Errorf("AppendCommand(nil, ...) = %q, want %q", got, tc.want)
			}
			// It appends: an existing prefix is kept.
			if got := resp.AppendCommand([]byte("prefix"), tc.args...); string(got) != "prefix"+tc.want {
				t.Errorf("AppendCommand(prefix, ...) = %q, want %q", got, "prefix"+tc.want)
			}
			strs := make([]string, len(tc.args))
			for i, a := range tc.args {
				strs[i] = string(a)
			}
			if got := resp.AppendCommandStrings(nil, strs...); string(got) != tc.want {
				t.Errorf("AppendCommandStrings(nil, ...) = %q, want %q", got, tc.want)
			}
			if got := resp.AppendCommandStrings([]byte("prefix"), strs...); string(got) != "prefix"+tc.want {
				t.Errorf("AppendCommandStrings(prefix, ...) = %q, want %q", got, "prefix"+tc.want)
			}
		})
	}
}

func TestAppendCommandStrings(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no args", nil, "*0\r\n"},
		{"SET PX", []string{"SET", "lock", "token", "NX", "PX", "30000"},
			"*6\r\n$3\r\nSET\r\n$4\r\nlock\r\n$5\r\ntoken\r\n$2\r\nNX\r\n$2\r\nPX\r\n$5\r\n30000\r\n"},
		{"unicode", []string{"ECHO", "héllo"}, "*2\r\n$4\r\nECHO\r\n$6\r\nhéllo\r\n"},
		{"empty string", []string{""}, "*1\r\n$0\r\n\r\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := resp.AppendCommandStrings(nil, tc.args...); string(got) != tc.want {
				t.Errorf("AppendCommandStrings = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestAppendBulk(t *testing.T) {
	cases := []struct {
		name string
		in   []byte
		want string
	}{
		{"nil", nil, "$0\r\n\r\n"},
		{"empty", []byte{}, "$0\r\n\r\n"},
		{"hello", []byte("hello"), "$5\r\nhello\r\n"},
		{"CRLF inside", []byte("\r\n"), "$2\r\n\r\n\r\n"},
		{"binary", []byte{0, 1, 0xfe, 0xff}, "$4\r\n\x00\x01\xfe\xff\r\n"},
		{"ten bytes", []byte("0123456789"), "$10\r\n0123456789\r\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := resp.AppendBulk(nil, tc.in); string(got) != tc.want {
				t.Errorf("AppendBulk = %q, want %q", got, tc.want)
			}
			if got := resp.AppendBulk([]byte("x"), tc.in); string(got) != "x"+tc.want {
				t.Errorf("AppendBulk(prefix) = %q, want %q", got, "x"+tc.want)
			}
			if got := resp.AppendBulkString(nil, string(tc.in)); string(got) != tc.want {
				t.Errorf("AppendBulkString = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestAppendBulkInt(t *testing.T) {
	cases := []struct {
		name string
		in   int64
		want string
	}{
		{"zero", 0, "$1\r\n0\r\n"},
		{"one", 1, "$1\r\n1\r\n"},
		{"negative", -42, "$3\r\n-42\r\n"},
		{"PX", 30000, "$5\r\n30000\r\n"},
		{"max", math.MaxInt64, "$19\r\n9223372036854775807\r\n"},
		{"min", math.MinInt64, "$20\r\n-9223372036854775808\r\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := resp.AppendBulkInt(nil, tc.in); string(got) != tc.want {
				t.Errorf("AppendBulkInt(%d) = %q, want %q", tc.in, got, tc.want)
			}
			if got := resp.AppendBulkInt([]byte("*2\r\n"), tc.in); string(got) != "*2\r\n"+tc.want {
				t.Errorf("AppendBulkInt(prefix, %d) = %q", tc.in, got)
			}
		})
	}
}

func TestAppendArrayHeader(t *testing.T) {
	cases := []struct {
		name string
		n    int
		want string
	}{
		{"zero", 0, "*0\r\n"},
		{"three", 3, "*3\r\n"},
		{"large", 1 << 20, "*1048576\r\n"},
		{"null", -1, "*-1\r\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := resp.AppendArrayHeader(nil, tc.n); string(got) != tc.want {
				t.Errorf("AppendArrayHeader(%d) = %q, want %q", tc.n, got, tc.want)
			}
		})
	}
}

// TestAppendComposed builds a command the way package conn does: a header,
// then bulk strings and integers.
func TestAppendComposed(t *testing.T) {
	dst := resp.AppendArrayHeader(nil, 4)
	dst = resp.AppendBulkString(dst, "EVALSHA")
	dst = resp.AppendBulk(dst, []byte("abc"))
	dst = resp.AppendBulkInt(dst, 1)
	dst = resp.AppendBulkString(dst, "key")
	want := "*4\r\n$7\r\nEVALSHA\r\n$3\r\nabc\r\n$1\r\n1\r\n$3\r\nkey\r\n"
	if string(dst) != want {
		t.Errorf("got %q, want %q", dst, want)
	}
	rep, err := resp.NewReader(strings.NewReader(string(dst))).ReadReply()
	if err != nil {
		t.Fatal(err)
	}
	mustNoDiff(t, rep, array(bulk("EVALSHA"), bulk("abc"), bulk("1"), bulk("key")))
}

func TestAppendAllocs(t *testing.T) {
	args := [][]byte{[]byte("SET"), []byte("lock:resource"), []byte("0123456789abcdef"), []byte("NX"), []byte("PX"), []byte("30000")}
	strs := []string{"SET", "lock:resource", "0123456789abcdef", "NX", "PX", "30000"}
	buf := make([]byte, 0, 256)
	cases := []struct {
		name string
		fn   func()
	}{
		{"AppendCommand", func() { buf = resp.AppendCommand(buf[:0], args...) }},
		{"AppendCommandStrings", func() { buf = resp.AppendCommandStrings(buf[:0], strs...) }},
		{"AppendBulk", func() { buf = resp.AppendBulk(buf[:0], args[2]) }},
		{"AppendBulkString", func() { buf = resp.AppendBulkString(buf[:0], strs[2]) }},
		{"AppendBulkInt", func() { buf = resp.AppendBulkInt(buf[:0], -1234567890) }},
		{"AppendArrayHeader", func() { buf = resp.AppendArrayHeader(buf[:0], 12345) }},
		{"AppendReply", func() {
			buf = resp.AppendReply(buf[:0], resp.Reply{Type: resp.TypeDouble, Float: 1.5})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if allocs := testing.AllocsPerRun(100, tc.fn); allocs != 0 {
				t.Errorf("%s into a pre-sized buffer allocates %v times, want 0", tc.name, allocs)
			}
		})
	}
}

func TestAppendReply(t *testing.T) {
	cases := []struct {
		name string
		in   resp.Reply
		want string
	}{
		{"simple", simple("OK"), "+OK\r\n"},
		{"error", errReply("ERR bad"), "-ERR bad\r\n"},
		{"integer", integer(-7), ":-7\r\n"},
		{"bulk", bulk("a\r\nb"), "$4\r\na\r\nb\r\n"},
		{"bulk nil Str", resp.Reply{Type: resp.TypeBulkString}, "$0\r\n\r\n"},
		{"null resp2", null2(), "$-1\r\n"},
		{"null resp3", null3(), "_\r\n"},
		{"double from Str", double("3.14", 3.14), ",3.14\r\n"},
		{"double from Float", resp.Reply{Type: resp.TypeDouble, Float: 1.5}, ",1.5\r\n"},
		{"double large Float", resp.Reply{Type: resp.TypeDouble, Float: 1e21}, ",1e+21\r\n"},
		{"double inf Float", resp.Reply{Type: resp.TypeDouble, Float: math.Inf(1)}, ",inf\r\n"},
		{"double -inf Float", resp.Reply{Type: resp.TypeDouble, Float: math.Inf(-1)}, ",-inf\r\n"},
		{"double nan Float", resp.Reply{Type: resp.TypeDouble, Float: math.NaN()}, ",nan\r\n"},
		{"true", boolean(true), "#t\r\n"},
		{"false", boolean(false), "#f\r\n"},
		{"blob error", blobErr("SYNTAX x"), "!8\r\nSYNTAX x\r\n"},
		{"verbatim", verbatim("txt:hi"), "=6\r\ntxt:hi\r\n"},
		{"big number", bigNum("12345678901234567890"), "(12345678901234567890\r\n"},
		{"array", array(integer(1), bulk("x")), "*2\r\n:1\r\n$1\r\nx\r\n"},
		{"empty array", array(), "*0\r\n"},
		{"set", agg(resp.TypeSet, simple("a")), "~1\r\n+a\r\n"},
		{"push", agg(resp.TypePush, simple("a"), integer(2)), ">2\r\n+a\r\n:2\r\n"},
		{"map", agg(resp.TypeMap, simple("k"), null3()), "%1\r\n+k\r\n_\r\n"},
		{"nested", array(array(null2()), agg(resp.TypeMap)), "*2\r\n*1\r\n$-1\r\n%0\r\n"},
		{"unknown type writes nothing", resp.Reply{Type: '?'}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := resp.AppendReply([]byte("pre"), tc.in); string(got) != "pre"+tc.want {
				t.Errorf("AppendReply = %q, want %q", got, "pre"+tc.want)
			}
		})
	}
}
