package proxy

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
)

// TestQuorumReadsRefuseQuarantined: the proxy's quorum reads of a lock key
// (GET, EXISTS, PTTL, TTL, a library's TTL script) count no answer from a
// master in restart quarantine (property a). A holder's key is on masters
// 0, 1, 2 (3 and 4 down); 0 and 1 are killed, then 0, 1, 3, 4 come back
// empty: only master 2 keeps the key and four are quarantined. Counting
// the restarted masters' "no key" answered "free" (nil, 0, -2) while the
// holder's lock was valid — as redis-py's locked() or Redisson's isLocked
// read it; the engine's own Holder refuses there, and so must these.
func TestQuorumReadsRefuseQuarantined(t *testing.T) {
	e := startEnv(t, 5, func(c *Config) {
		c.EngineConfig.Conn.ReconnectMin, c.EngineConfig.Conn.ReconnectMax = time.Millisecond, 20*time.Millisecond
	})
	mastertest.RequireReal(t, e.set)
	ms := e.set.Masters()
	for _, i := range []int{3, 4} {
		if err := ms[i].Kill(); err != nil {
			t.Fatal(err)
		}
	}
	holder, other := dialRaw(t, e.addr), dialRaw(t, e.addr)
	if got := holder.cmd("SET", "q:key", "holder", "NX", "PX", "20000"); got != "+OK\r\n" {
		t.Fatalf("holder: %q", got)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for _, i := range []int{0, 1} {
		if err := ms[i].Kill(); err != nil {
			t.Fatal(err)
		}
	}
	for _, i := range []int{0, 1, 3, 4} {
		if err := ms[i].Restart(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for {
		info := other.cmd("INFO", "masters")
		if strings.Contains(info, "masters_up:5") && strings.Contains(info, "masters_quarantined:4") {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("masters did not come back quarantined: %q", info)
		}
		time.Sleep(5 * time.Millisecond)
	}
	pttlScript := scripts.Lib("bsm-redislock-v0.9.4-luaPTTL")
	for _, c := range [][]string{
		{"GET", "q:key"}, {"EXISTS", "q:key"}, {"PTTL", "q:key"}, {"TTL", "q:key"},
		{"EVAL", pttlScript, "1", "q:key", "holder"},
	} {
		got := other.cmd(c...)
		if !strings.HasPrefix(got, "-ERR redlock proxy: unavailable") || !strings.Contains(got, "quarantine") {
			t.Errorf("%s q:key with the holder's lock valid and 4 of 5 masters quarantined: %q; want the unavailable error naming the quarantine, not an answer counted from restarted masters", c[0], got)
		}
	}
	if time.Since(start) > 15*time.Second {
		t.Fatal("the holder's 20 s lock may have ended during the reads: the test shows nothing")
	}
}
