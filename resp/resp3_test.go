package resp_test

import (
	"bytes"
	"io"
	"testing"

	"github.com/redlock-dev/redlock/resp"
)

func TestAppendRESP3(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		ok             bool
	}{
		{"nil bulk", "$-1\r\n", "_\r\n", true},
		{"nil array", "*-1\r\n", "_\r\n", true},
		{"simple", "+OK\r\n", "+OK\r\n", true},
		{"bulk keeps a payload that looks like a nil", "$5\r\n$-1\r\n\r\n", "$5\r\n$-1\r\n\r\n", true},
		{"nested", "*3\r\n:-1\r\n$-1\r\n*2\r\n*-1\r\n$1\r\nx\r\n", "*3\r\n:-1\r\n_\r\n*2\r\n_\r\n$1\r\nx\r\n", true},
		{"several replies", "$-1\r\n+OK\r\n$-1\r\n", "_\r\n+OK\r\n_\r\n", true},
		{"RESP3 map passes", "%1\r\n$5\r\nproto\r\n:3\r\n", "%1\r\n$5\r\nproto\r\n:3\r\n", true},
		{"push with a nil", ">3\r\n$9\r\nsubscribe\r\n$-1\r\n:0\r\n", ">3\r\n$9\r\nsubscribe\r\n_\r\n:0\r\n", true},
		{"empty", "", "", true},
		{"truncated", "*2\r\n$-1\r\n", "*2\r\n$-1\r\n", false},
		{"short bulk", "$5\r\nab\r\n", "$5\r\nab\r\n", false},
		{"no CRLF", "$-1", "$-1", false},
		{"unknown type", "x\r\n", "x\r\n", false},
		{"huge bulk length", "$9223372036854775807\r\n", "$9223372036854775807\r\n", false},
		{"huge map", "%4611686018427387904\r\n", "%4611686018427387904\r\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, ok := resp.AppendRESP3([]byte("x"), []byte(tc.in))
			if string(out) != "x"+tc.want || ok != tc.ok {
				t.Fatalf("AppendRESP3(%q) = %q, %v; want %q, %v", tc.in, out, ok, "x"+tc.want, tc.ok)
			}
		})
	}
}

func TestRESP3Headers(t *testing.T) {
	var b []byte
	b = resp.AppendMapHeader(b, 2)
	b = resp.AppendPushHeader(b, 3)
	b = resp.AppendNull3(b)
	if string(b) != "%2\r\n>3\r\n_\r\n" {
		t.Fatalf("%q", b)
	}
}

// FuzzAppendRESP3: for any input, AppendRESP3 does not panic, never lengthens it,
// and either leaves it unchanged (not whole replies) or writes replies
// that decode to the same replies as the input, every null now RESP3's.
func FuzzAppendRESP3(f *testing.F) {
	for _, s := range []string{"$-1\r\n", "*-1\r\n", "*2\r\n$-1\r\n:1\r\n", "%1\r\n+a\r\n*-1\r\n", ">3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$1\r\n1\r\n",
		"$3\r\n$-1\r\n", "=8\r\ntxt:abcd\r\n", "!3\r\nERR\r\n", "_\r\n", "#t\r\n,1.5\r\n(123\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		orig := bytes.Clone(in)
		out, ok := resp.AppendRESP3(nil, in)
		if !bytes.Equal(in, orig) {
			t.Fatalf("src changed")
		}
		if len(out) > len(orig) {
			t.Fatalf("longer output: %q from %q", out, orig)
		}
		if !ok {
			if !bytes.Equal(out, orig) {
				t.Fatalf("not ok, yet changed: %q from %q", out, orig)
			}
			return
		}
		want := readEvery(newFuzzReader(bytes.NewReader(orig), 0))
		got := readEvery(newFuzzReader(bytes.NewReader(out), 0))
		if (want.err == nil) != (got.err == nil) || len(want.replies) != len(got.replies) {
			t.Fatalf("%q → %q: %d replies (%v), now %d (%v)", orig, out, len(want.replies), want.err, len(got.replies), got.err)
		}
		for i := range want.replies {
			if !want.replies[i].Equal(got.replies[i]) {
				t.Fatalf("reply %d: %v became %v", i, want.replies[i], got.replies[i])
			}
			if bytes.Contains(resp.AppendReply(nil, got.replies[i]), []byte("$-1\r\n")) && hasRESP2Null(got.replies[i]) {
				t.Fatalf("reply %d still has a RESP2 null: %q", i, out)
			}
		}
	})
}

// readEvery reads every reply of r until an error (io.EOF at the end).
func readEvery(r *resp.Reader) fuzzResult {
	var res fuzzResult
	for {
		rep, err := r.ReadReply()
		if err != nil {
			if err != io.EOF {
				res.err = err
			}
			return res
		}
		res.replies = append(res.replies, rep.Clone())
	}
}

func hasRESP2Null(r resp.Reply) bool {
	if r.Type == resp.TypeNull {
		return r.Int != 1
	}
	for _, e := range r.Elems {
		if hasRESP2Null(e) {
			return true
		}
	}
	return false
}
