package engine_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/localmaster"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
)

// TestClusterFailbackBetweenMapLoads: a cluster node R that was a master
// in the engine's last slot map becomes a replica (failover to X), misses
// a grant, and is promoted again (X dies) — all between two of the
// engine's map loads, so the maps never show R as anything but a master.
// R's vote (it lacks the key) must not count: the replication check reads
// R's replication id at the batch that carries the vote, finds it changed,
// and quarantines the member before the vote is counted. Before, e2 was
// granted while e1's lock was valid (two holders; found by the review of
// issue #46).
func TestClusterFailbackBetweenMapLoads(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	const key = "fb:key"
	slot := conn.Slot(key)
	const maxTTL = 6 * time.Second
	lc := mastertest.StartCluster(t, localmaster.ClusterOptions{Shards: 3, Replicas: 1})
	set := mastertest.Start(t, 2) // standalone members A and B
	mastertest.RequireReal(t, set)
	started := time.Now()

	dial := func(addr string) *conn.Conn {
		c, err := conn.Dial(ctx, addr, conn.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	node := func(addr string) *localmaster.Master {
		if m := lc.At(addr); m != nil {
			return m
		}
		t.Fatalf("no node %s", addr)
		return nil
	}
	// owner of the slot as node addr sees it, and the node ids.
	ownerSeenBy := func(addr string) (owner string) {
		r, err := dial(addr).Exec(ctx, "CLUSTER", "NODES")
		if err != nil {
			return ""
		}
		for _, line := range strings.Split(r.Text(), "\n") {
			f := strings.Fields(line)
			if len(f) < 9 || !strings.Contains(f[2], "master") || strings.Contains(f[2], "fail") {
				continue
			}
			for _, rg := range f[8:] {
				if strings.HasPrefix(rg, "[") {
					continue
				}
				lo, hi, ok := strings.Cut(rg, "-")
				a, _ := strconv.Atoi(lo)
				b := a
				if ok {
					b, _ = strconv.Atoi(hi)
				}
				if slot >= a && slot <= b {
					return strings.SplitN(f[1], "@", 2)[0]
				}
			}
		}
		return ""
	}
	role := func(addr string) string {
		r, err := dial(addr).Exec(ctx, "ROLE")
		if err != nil || len(r.Elems) == 0 {
			return ""
		}
		return string(r.Elems[0].Str)
	}
	waitFor := func(what string, cond func() bool) {
		for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}

	// X: the slot's owner; R: its replica.
	x := ownerSeenBy(lc.Addrs()[0])
	var r string
	waitFor("the owner's replica", func() bool {
		out, err := dial(x).Exec(ctx, "ROLE")
		if err != nil || len(out.Elems) < 3 || len(out.Elems[2].Elems) == 0 {
			return false
		}
		rep := out.Elems[2].Elems[0]
		r = string(rep.Elems[0].Str) + ":" + string(rep.Elems[1].Str)
		return true
	})
	t.Logf("slot %d: owner X=%s, replica R=%s", slot, x, r)

	// Failover 1 (long before anything): R becomes the master of the slot.
	if _, err := dial(r).Exec(ctx, "CLUSTER", "FAILOVER"); err != nil {
		t.Fatal(err)
	}
	waitFor("R owning the slot everywhere", func() bool {
		for _, m := range lc.Masters() {
			if ownerSeenBy(m.Addr()) != r {
				return false
			}
		}
		return role(r) == "master" && role(x) == "slave"
	})
	var seeds []string
	for _, a := range lc.Addrs() {
		if a != x && a != r && len(seeds) < 2 && role(a) == "master" {
			seeds = append(seeds, a)
		}
	}
	// Every server older than the quarantine period.
	time.Sleep(time.Until(started.Add(maxTTL + 1500*time.Millisecond)))

	// e2: the contender, a long-running engine with every default safety
	// (quarantine on). Its map has R as the slot's master.
	cfg2 := engine.Config{Addrs: set.Addrs(), Clusters: []engine.ClusterMember{{Seeds: seeds}}, MaxTTL: maxTTL, MasterTimeout: time.Second}
	e2, err := engine.New(cfg2)
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	if _, err := e2.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if st := e2.Status()[2]; st.Quarantined {
		t.Fatalf("e2's cluster member quarantined at start: %+v", st)
	}
	// Start right after one of e2's map loads (every 5 s): the failover
	// and fail-back below fit between two of them.
	r0 := e2.Stats().ClusterRefreshes
	waitFor("an e2 map load", func() bool { return e2.Stats().ClusterRefreshes != r0 })
	r1 := e2.Stats().ClusterRefreshes
	t0 := time.Now()

	// Failover 2: X takes the slot back (R a replica of X).
	if _, err := dial(x).Exec(ctx, "CLUSTER", "FAILOVER"); err != nil {
		t.Fatal(err)
	}
	waitFor("X master again", func() bool { return role(x) == "master" && ownerSeenBy(x) == x && role(r) == "slave" })

	// e1: the holder, started now (its first map has X).
	cfg1 := engine.Config{Addrs: set.Addrs(), Clusters: []engine.ClusterMember{{Seeds: []string{x}}}, MaxTTL: maxTTL, MasterTimeout: time.Second}
	e1, err := engine.New(cfg1)
	if err != nil {
		t.Fatal(err)
	}
	defer e1.Close()
	if _, err := e1.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	// B is held by a short-lived other holder: e1 wins {cluster, A}.
	b := dial(set.Addrs()[1])
	if _, err := b.Exec(ctx, "SET", key, "other", "PX", "800"); err != nil {
		t.Fatal(err)
	}
	// R misses the grant: stopped while X writes it, X dies before R resumes.
	if err := node(r).Pause(); err != nil {
		t.Fatal(err)
	}
	// (X drops its replication link to the stopped R: R cannot read the
	// grant from its socket buffer when it resumes.)
	if _, err := dial(x).Exec(ctx, "CLIENT", "KILL", "TYPE", "replica"); err != nil {
		node(r).Resume()
		t.Fatal(err)
	}
	l1, err := e1.TryLock(ctx, key, maxTTL)
	if err != nil {
		node(r).Resume()
		t.Fatalf("e1: %v", err)
	}
	node(x).Kill()
	if err := node(r).Resume(); err != nil {
		t.Fatal(err)
	}
	// R is promoted again (X is gone).
	if _, err := dial(r).Exec(ctx, "CLUSTER", "FAILOVER", "TAKEOVER"); err != nil {
		t.Fatal(err)
	}
	waitFor("R master again", func() bool { return role(r) == "master" })
	rx, err := dial(r).Exec(ctx, "EXISTS", key)
	t.Logf("failover and fail-back took %v; e2 map loads meanwhile: %d; R has the key: %v %v",
		time.Since(t0), e2.Stats().ClusterRefreshes-r1, rx.Int, err)
	if rx.Int != 0 {
		t.Skip("R got the key through replication: scenario not set up")
	}
	waitFor("B's other holder expiring", func() bool { v, _ := b.Exec(ctx, "EXISTS", key); return v.Int == 0 })
	t.Logf("e2 status of the cluster member: %+v", e2.Status()[2])

	l2, err := e2.TryLock(ctx, key, maxTTL)
	switch {
	case err == nil && l1.Valid():
		t.Fatalf("two valid holders: e1 %s (%v left) and e2 %s (%v left): R voted for e2 without quarantine after a fail-back between two map loads",
			l1.Token(), l1.Remaining(), l2.Token(), l2.Remaining())
	case err == nil:
		t.Fatalf("e2 granted once e1's lock had expired (%v): the host was too slow to show the scenario", l1.Remaining())
	case !errors.Is(err, engine.ErrNotAcquired):
		t.Fatalf("e2: %v; want refused (the key held on A, the cluster member quarantined)", err)
	}
	if st := e2.Status()[2]; !st.Quarantined {
		t.Fatalf("e2 refused (%v), but its cluster member is not quarantined: %+v", err, st)
	}
	t.Logf("e2 refused: %v", err)
}
