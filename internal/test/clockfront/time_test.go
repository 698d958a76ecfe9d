package clockfront

import (
	"testing"
	"time"

	"github.com/redlock-dev/redlock/resp"
)

func timeReply(sec, usec string) resp.Reply {
	return resp.Reply{Type: resp.TypeArray, Int: 2, Elems: []resp.Reply{
		{Type: resp.TypeBulkString, Str: []byte(sec)},
		{Type: resp.TypeBulkString, Str: []byte(usec)},
	}}
}

func TestAppendShifted(t *testing.T) {
	for _, tc := range []struct {
		name string
		rep  resp.Reply
		off  time.Duration
		want string // "" means not shifted
	}{
		{"forward", timeReply("1700000000", "100"), 2 * time.Second, "*2\r\n$10\r\n1700000002\r\n$3\r\n100\r\n"},
		{"carry", timeReply("1700000000", "999999"), 2 * time.Microsecond, "*2\r\n$10\r\n1700000001\r\n$1\r\n1\r\n"},
		{"backward", timeReply("1700000000", "500000"), -1500 * time.Millisecond, "*2\r\n$10\r\n1699999999\r\n$1\r\n0\r\n"},
		{"borrow", timeReply("1700000000", "0"), -time.Microsecond, "*2\r\n$10\r\n1699999999\r\n$6\r\n999999\r\n"},
		{"sub-microsecond truncated", timeReply("5", "7"), 1500 * time.Nanosecond, "*2\r\n$1\r\n5\r\n$1\r\n8\r\n"},
		{"before epoch clamped", timeReply("1", "0"), -time.Hour, "*2\r\n$1\r\n0\r\n$1\r\n0\r\n"},
		{"error", resp.Reply{Type: resp.TypeError, Str: []byte("NOAUTH Authentication required.")}, time.Second, ""},
		{"queued", resp.Reply{Type: resp.TypeSimpleString, Str: []byte("QUEUED")}, time.Second, ""},
		{"three elements", resp.Reply{Type: resp.TypeArray, Elems: []resp.Reply{{Type: resp.TypeBulkString, Str: []byte("1")}, {Type: resp.TypeBulkString, Str: []byte("1")}, {Type: resp.TypeBulkString, Str: []byte("1")}}}, time.Second, ""},
		{"not digits", timeReply("x", "1"), time.Second, ""},
		{"microseconds out of range", timeReply("1", "1000000"), time.Second, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := appendShifted([]byte("prefix"), tc.rep, tc.off)
			if tc.want == "" {
				if ok || string(got) != "prefix" {
					t.Fatalf("shifted a non-TIME reply: %q, %v", got, ok)
				}
				return
			}
			if !ok || string(got) != "prefix"+tc.want {
				t.Fatalf("got %q, %v; want %q", got, ok, "prefix"+tc.want)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	args := func(s ...string) [][]byte {
		b := make([][]byte, len(s))
		for i := range s {
			b[i] = []byte(s[i])
		}
		return b
	}
	for _, tc := range []struct {
		name string
		cmds [][]string
		want []kind
	}{
		{"time any case", [][]string{{"TIME"}, {"time"}, {"Time"}, {"GET", "time"}}, []kind{kindTime, kindTime, kindTime, kindPlain}},
		{"time in multi", [][]string{{"MULTI"}, {"TIME"}, {"EXEC"}, {"TIME"}, {"multi"}, {"TIME"}, {"discard"}, {"TIME"}},
			[]kind{kindPlain, kindPlain, kindPlain, kindTime, kindPlain, kindPlain, kindPlain, kindTime}},
		{"subscribe", [][]string{{"subscribe", "c"}}, []kind{kindRelay}},
		{"psubscribe", [][]string{{"PSUBSCRIBE", "c*"}}, []kind{kindRelay}},
		{"ssubscribe", [][]string{{"SSUBSCRIBE", "c"}}, []kind{kindRelay}},
		{"monitor", [][]string{{"MONITOR"}}, []kind{kindRelay}},
		{"hello 3", [][]string{{"HELLO", "3"}}, []kind{kindRelay}},
		{"hello 2 and bare", [][]string{{"HELLO", "2"}, {"HELLO"}}, []kind{kindPlain, kindPlain}},
		{"client reply", [][]string{{"CLIENT", "SETNAME", "x"}, {"client", "reply", "off"}}, []kind{kindPlain, kindRelay}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var multi bool
			for i, c := range tc.cmds {
				if got := classify(args(c...), &multi); got != tc.want[i] {
					t.Errorf("%q: kind %d, want %d", c, got, tc.want[i])
				}
			}
		})
	}
}
