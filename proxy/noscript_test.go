package proxy

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/internal/test/relay"
	"github.com/redlock-dev/redlock/proxy/internal/lockcmds"
)

// TestCleanupOnFreshMaster: the cleanup of a failed library acquisition
// must reach a master whose script cache is empty (just restarted, or
// first met) even when the master answers slower than CleanupTimeout.
// Master 0 is reached through a relay adding 60 ms each way; masters 1
// and 2 hold the key for someone else, so node-redlock's acquire through
// the proxy is granted on master 0 only and fails. Before, the proxy's
// masters had neither the library scripts nor the cleanup script loaded:
// the acquire came back NOSCRIPT and was re-sent as EVAL in time (master
// 0 granted it), but the cleanup's NOSCRIPT came after its 100 ms
// deadline, so its EVAL was never sent: master 0 kept the failed
// attempt's key until its TTL. Now every script the proxy sends is loaded
// at each connect.
func TestCleanupOnFreshMaster(t *testing.T) {
	set := mastertest.Start(t, 3)
	mastertest.RequireReal(t, set)
	r, err := relay.Start(set.Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	r.SetDelay(60 * time.Millisecond)
	e := startEnvOn(t, set, func(c *Config) {
		c.EngineConfig.Addrs[0] = r.Addr()
		c.EngineConfig.MasterTimeout = 2 * time.Second // the acquire's answer counts
	})
	ctx := context.Background()
	const key, token = "noscript:key", "noscript-token-0123456789"
	for _, m := range e.masters[1:] {
		if err := m.Set(ctx, key, "someone-else", 10*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.masters[0].ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	var sha string
	for _, ls := range lockcmds.LibTable {
		if ls.Name == "node-redlock v5 acquire" {
			sha = ls.SHA
		}
	}
	got, err := e.client(t).EvalSha(ctx, sha, []string{key}, token, 10000).Int()
	if err != nil || got != 0 {
		t.Fatalf("acquire of a key two of three masters hold: %d, %v; want 0", got, err)
	}
	stats, err := e.masters[0].Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stats, "cmdstat_set:") {
		t.Fatalf("master 0 never ran the acquire's SET: the case did not happen\n%s", stats)
	}
	// The cleanup was sent before the reply; give it its round trips.
	deadline := time.Now().Add(time.Second)
	for {
		v, err := e.masters[0].Get(ctx, key).Result()
		if err != nil { // redis.Nil: cleaned up
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("master 0 still holds %s=%s (PTTL %v) a second after the failed acquisition: its cleanup was dropped\n%s",
				key, v, e.masters[0].PTTL(ctx, key).Val(), stats)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
