package proxy

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-dev/redlock/internal/test/check"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/proxy/internal/lockcmds"
)

// TestRetriedObtainKeepsItsGrant: property (d) for bsm/redislock's
// obtain, whose script overwrites the caller's own lock (a re-obtain with
// the same token counts as a yes). A client with a fixed token gives up
// on an attempt still waiting for a stopped master (its own timeout) and
// sends the same value again on another connection. The retry overwrites
// the first attempt's keys, creates one more and is granted; the first
// attempt then fails, and its cleanup must not delete what the retry
// wrote over it. Before, the cleanup deleted by value wherever the first
// attempt had created the key, and the retry's +OK stood on one master of
// five (found by the review of issue #46). Both obtain versions.
func TestRetriedObtainKeepsItsGrant(t *testing.T) {
	ctx := context.Background()
	evalshaCalls := func(m *redis.Client) int {
		info, _ := m.Info(ctx, "commandstats").Result()
		_, rest, _ := strings.Cut(info, "cmdstat_evalsha:calls=")
		n, _ := strconv.Atoi(rest[:max(strings.IndexByte(rest, ','), 0)])
		return n
	}
	for _, c := range []struct {
		name string
		args func(key, val string) []string
	}{
		{"bsm/redislock v0.9.4 obtain", func(key, val string) []string { return []string{"1", key, val, "22", "10000"} }},
		{"bsm/redislock v0.10 obtain", func(key, val string) []string { return []string{"2", key, key + "2", val, "22", "10000"} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Masters and a proxy of its own: the other case's stopped master
			// left the proxy reconnecting to it.
			set := mastertest.Start(t, 5)
			mastertest.RequireReal(t, set)
			// The first attempt waits its per-master timeout for the stopped
			// master: long enough for the retry to land first, on a busy
			// machine too.
			e := startEnvOn(t, set, func(c *Config) { c.EngineConfig.MasterTimeout = 2 * time.Second })
			ms := set.Masters()
			sha := ""
			for _, ls := range lockcmds.LibTable {
				if ls.Name == c.name {
					sha = ls.SHA
				}
			}
			key, val := "retried:{"+c.name+"}", "tokA-0123456789abcdefXYZ-meta"
			obtain := append([]string{"EVALSHA", sha}, c.args(key, val)...)
			// Master 4 held by another holder throughout, master 2 until the
			// first attempt has been refused there, master 3 stopped.
			for _, i := range []int{2, 4} {
				if err := e.masters[i].Set(ctx, key, "other-holder-0123456789", 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
			if err := ms[3].Pause(); err != nil {
				t.Fatal(err)
			}
			defer ms[3].Resume()
			calls2 := evalshaCalls(e.masters[2])
			a := dialRaw(t, e.addr)
			a.sendCmd(obtain...)
			check.Eventually(t, 10*time.Second, "the first attempt created the key on masters 0 and 1 and was refused on 2", func() bool {
				v0, _ := e.masters[0].Get(ctx, key).Result()
				v1, _ := e.masters[1].Get(ctx, key).Result()
				return v0 == val && v1 == val && evalshaCalls(e.masters[2]) > calls2
			})
			if err := e.masters[2].Del(ctx, key).Err(); err != nil { // the other holder's lock ended
				t.Fatal(err)
			}
			// The client gave up on a; its retry, on another connection.
			b := dialRaw(t, e.addr)
			b.sendCmd(obtain...)
			check.Eventually(t, 10*time.Second, "the retry created the key on master 2", func() bool {
				v, _ := e.masters[2].Get(ctx, key).Result()
				return v == val
			})
			ra, rb := a.read(), b.read()
			if ra != "$-1\r\n" || rb != "+OK\r\n" {
				t.Fatalf("first attempt %q, retry %q; want nil (two of five) and +OK (three)", ra, rb)
			}
			if n := e.holding(t, key, val); n < e.quorum() {
				t.Fatalf("the retry was granted, and then %d of 5 masters held its value: the failed first attempt's cleanup deleted the retry's grant", n)
			}
		})
	}
}

// TestObtainMarksOnePerKey: two keys never share an obtain mark, or one
// attempt's mark write would make the other's cleanup keep its key (a
// key left to its TTL). `{a}:a}:{a` has the tag a; `a}:{a` has none, so
// its tag is the whole name, which has braces: named
// `redlock:obtain:{a}:{a}:a}:{a` both (found by the review of issue #46).
func TestObtainMarksOnePerKey(t *testing.T) {
	e := startEnv(t, 3, nil)
	mastertest.RequireReal(t, e.set)
	sha := ""
	for _, ls := range lockcmds.LibTable {
		if ls.Name == "bsm/redislock v0.9.4 obtain" {
			sha = ls.SHA
		}
	}
	c := dialRaw(t, e.addr)
	for i, key := range []string{"{a}:a}:{a", "a}:{a", "plain", ""} {
		if r := c.cmd("EVALSHA", sha, "1", key, "token-"+strconv.Itoa(i)+"-0123456789abcdefXYZ", "22", "10000"); r != "+OK\r\n" {
			t.Fatalf("obtain %q: %q", key, r)
		}
	}
	e.waitHolding(t, "a}:{a", "token-1-0123456789abcdefXYZ", 3)
	marks, err := e.masters[0].Keys(context.Background(), "redlock:obtain:*").Result()
	if err != nil || len(marks) != 4 {
		t.Fatalf("obtain marks on master 0: %q (%v); want one per key, 4", marks, err)
	}
}
