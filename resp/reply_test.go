package resp_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/redlock-dev/redlock/resp"
)

func TestTypeString(t *testing.T) {
	cases := []struct {
		typ  resp.Type
		want string
	}{
		{resp.TypeSimpleString, "simple-string"},
		{resp.TypeError, "error"},
		{resp.TypeInteger, "integer"},
		{resp.TypeBulkString, "bulk-string"},
		{resp.TypeArray, "array"},
		{resp.TypeNull, "null"},
		{resp.TypeDouble, "double"},
		{resp.TypeBoolean, "boolean"},
		{resp.TypeBlobError, "blob-error"},
		{resp.TypeVerbatim, "verbatim-string"},
		{resp.TypeBigNumber, "big-number"},
		{resp.TypeMap, "map"},
		{resp.TypeSet, "set"},
		{resp.TypePush, "push"},
		{resp.Type('?'), `type("?")`},
		{resp.Type(0), `type("\x00")`},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			if got := tc.typ.String(); got != tc.want {
				t.Errorf("Type(%q).String() = %q, want %q", byte(tc.typ), got, tc.want)
			}
		})
	}
}

func TestReplyPredicates(t *testing.T) {
	cases := []struct {
		name                string
		r                   resp.Reply
		isOK, isNull, isErr bool
		text                string
	}{
		{"OK", simple("OK"), true, false, false, "OK"},
		{"ok lower", simple("ok"), false, false, false, "ok"},
		{"OKAY", simple("OKAY"), false, false, false, "OKAY"},
		{"bulk OK", bulk("OK"), false, false, false, "OK"},
		{"error", errReply("ERR x"), false, false, true, "ERR x"},
		{"blob error", blobErr("ERR y"), false, false, true, "ERR y"},
		{"null2", null2(), false, true, false, ""},
		{"null3", null3(), false, true, false, ""},
		{"integer", integer(-12), false, false, false, "-12"},
		{"double", double("1.5", 1.5), false, false, false, "1.5"},
		{"verbatim", verbatim("txt:x"), false, false, false, "txt:x"},
		{"array", array(simple("OK")), false, false, false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.r.IsOK(); got != tc.isOK {
				t.Errorf("IsOK() = %v, want %v", got, tc.isOK)
			}
			if got := tc.r.IsNull(); got != tc.isNull {
				t.Errorf("IsNull() = %v, want %v", got, tc.isNull)
			}
			if got := tc.r.IsError(); got != tc.isErr {
				t.Errorf("IsError() = %v, want %v", got, tc.isErr)
			}
			if got := tc.r.Err() != nil; got != tc.isErr {
				t.Errorf("Err() != nil is %v, want %v", got, tc.isErr)
			}
			if got := tc.r.Text(); got != tc.text {
				t.Errorf("Text() = %q, want %q", got, tc.text)
			}
		})
	}
}

