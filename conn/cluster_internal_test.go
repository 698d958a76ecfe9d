package conn

import "testing"

// TestParseRedirect: MOVED and ASK are read; a redirect without a host
// (":port", Redis 7) means the host of the node that sent it, never
// 127.0.0.1.
func TestParseRedirect(t *testing.T) {
	for _, tc := range []struct {
		msg, from, addr string
		ask, ok         bool
	}{
		{"MOVED 3999 10.0.0.2:6381", "10.0.0.5", "10.0.0.2:6381", false, true},
		{"ASK 3999 10.0.0.2:6381", "10.0.0.5", "10.0.0.2:6381", true, true},
		{"MOVED 3999 :6380", "10.0.0.5", "10.0.0.5:6380", false, true},
		{"MOVED 3999 :6380", "", "", false, false},
		{"MOVED 3999", "10.0.0.5", "", false, false},
		{"ERR MOVED 1 a:1", "10.0.0.5", "", false, false},
		{"MOVED 1 nonsense", "10.0.0.5", "", false, false},
	} {
		addr, ask, ok := parseRedirect([]byte(tc.msg), tc.from)
		if addr != tc.addr || ask != tc.ask || ok != tc.ok {
			t.Errorf("parseRedirect(%q, %q) = %q %v %v, want %q %v %v", tc.msg, tc.from, addr, ask, ok, tc.addr, tc.ask, tc.ok)
		}
	}
}
