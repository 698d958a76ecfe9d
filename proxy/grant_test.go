package proxy

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
)

// restartEmpty kills masters idx of e (no persistence: they lose every
// key), starts them again on the same ports, and waits until the proxy
// is connected to every master.
func restartEmpty(t *testing.T, e *env, idx ...int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, i := range idx {
		m := e.set.Masters()[i]
		if err := m.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := m.Restart(ctx); err != nil {
			t.Fatal(err)
		}
	}
	c := dialRaw(t, e.addr)
	for !strings.Contains(c.cmd("INFO", "masters"), "masters_up:"+strconv.Itoa(len(e.masters))) {
		if ctx.Err() != nil {
			t.Fatal("masters did not reconnect")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestFirstContactQuarantine: a proxy that never met the masters before
// (a fresh process) does not trust masters younger than MaxTTL: they may
// have restarted and lost locks other processes hold. Before, a fresh
// process trusted them at once.
func TestFirstContactQuarantine(t *testing.T) {
	e := startEnv(t, 5, func(c *Config) {
		c.EngineConfig.FreshMasters = false
		c.EngineConfig.MaxTTL = 30 * time.Second
	})
	c := dialRaw(t, e.addr)
	got := c.cmd("SET", "fc:key", "token", "NX", "PX", "5000")
	if !strings.HasPrefix(got, "-ERR redlock proxy: unavailable: 5/5 masters answered, 5 of them in restart quarantine") ||
		!strings.Contains(got, "master 4: in restart quarantine until ") || !strings.Contains(got, "a quorum votes from") ||
		!strings.Contains(got, "if they were started empty and have never served locks, declare them fresh") {
		t.Fatalf("SET NX PX on five masters younger than MaxTTL: %q; want the unavailable error naming the quarantine, its end and the fresh masters hint", got)
	}
	if info := c.cmd("INFO", "masters"); !strings.Contains(info, "masters_quarantined:5") {
		t.Fatalf("INFO masters: %q", info)
	}
}