func TestReplyString(t *testing.T) {
	cases := []struct {
		name string
		r    resp.Reply
		want string
	}{
		{"simple", simple("OK"), `"OK"`},
		{"bulk", bulk("a\nb"), `"a\nb"`},
		{"integer", integer(3), "(integer) 3"},
		{"null", null2(), "(nil)"},
		{"error", errReply("ERR x"), "(error) ERR x"},
		{"blob error", blobErr("SYNTAX y"), "(error) SYNTAX y"},
		{"true", boolean(true), "(true)"},
		{"false", boolean(false), "(false)"},
		{"array", array(integer(1), simple("a"), null3()), `[(integer) 1 "a" (nil)]`},
		{"empty array", array(), "[]"},
		{"map", agg(resp.TypeMap, simple("k"), array(integer(2))), `["k" [(integer) 2]]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.r.String(); got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestReplyEqual(t *testing.T) {
	cases := []struct {
		name string
		a, b resp.Reply
		want bool
	}{
		{"same simple", simple("a"), simple("a"), true},
		{"different Str", simple("a"), simple("b"), false},
		{"different type", simple("a"), bulk("a"), false},
		{"integers", integer(1), integer(1), true},
		{"different integers", integer(1), integer(2), false},
		{"booleans", boolean(true), boolean(false), false},
		{"nulls of both kinds", null2(), null3(), true},
		{"nil vs empty Str", resp.Reply{Type: resp.TypeBulkString}, bulk(""), true},
		{"arrays", array(integer(1), simple("x")), array(integer(1), simple("x")), true},
		{"array lengths", array(integer(1)), array(integer(1), integer(1)), false},
		{"nested element", array(array(integer(1))), array(array(integer(2))), false},
		{"array vs set", array(integer(1)), agg(resp.TypeSet, integer(1)), false},
		{"empty arrays", array(), resp.Reply{Type: resp.TypeArray}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.a.Equal(tc.b); got != tc.want {
				t.Errorf("a.Equal(b) = %v, want %v", got, tc.want)
			}
			if got := tc.b.Equal(tc.a); got != tc.want {
				t.Errorf("b.Equal(a) = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestReplyClone(t *testing.T) {
	orig := array(simple("abc"), array(bulk("def"), integer(4)), agg(resp.TypeMap, simple("k"), double("1.5", 1.5)))
	c := orig.Clone()
	mustNoDiff(t, c, orig)
	// Scribble over the original: the clone must not change.
	orig.Elems[0].Str[0] = 'X'
	orig.Elems[1].Elems[0].Str[0] = 'Y'
	orig.Elems[1].Elems[1] = integer(99)
	orig.Elems[2].Elems[1].Str[0] = '9'
	mustNoDiff(t, c, array(simple("abc"), array(bulk("def"), integer(4)), agg(resp.TypeMap, simple("k"), double("1.5", 1.5))))

	if z := (resp.Reply{}).Clone(); z.Str != nil || z.Elems != nil {
		t.Errorf("Clone of zero Reply = %#v", z)
	}
}

func TestErrorPrefix(t *testing.T) {
	cases := []struct {
		msg, want string
	}{
		{"ERR unknown command", "ERR"},
		{"NOSCRIPT No matching script. Please use EVAL.", "NOSCRIPT"},
		{"WRONGTYPE Operation against a key", "WRONGTYPE"},
		{"MOVED 3999 127.0.0.1:6381", "MOVED"},
		{"ERR", "ERR"},
		{"CLUSTERDOWN_2 x", "CLUSTERDOWN_2"},
		{"Err mixed case", ""},
		{"something lower", ""},
		{" leading space", ""},
		{"", ""},
		{"ERR: colon", ""},
	}
	for _, tc := range cases {
		t.Run(tc.msg, func(t *testing.T) {
			e := &resp.Error{Msg: tc.msg}
			if got := e.Prefix(); got != tc.want {
				t.Errorf("Prefix() = %q, want %q", got, tc.want)
			}
			if e.Error() != tc.msg {
				t.Errorf("Error() = %q, want %q", e.Error(), tc.msg)
			}
		})
	}
}

func TestHasErrorPrefixFunc(t *testing.T) {
	cases := []struct {
		msg, prefix string
		want        bool
	}{
		{"NOSCRIPT No matching script", "NOSCRIPT", true},
		{"NOSCRIPT", "NOSCRIPT", true},
		{"NOSCRIPTX y", "NOSCRIPT", false},
		{"NOSCRIP", "NOSCRIPT", false},
		{"ERR x", "NOSCRIPT", false},
		{"noscript x", "NOSCRIPT", false},
		{"", "ERR", false},
	}
	for _, tc := range cases {
		t.Run(tc.msg+"/"+tc.prefix, func(t *testing.T) {
			if got := resp.HasErrorPrefix([]byte(tc.msg), tc.prefix); got != tc.want {
				t.Errorf("HasErrorPrefix(%q, %q) = %v, want %v", tc.msg, tc.prefix, got, tc.want)
			}
		})
	}
	msg := []byte("NOSCRIPT No matching script")
	if allocs := testing.AllocsPerRun(100, func() { resp.HasErrorPrefix(msg, "NOSCRIPT") }); allocs != 0 {
		t.Errorf("HasErrorPrefix allocates %v times, want 0", allocs)
	}
	rep := errReply("NOSCRIPT x")
	if allocs := testing.AllocsPerRun(100, func() { rep.HasErrorPrefix("NOSCRIPT") }); allocs != 0 {
		t.Errorf("Reply.HasErrorPrefix allocates %v times, want 0", allocs)
	}
}

func TestProtocolErrorType(t *testing.T) {
	cases := []struct {
		name            string
		err             *resp.ProtocolError
		msg             string
		proto, tooLarge bool
	}{
		{"syntax", &resp.ProtocolError{Reason: "invalid integer", Data: "x"}, `resp: protocol error: invalid integer: "x"`, true, false},
		{"no data", &resp.ProtocolError{Reason: "empty line"}, "resp: protocol error: empty line", true, false},
		{"limit", &resp.ProtocolError{Reason: "too big", Limit: true}, "resp: protocol error: too big", true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err.Error() != tc.msg {
				t.Errorf("Error() = %q, want %q", tc.err.Error(), tc.msg)
			}
			var err error = tc.err
			if errors.Is(err, resp.ErrProtocol) != tc.proto || errors.Is(err, resp.ErrTooLarge) != tc.tooLarge {
				t.Errorf("Is(ErrProtocol) = %v, Is(ErrTooLarge) = %v; want %v, %v",
					errors.Is(err, resp.ErrProtocol), errors.Is(err, resp.ErrTooLarge), tc.proto, tc.tooLarge)
			}
			wrapped := errors.Join(errors.New("conn: read"), err)
			if !errors.Is(wrapped, resp.ErrProtocol) || !strings.Contains(wrapped.Error(), tc.msg) {
				t.Errorf("wrapped error lost its identity: %v", wrapped)
			}
		})
	}
}
