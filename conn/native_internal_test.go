package conn

import (
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/resp"
)

// TestParseNativeInfo: only COMMAND INFO entries named for the command,
// in the two-element reply asked for, count; a SET that documents IFEQ
// (at any depth up to the bound) counts; any other shape means none.
func TestParseNativeInfo(t *testing.T) {
	str := func(s string) resp.Reply { return resp.Reply{Type: resp.TypeBulkString, Str: []byte(s)} }
	arr := func(e ...resp.Reply) resp.Reply { return resp.Reply{Type: resp.TypeArray, Elems: e} }
	null := resp.Reply{Type: resp.TypeNull}
	entry := func(name string) resp.Reply { return arr(str(name), resp.Reply{Type: resp.TypeInteger, Int: -2}) }
	nest := func(r resp.Reply, depth int) resp.Reply {
		for range depth {
			r = arr(r)
		}
		return r
	}
	for _, tc := range []struct {
		name    string
		info    resp.Reply
		docs    resp.Reply
		del     string
		setIfEq bool
	}{
		{"redis 8.4", arr(entry("delex"), null), arr(str("set"), nest(str("IFEQ"), 4)), "DELEX", true},
		{"valkey 9.0", arr(null, entry("delifeq")), arr(str("set"), nest(str("ifeq"), 4)), "DELIFEQ", true},
		{"both: DELEX", arr(entry("delex"), entry("delifeq")), null, "DELEX", false},
		{"none", arr(null, null), arr(str("set"), nest(str("NX"), 4)), "", false},
		{"an entry for another command", arr(entry("del"), entry("get")), null, "", false},
		{"the whole table (embedded masters)", arr(entry("delex"), entry("delifeq"), entry("get")), null, "", false},
		{"an error", resp.Reply{Type: resp.TypeError, Str: []byte("ERR unknown command")}, resp.Reply{Type: resp.TypeError, Str: []byte("ERR")}, "", false},
		{"IFEQ deeper than the bound", arr(null, null), arr(str("set"), nest(str("IFEQ"), 9)), "", false},
		{"IFEQ as an integer", arr(null, null), arr(resp.Reply{Type: resp.TypeInteger, Int: 1}), "", false},
		{"an empty entry", arr(arr(), arr()), null, "", false},
	} {
		var info ServerInfo
		parseNativeInfo(tc.info, tc.docs, &info)
		if info.DeleteIfEqual != tc.del || info.SetIfEqual != tc.setIfEq {
			t.Errorf("%s: DeleteIfEqual %q SetIfEqual %v, want %q %v", tc.name, info.DeleteIfEqual, info.SetIfEqual, tc.del, tc.setIfEq)
		}
	}
}

