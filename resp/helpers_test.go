package resp_test

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/redlock-dev/redlock/resp"
)

// Reply constructors for expected values.

func simple(s string) resp.Reply { return resp.Reply{Type: resp.TypeSimpleString, Str: []byte(s)} }
func errReply(s string) resp.Reply {
	return resp.Reply{Type: resp.TypeError, Str: []byte(s)}
}
func integer(n int64) resp.Reply { return resp.Reply{Type: resp.TypeInteger, Int: n} }
func bulk(s string) resp.Reply   { return resp.Reply{Type: resp.TypeBulkString, Str: []byte(s)} }
func null2() resp.Reply          { return resp.Reply{Type: resp.TypeNull} }         // RESP2 "$-1" / "*-1"
func null3() resp.Reply          { return resp.Reply{Type: resp.TypeNull, Int: 1} } // RESP3 "_"
func double(s string, f float64) resp.Reply {
	return resp.Reply{Type: resp.TypeDouble, Str: []byte(s), Float: f}
}
func boolean(b bool) resp.Reply {
	r := resp.Reply{Type: resp.TypeBoolean}
	if b {
		r.Int = 1
	}
	return r
}
func blobErr(s string) resp.Reply  { return resp.Reply{Type: resp.TypeBlobError, Str: []byte(s)} }
func verbatim(s string) resp.Reply { return resp.Reply{Type: resp.TypeVerbatim, Str: []byte(s)} }
func bigNum(s string) resp.Reply   { return resp.Reply{Type: resp.TypeBigNumber, Str: []byte(s)} }
func agg(t resp.Type, elems ...resp.Reply) resp.Reply {
	n := len(elems)
	if t == resp.TypeMap {
		n /= 2
	}
	return resp.Reply{Type: t, Int: int64(n), Elems: elems}
}
func array(elems ...resp.Reply) resp.Reply { return agg(resp.TypeArray, elems...) }

// diffReply describes the first difference between got and want, or returns
// "" when they match. It is stricter than Reply.Equal: it also compares
// Float for doubles (NaN-aware), Int for nulls and Int/Elems for aggregates.
func diffReply(got, want resp.Reply) string {
	return diffAt("reply", got, want)
}

func diffAt(path string, got, want resp.Reply) string {
	if got.Type != want.Type {
		return fmt.Sprintf("%s: type %v, want %v (got %v)", path, got.Type, want.Type, got)
	}
	switch want.Type {
	case resp.TypeInteger, resp.TypeBoolean, resp.TypeNull:
		if got.Int != want.Int {
			return fmt.Sprintf("%s: Int %d, want %d", path, got.Int, want.Int)
		}
	case resp.TypeDouble:
		if !(got.Float == want.Float || math.IsNaN(got.Float) && math.IsNaN(want.Float)) {
			return fmt.Sprintf("%s: Float %v, want %v", path, got.Float, want.Float)
		}
	}
	if !bytes.Equal(got.Str, want.Str) {
		return fmt.Sprintf("%s: Str %q, want %q", path, got.Str, want.Str)
	}
	if len(got.Elems) != len(want.Elems) {
		return fmt.Sprintf("%s: %d elems, want %d (got %v)", path, len(got.Elems), len(want.Elems), got)
	}
	for i := range want.Elems {
		if d := diffAt(fmt.Sprintf("%s[%d]", path, i), got.Elems[i], want.Elems[i]); d != "" {
			return d
		}
	}
	if !want.Equal(got) || !got.Equal(want) {
		return fmt.Sprintf("%s: Equal reports false for %v and %v", path, got, want)
	}
	return ""
}

// decodeCase is one entry of the decoding table. reenc is what AppendReply
// writes for the decoded reply when that differs from in ("" means in).
type decodeCase struct {
	name  string
	in    string
	want  resp.Reply
	reenc string
}

var (
	longSimple = strings.Repeat("long simple string ", 10) // 190 bytes, longer than a 16-byte buffer
	longError  = "ERR " + strings.Repeat("very long error message ", 8)
	longBulk   = strings.Repeat("0123456789abcdef", 100)
)

