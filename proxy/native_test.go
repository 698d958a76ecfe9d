package proxy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/internal/test/nativemaster"
)

// TestNativeLockCommands: the commands redis.io's lock pattern sends to
// Redis ≥ 8.4 and Valkey (DELEX key IFEQ v, DELIFEQ key v, SET key v IFEQ
// v PX ms) are quorum releases and extensions through the proxy, with
// the commands' own replies; the forms that are not a release or an
// extension of one's own lock are refused. The proxy's masters are of
// mixed versions (nativemaster fronts), so its own releases and
// extensions go out native where a master has the command, and INFO
// masters says which.
func TestNativeLockCommands(t *testing.T) {
	set := mastertest.Start(t, 5)
	mastertest.RequireReal(t, set)
	fronts, addrs := nativemaster.StartMixed(t, set.Addrs())
	e := startEnvOn(t, set, func(c *Config) { c.EngineConfig.Addrs = addrs })
	c := dialRaw(t, e.addr)
	const tok = "native-token-0123456789"
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	pttlAbove := func(key string, ms int64) int {
		n := 0
		for _, m := range e.masters {
			if d, err := m.PTTL(ctx, key).Result(); err == nil && d > time.Duration(ms)*time.Millisecond {
				n++
			}
		}
		return n
	}

	for _, del := range [][]string{{"DELEX", "{k}", "IFEQ"}, {"DELIFEQ", "{k}"}} {
		name := del[0]
		if got := c.cmd("SET", "{k}", tok, "NX", "PX", "5000"); got != "+OK\r\n" {
			t.Fatalf("SET NX PX: %q", got)
		}
		if got := c.cmd("SET", "{k}", tok, "IFEQ", tok, "PX", "30000"); got != "+OK\r\n" {
			t.Fatalf("SET IFEQ of the holder: %q, want +OK", got)
		}
		if n := pttlAbove("{k}", 5000); n < 3 {
			t.Fatalf("SET IFEQ extended the lock on %d masters, want a quorum", n)
		}
		if got := c.cmd("SET", "{k}", "another-token-012345678", "IFEQ", "another-token-012345678", "PX", "30000"); got != "$-1\r\n" {
			t.Fatalf("SET IFEQ with another token: %q, want nil", got)
		}
		if got := c.cmd(append(del, "another-token-012345678")...); got != ":0\r\n" {
			t.Fatalf("%s with another token: %q, want :0", name, got)
		}
		e.waitHolding(t, "{k}", tok, 5) // a refused release deleted nothing
		if got := c.cmd(append(del, tok)...); got != ":1\r\n" {
			t.Fatalf("%s of the holder: %q, want :1", name, got)
		}
		if n := e.holding(t, "{k}", tok); n > 2 {
			t.Fatalf("after %s %d masters still hold the lock", name, n)
		}
		e.waitHolding(t, "{k}", tok, 0) // the last masters' releases
		if got := c.cmd(append(del, tok)...); got != ":0\r\n" {
			t.Fatalf("second %s: %q, want :0", name, got)
		}
		if got := c.cmd("SET", "{k}", tok, "IFEQ", tok, "PX", "30000"); got != "$-1\r\n" {
			t.Fatalf("SET IFEQ of a released lock: %q, want nil (never created)", got)
		}
		if n := e.holding(t, "{k}", tok); n != 0 {
			t.Fatalf("SET IFEQ created the key on %d masters", n)
		}
	}

	info := c.cmd("INFO", "masters")
	for i, want := range []string{"DELEX+SETIFEQ", "DELEX+SETIFEQ", "DELIFEQ+SETIFEQ", "SETIFEQ", "none"} {
		if !strings.Contains(info, fmt.Sprintf("master%d:", i)) || !strings.Contains(info, fmt.Sprintf("quarantine_left=0,native=%s\r\n", want)) {
			t.Errorf("INFO masters lacks master %d's native=%s:\n%s", i, want, info)
		}
	}
	if fronts[0].Count("DELEX") < 2 || fronts[2].Count("DELIFEQ") < 2 || fronts[3].Count("EVALSHA") < 2 || fronts[4].Count("DELEX") != 0 {
		t.Errorf("the proxy's releases: DELEX %d, DELIFEQ %d, scripts on SET-IFEQ-only %d, DELEX on plain %d",
			fronts[0].Count("DELEX"), fronts[2].Count("DELIFEQ"), fronts[3].Count("EVALSHA"), fronts[4].Count("DELEX"))
	}

	for _, tc := range []struct {
		args []string
		want string // prefix of the error
	}{
		{[]string{"DELEX", "{k}"}, "-ERR redlock proxy: DELEX without IFEQ changes a lock without checking its token"},
		{[]string{"DELEX", "{k}", "IFNE", tok}, "-ERR redlock proxy: only DELEX key IFEQ value"},
		{[]string{"DELEX", "{k}", "IFEQ"}, "-ERR syntax error"},
		{[]string{"DELIFEQ", "{k}"}, "-ERR wrong number of arguments"},
		{[]string{"SET", "{k}", tok, "IFEQ", tok}, "-ERR redlock proxy: only SET key value IFEQ value PX"},
		{[]string{"SET", "{k}", tok, "IFEQ", tok, "PX", "1000", "NX"}, "-ERR redlock proxy: only SET key value IFEQ value PX"},
		{[]string{"SET", "{k}", "new-value-0123456789ab", "IFEQ", tok, "PX", "1000"}, "-ERR redlock proxy: SET IFEQ may extend a lock, not change its value"},
		{[]string{"SET", "{k}", tok, "IFEQ", tok, "PX", "0"}, "-ERR invalid expire time"},
		{[]string{"SET", "{k}", tok, "IFEQ", tok, "PX", "1000", "IFEQ", tok}, "-ERR syntax error"},
		{[]string{"DELIFEQ", "{k}", strings.Repeat("x", 600)}, "-ERR redlock proxy: DELEX/DELIFEQ (compare-and-delete): lock values are at most 512 bytes"},
	} {
		if got := c.cmd(tc.args...); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%q: %q, want %q…", tc.args, got, tc.want)
		}
	}
}