// TestAppendNative: the rewrite keeps the key and the arguments byte for
// byte (binary-safe), in the native command's order, and refuses a
// command not of the script's shape.
func TestAppendNative(t *testing.T) {
	del := NewNativeScript(`return 1`, NativeDeleteIfEqual)
	ext := NewNativeScript(`return 2`, NativeExpireIfEqual)
	key, tok := "k\r\n$3\r\nx", "tok\x00en"
	enc := func(s *Script, args ...string) []byte {
		b := s.AppendEvalSha(nil, 1, len(args)-1)
		for _, a := range args {
			b = resp.AppendBulkString(b, a)
		}
		return b
	}
	for _, tc := range []struct {
		name string
		s    *Script
		cmd  []byte
		del  string
		want []string // nil: refused
	}{
		{"DELEX", del, enc(del, key, tok), "DELEX", []string{"DELEX", key, "IFEQ", tok}},
		{"DELIFEQ", del, enc(del, key, tok), "DELIFEQ", []string{"DELIFEQ", key, tok}},
		{"SET IFEQ", ext, enc(ext, key, tok, "1500"), "DELEX", []string{"SET", key, tok, "IFEQ", tok, "PX", "1500"}},
		{"another script's SHA", del, enc(ext, key, tok), "DELEX", nil},
		{"an argument too many", del, append(enc(del, key, tok), "$1\r\nx\r\n"...), "DELEX", nil},
		{"an argument short", ext, enc(ext, key, tok)[:len(enc(ext, key, tok))-3], "DELEX", nil},
		{"a bulk length past the end", del, append(del.AppendEvalSha(nil, 1, 1), "$99999999999999999\r\nk\r\n"...), "DELEX", nil},
		{"a negative bulk length", del, append(del.AppendEvalSha(nil, 1, 1), "$-1\r\n$1\r\nx\r\n"...), "DELEX", nil},
	} {
		out, ok := tc.s.appendNative([]byte("prefix"), tc.cmd, tc.del)
		if tc.want == nil {
			if ok || string(out) != "prefix" {
				t.Errorf("%s: rewritten to %q", tc.name, out)
			}
			continue
		}
		if want := "prefix" + string(resp.AppendCommandStrings(nil, tc.want...)); !ok || string(out) != want {
			t.Errorf("%s: %q (ok %v), want %q", tc.name, out, ok, want)
		}
	}
	if r := nativeReply(NativeExpireIfEqual, resp.Reply{Type: resp.TypeSimpleString, Str: []byte("OK")}); r.Type != resp.TypeInteger || r.Int != 1 {
		t.Errorf("OK → %v", r)
	}
	if r := nativeReply(NativeExpireIfEqual, resp.Reply{Type: resp.TypeNull}); r.Type != resp.TypeInteger || r.Int != 0 {
		t.Errorf("nil → %v", r)
	}
	if r := nativeReply(NativeExpireIfEqual, resp.Reply{Type: resp.TypeError, Str: []byte("WRONGTYPE x")}); !r.IsError() || !strings.HasPrefix(string(r.Str), "WRONGTYPE") {
		t.Errorf("error → %v", r)
	}
}

type nopCB struct{}

func (nopCB) Complete(uint64, resp.Reply, error) {}

// TestMergedCallNotNative: a merged call queued in a ring slot that a
// native request used before does not inherit its native flag (its reply
// would be read as the native command's).
func TestMergedCallNotNative(t *testing.T) {
	c := &Conn{cfg: Config{}.withDefaults(), rearm: make(chan struct{}, 1)}
	single, multi := NewScript(`return 1`), NewScript(`return {1,1}`)
	// every slot of the ring once held a native SET IFEQ
	for range 64 {
		c.pushQueueLocked(&Request{Callback: nopCB{}, Deadline: time.Now().Add(time.Hour)}).native = NativeExpireIfEqual
		c.popLocked()
	}
	m := NewMerge(single, multi, 1, 0)
	mk := func(key string) member {
		b := single.AppendEvalSha(nil, 1, 1)
		keyAt := len(b)
		b = resp.AppendBulkString(b, key)
		argsAt := len(b)
		b = resp.AppendBulkString(b, "x")
		return member{cb: nopCB{}, cmd: b, keyAt: keyAt, argsAt: argsAt}
	}
	l := &mergeList{m: m, members: []member{mk("a"), mk("b")}}
	c.nmerge = 2
	c.emitLocked(l)
	if n := c.q.front().native; n != NativeNone {
		t.Errorf("merged call's pending entry has native = %d (stale from the slot's previous request)", n)
	}
}

// TestAppendNativeAllocs: the rewrite allocates nothing (it runs under
// the Conn's lock, per release or extension).
func TestAppendNativeAllocs(t *testing.T) {
	s := NewNativeScript(`x`, NativeExpireIfEqual)
	cmd := s.AppendEvalSha(nil, 1, 2)
	cmd = resp.AppendBulkString(cmd, "key")
	cmd = resp.AppendBulkString(cmd, "token-0123456789")
	cmd = resp.AppendBulkString(cmd, "1000")
	dst := make([]byte, 0, 4096)
	if n := testing.AllocsPerRun(1000, func() { s.appendNative(dst[:0], cmd, "DELEX") }); n != 0 {
		t.Fatalf("%v allocations per rewrite", n)
	}
}