var decodeCases = []decodeCase{
	// RESP2 simple types.
	{name: "simple OK", in: "+OK\r\n", want: simple("OK")},
	{name: "simple empty", in: "+\r\n", want: simple("")},
	{name: "simple with CR inside", in: "+a\rb\r\n", want: simple("a\rb")},
	{name: "simple long", in: "+" + longSimple + "\r\n", want: simple(longSimple)},
	{name: "error ERR", in: "-ERR unknown command 'foo'\r\n", want: errReply("ERR unknown command 'foo'")},
	{name: "error NOSCRIPT", in: "-NOSCRIPT No matching script. Please use EVAL.\r\n", want: errReply("NOSCRIPT No matching script. Please use EVAL.")},
	{name: "error WRONGTYPE", in: "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n", want: errReply("WRONGTYPE Operation against a key holding the wrong kind of value")},
	{name: "error long", in: "-" + longError + "\r\n", want: errReply(longError)},
	{name: "integer zero", in: ":0\r\n", want: integer(0)},
	{name: "integer negative", in: ":-42\r\n", want: integer(-42)},
	{name: "integer max", in: ":9223372036854775807\r\n", want: integer(math.MaxInt64)},
	{name: "integer min", in: ":-9223372036854775808\r\n", want: integer(math.MinInt64)},
	{name: "integer plus sign", in: ":+7\r\n", want: integer(7), reenc: ":7\r\n"},
	{name: "null bulk", in: "$-1\r\n", want: null2()},
	{name: "null array", in: "*-1\r\n", want: null2(), reenc: "$-1\r\n"},
	{name: "bulk empty", in: "$0\r\n\r\n", want: bulk("")},
	{name: "bulk hello", in: "$5\r\nhello\r\n", want: bulk("hello")},
	{name: "bulk binary with CRLF inside", in: "$10\r\nfoo\r\nbar\x00\xff\r\n", want: bulk("foo\r\nbar\x00\xff")},
	{name: "bulk only CRLF", in: "$2\r\n\r\n\r\n", want: bulk("\r\n")},
	{name: "bulk long", in: "$1600\r\n" + longBulk + "\r\n", want: bulk(longBulk)},
	{name: "array empty", in: "*0\r\n", want: array()},
	{name: "array of bulk", in: "*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n", want: array(bulk("GET"), bulk("key"))},
	{name: "array mixed", in: "*5\r\n:1\r\n+two\r\n$5\r\nthree\r\n-ERR four\r\n$-1\r\n",
		want: array(integer(1), simple("two"), bulk("three"), errReply("ERR four"), null2())},
	{name: "array nested", in: "*2\r\n*3\r\n:1\r\n:2\r\n:3\r\n*2\r\n+Hello\r\n-World\r\n",
		want: array(array(integer(1), integer(2), integer(3)), array(simple("Hello"), errReply("World")))},
	{name: "array deeply nested", in: "*1\r\n*1\r\n*1\r\n*1\r\n+deep\r\n",
		want: array(array(array(array(simple("deep")))))},
	{name: "array with null array", in: "*3\r\n+a\r\n*-1\r\n+c\r\n", want: array(simple("a"), null2(), simple("c")),
		reenc: "*3\r\n+a\r\n$-1\r\n+c\r\n"},
	{name: "array of long simple strings", in: "*2\r\n+" + longSimple + "\r\n-" + longError + "\r\n",
		want: array(simple(longSimple), errReply(longError))},
	// RESP3.
	{name: "resp3 null", in: "_\r\n", want: null3()},
	{name: "double", in: ",3.14\r\n", want: double("3.14", 3.14)},
	{name: "double integral", in: ",10\r\n", want: double("10", 10)},
	{name: "double exponent", in: ",-1.5e10\r\n", want: double("-1.5e10", -1.5e10)},
	{name: "double inf", in: ",inf\r\n", want: double("inf", math.Inf(1))},
	{name: "double -inf", in: ",-inf\r\n", want: double("-inf", math.Inf(-1))},
	{name: "double nan", in: ",nan\r\n", want: double("nan", math.NaN())},
	{name: "boolean true", in: "#t\r\n", want: boolean(true)},
	{name: "boolean false", in: "#f\r\n", want: boolean(false)},
	{name: "blob error", in: "!21\r\nSYNTAX invalid syntax\r\n", want: blobErr("SYNTAX invalid syntax")},
	{name: "verbatim", in: "=15\r\ntxt:Some string\r\n", want: verbatim("txt:Some string")},
	{name: "big number", in: "(3492890328409238509324850943850943825024385\r\n", want: bigNum("3492890328409238509324850943850943825024385")},
	{name: "map", in: "%2\r\n+first\r\n:1\r\n+second\r\n:2\r\n",
		want: agg(resp.TypeMap, simple("first"), integer(1), simple("second"), integer(2))},
	{name: "map empty", in: "%0\r\n", want: agg(resp.TypeMap)},
	{name: "set", in: "~3\r\n+orange\r\n+apple\r\n#t\r\n", want: agg(resp.TypeSet, simple("orange"), simple("apple"), boolean(true))},
	{name: "push", in: ">3\r\n+message\r\n+channel\r\n$5\r\nhello\r\n",
		want: agg(resp.TypePush, simple("message"), simple("channel"), bulk("hello"))},
	{name: "map of mixed resp3", in: "%3\r\n$1\r\na\r\n,0.5\r\n+b\r\n_\r\n(123\r\n~1\r\n#f\r\n",
		want: agg(resp.TypeMap, bulk("a"), double("0.5", 0.5), simple("b"), null3(), bigNum("123"), agg(resp.TypeSet, boolean(false)))},
	{name: "attribute then array",
		in:    "|1\r\n+key-popularity\r\n%2\r\n$1\r\na\r\n,0.1923\r\n$1\r\nb\r\n,0.0012\r\n*2\r\n:2039123\r\n:9543892\r\n",
		want:  array(integer(2039123), integer(9543892)),
		reenc: "*2\r\n:2039123\r\n:9543892\r\n"},
	{name: "attribute then simple", in: "|1\r\n+ttl\r\n:3600\r\n+OK\r\n", want: simple("OK"), reenc: "+OK\r\n"},
	{name: "two attributes then integer", in: "|0\r\n|1\r\n+a\r\n+b\r\n:5\r\n", want: integer(5), reenc: ":5\r\n"},
	{name: "attribute inside array", in: "*2\r\n|1\r\n+a\r\n+b\r\n:1\r\n:2\r\n", want: array(integer(1), integer(2)),
		reenc: "*2\r\n:1\r\n:2\r\n"},
}

// cycleReader returns data over and over, forever.
type cycleReader struct {
	data []byte
	off  int
}

func (c *cycleReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m := copy(p[n:], c.data[c.off:])
		n += m
		c.off = (c.off + m) % len(c.data)
	}
	return n, nil
}

// readAll reads replies until an error and returns clones of them and the
// terminating error.
func readAll(r *resp.Reader) ([]resp.Reply, error) {
	var out []resp.Reply
	for {
		rep, err := r.ReadReply()
		if err != nil {
			return out, err
		}
		out = append(out, rep.Clone())
	}
}

var _ io.Reader = (*cycleReader)(nil)

func mustNoDiff(t *testing.T, got, want resp.Reply) {
	t.Helper()
	if d := diffReply(got, want); d != "" {
		t.Error(d)
	}
}
