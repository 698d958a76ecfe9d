package proxy

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/localmaster"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/proxy/internal/lockcmds"
)

// TestTwoProxies: proxies keep no lock state of their own, so several of
// them in front of the same masters (behind a TCP load balancer) give the
// same answers: a lock taken through one is held for the other, released
// or extended through either, and clients split between them never hold
// one key together.
func TestTwoProxies(t *testing.T) {
	set := mastertest.Start(t, 5)
	a, b := startEnvOn(t, set, nil), startEnvOn(t, set, nil)
	ctx := context.Background()
	ca := redis.NewClient(&redis.Options{Addr: a.addr, MaxRetries: -1})
	cb := redis.NewClient(&redis.Options{Addr: b.addr, MaxRetries: -1})
	defer ca.Close()
	defer cb.Close()

	if ok, err := ca.SetNX(ctx, "two:k", "tok-a", 10*time.Second).Result(); err != nil || !ok {
		t.Fatalf("SET NX through proxy A: %v %v", ok, err)
	}
	if ok, err := cb.SetNX(ctx, "two:k", "tok-b", 10*time.Second).Result(); err != nil || ok {
		t.Fatalf("SET NX through proxy B while A's client holds it: %v %v, want refused", ok, err)
	}
	extend := redis.NewScript(`if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("pexpire",KEYS[1],ARGV[2]) else return 0 end`)
	if n, err := extend.Run(ctx, cb, []string{"two:k"}, "tok-a", 60000).Int(); err != nil || n != 1 {
		t.Fatalf("extend A's lock through proxy B: %v %v", n, err)
	}
	release := redis.NewScript(lockcmds.LibTable[0].Source)
	if n, err := release.Run(ctx, cb, []string{"two:k"}, "tok-b").Int(); err != nil || n != 0 {
		t.Fatalf("release with the wrong token through B: %v %v, want 0", n, err)
	}
	if n, err := release.Run(ctx, cb, []string{"two:k"}, "tok-a").Int(); err != nil || n != 1 {
		t.Fatalf("release A's lock through proxy B: %v %v", n, err)
	}
	a.waitHolding(t, "two:k", "tok-a", 0)
	if ok, err := ca.SetNX(ctx, "two:k", "tok-a2", 10*time.Second).Result(); err != nil || !ok {
		t.Fatalf("SET NX through A after the release through B: %v %v", ok, err)
	}

	contend(t, []string{a.addr, b.addr})
}

// TestClusterMemberProxy: a proxy whose members are three Redis Clusters
// of three shards answers SET NX PX, the release and extend scripts of
// client libraries as with standalone members.
func TestClusterMemberProxy(t *testing.T) {
	ctx := context.Background()
	var members []engine.ClusterMember
	var first *localmaster.Cluster
	for range 3 {
		lc := mastertest.StartCluster(t, localmaster.ClusterOptions{Shards: 3})
		if first == nil {
			first = lc
		}
		members = append(members, engine.ClusterMember{Seeds: lc.Addrs()[:2]})
	}
	e := startEnvOn(t, first.Set, func(c *Config) { c.EngineConfig.Addrs, c.EngineConfig.Clusters = nil, members })
	c := redis.NewClient(&redis.Options{Addr: e.addr, MaxRetries: -1})
	defer c.Close()
	release := redis.NewScript(lockcmds.LibTable[0].Source)
	extend := redis.NewScript(`if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("pexpire",KEYS[1],ARGV[2]) else return 0 end`)
	for i := range 20 {
		k := fmt.Sprintf("cm:%d", i)
		if ok, err := c.SetNX(ctx, k, "tok", 10*time.Second).Result(); err != nil || !ok {
			t.Fatalf("SET NX %s: %v %v", k, ok, err)
		}
		if ok, err := c.SetNX(ctx, k, "other", 10*time.Second).Result(); err != nil || ok {
			t.Fatalf("second SET NX %s: %v %v, want refused", k, ok, err)
		}
		if n, err := extend.Run(ctx, c, []string{k}, "tok", 60000).Int(); err != nil || n != 1 {
			t.Fatalf("extend %s: %v %v", k, n, err)
		}
		if n, err := release.Run(ctx, c, []string{k}, "tok").Int(); err != nil || n != 1 {
			t.Fatalf("release %s: %v %v", k, n, err)
		}
	}
	if st := e.srv.Engine().Stats(); st.ClusterRefreshes < 3 {
		t.Errorf("%d map loads, want one per member at least", st.ClusterRefreshes)
	} else {
		for i, n := range st.MasterErrors {
			if n != 0 {
				t.Errorf("member %d: %d errors", i, n)
			}
		}
	}
}
