package engine_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/localmaster"
	"github.com/redlock-dev/redlock/internal/test/check"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
)

// takeoverEnv is an engine over standalone members A and B and member C,
// a Redis Cluster of three shards without replicas (member index 2).
type takeoverEnv struct {
	lc  *localmaster.Cluster
	set *localmaster.Set
	e   *engine.Engine
	ctx context.Context
}

const takeoverMember = 2 // C, after Addrs A and B

func newTakeoverEnv(t *testing.T, maxTTL time.Duration) *takeoverEnv {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	v := &takeoverEnv{ctx: ctx}
	v.lc = mastertest.StartCluster(t, localmaster.ClusterOptions{Shards: 3})
	v.set = mastertest.Start(t, 2)
	mastertest.RequireReal(t, v.set)
	cfg := functional
	cfg.MaxTTL = maxTTL
	cfg.Addrs, cfg.Clusters = v.set.Addrs(), []engine.ClusterMember{{Seeds: v.lc.Addrs()[:2]}}
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if _, err := e.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	check.Eventually(t, 10*time.Second, "every member voting", func() bool { return e.Voting() == nil })
	v.e = e
	return v
}

// dial connects to one server for the test's own commands.
func (v *takeoverEnv) dial(t *testing.T, addr string) *conn.Conn {
	t.Helper()
	c, err := conn.Dial(v.ctx, addr, conn.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// exec runs one command on addr and fails t on an error or error reply.
func (v *takeoverEnv) exec(t *testing.T, addr string, args ...string) {
	t.Helper()
	if r, err := v.dial(t, addr).Exec(v.ctx, args...); err != nil || r.IsError() {
		t.Fatalf("%v on %s: %v %v", args, addr, r, err)
	}
}

// owner returns the address of the node serving key's slot and the slot
// ranges of that node, as node seen reports them (CLUSTER SLOTS).
func (v *takeoverEnv) owner(t *testing.T, seen, key string) (addr string, ranges []string) {
	t.Helper()
	r, err := v.dial(t, seen).Exec(v.ctx, "CLUSTER", "SLOTS")
	if err != nil {
		t.Fatal(err)
	}
	slot := int64(conn.Slot(key))
	byNode := map[string][]string{}
	for _, e := range r.Elems {
		m := e.Elems[2]
		a := net.JoinHostPort(string(m.Elems[0].Str), strconv.FormatInt(m.Elems[1].Int, 10))
		byNode[a] = append(byNode[a], strconv.FormatInt(e.Elems[0].Int, 10), strconv.FormatInt(e.Elems[1].Int, 10))
		if e.Elems[0].Int <= slot && slot <= e.Elems[1].Int {
			addr = a
		}
	}
	if addr == "" {
		t.Fatalf("no owner of slot %d in %s's CLUSTER SLOTS", slot, seen)
	}
	return addr, byNode[addr]
}

// reloaded waits until the engine has installed a slot map read after
// this call (the refresher loads one map at a time, so the second load
// that ends from now on started from now on), or until done holds. Maps
// reload every 5 s while every slot-serving node is connected.
func (v *takeoverEnv) reloaded(t *testing.T, done func() bool) {
	t.Helper()
	r0 := v.e.Stats().ClusterRefreshes
	check.Eventually(t, 15*time.Second, "two slot-map reloads", func() bool { return done() || v.e.Stats().ClusterRefreshes >= r0+2 })
}

// TestClusterSlotTakenOverFromDeadMasterQuarantined: the cluster member's
// shard master D serving a held key's slot dies without a replica, and
// the operator recovers the cluster the standard way (CLUSTER FORGET D on
// the other nodes, D's slots added on a live master Y, as redis-cli
// --cluster fix does). Y was a master in the engine's last map, so it was
// not taken for a new owner: it served the slot empty and voted at once,
// and with standalone B having lost the key too, holder 2 was granted
// while holder 1 was valid (found by the review of the cluster members).
// A slot whose owner changes while the previous owner is down or gone
// from the map now quarantines the member, as a failover does.
func TestClusterSlotTakenOverFromDeadMasterQuarantined(t *testing.T) {
	// Room for the recovery and two map loads (5 s apart once every
	// slot-serving node is up) on a busy host; never waited out.
	const ttl = 30 * time.Second
	v := newTakeoverEnv(t, ttl)
	const key = "takeover:key"
	a := v.lc.Addrs()
	d, dRanges := v.owner(t, a[0], key)
	var y string
	for _, n := range a {
		if n != d {
			y = n
			break
		}
	}
	dID, err := v.dial(t, d).Exec(v.ctx, "CLUSTER", "MYID")
	if err != nil {
		t.Fatal(err)
	}

	// B holds the key for someone else: holder 1 is granted by A and by
	// D (2 of 3); then B loses it (behind the engine's back).
	b := v.set.Addrs()[1]
	v.exec(t, b, "SET", key, "foreign")
	l1, err := v.e.TryLock(v.ctx, key, ttl)
	if err != nil {
		t.Fatalf("holder 1: %v", err)
	}
	v.exec(t, b, "DEL", key)

	// D dies; its slots go to Y.
	if err := v.lc.At(d).Kill(); err != nil {
		t.Fatal(err)
	}
	for _, n := range a {
		if n != d {
			v.exec(t, n, "CLUSTER", "FORGET", dID.Text())
		}
	}
	v.exec(t, y, append([]string{"CLUSTER", "ADDSLOTSRANGE"}, dRanges...)...)
	if err := v.lc.WaitOK(v.ctx); err != nil {
		t.Fatal(err)
	}
	if o, _ := v.owner(t, y, key); o != y {
		t.Fatalf("slot of %s served by %s after the recovery, want %s", key, o, y)
	}
	// Every node agrees now: the engine's next map routes the slot to Y,
	// and Y's vote would count. The member is quarantined before that
	// map is used; without the quarantine, wait for a map read from now.
	quarantined := func() bool { return v.e.Status()[takeoverMember].Quarantined }
	v.reloaded(t, quarantined)

	l2, err := v.e.TryLock(v.ctx, key, ttl)
	if !l1.Valid() {
		t.Fatalf("holder 1 expired before the check (the recovery took %v of its %v): nothing shown", ttl-l1.Remaining(), ttl)
	}
	if err == nil {
		t.Fatalf("two valid holders: holder 1 (%s, remaining %v) and holder 2 (%s); member C %+v", l1.Token(), l1.Remaining(), l2.Token(), v.e.Status()[takeoverMember])
	}
	if !errors.Is(err, engine.ErrNotAcquired) {
		t.Fatalf("holder 2: %v, want ErrNotAcquired", err)
	}
	if st := v.e.Status()[takeoverMember]; !st.Quarantined {
		t.Errorf("member C not quarantined after its slots were taken over from a dead master: %+v", st)
	}
}

// TestClusterReshardNotQuarantined: a reshard moves keys by MIGRATE from
// a live owner, so the new owner has them: the member keeps voting, both
// when the engine meets the move in a reloaded map and when it follows
// the old owner's -MOVED (the slot's owner changes with the previous one
// connected and still a master in the map).
func TestClusterReshardNotQuarantined(t *testing.T) {
	const ttl = 10 * time.Second
	v := newTakeoverEnv(t, ttl)
	const key, quiet = "reshard:key", "reshard:quiet"
	if conn.Slot(key) == conn.Slot(quiet) {
		t.Fatal("the keys share a slot")
	}
	notQuarantined := func(when string) {
		t.Helper()
		if st := v.e.Status()[takeoverMember]; st.Quarantined {
			t.Fatalf("member C quarantined %s: %+v", when, st)
		}
		if err := v.e.Voting(); err != nil {
			t.Fatalf("not every member votes %s: %v", when, err)
		}
	}

	// A slot nobody uses moves: only a reloaded map shows it.
	from, to, err := v.lc.MoveSlot(v.ctx, conn.Slot(quiet), 0)
	if err != nil {
		t.Fatal(err)
	}
	v.reloaded(t, func() bool { return false })
	notQuarantined("after a reloaded map moved a slot " + from + " → " + to)

	// The held key's slot moves: the next extension meets the -MOVED
	// (unless a reload came first). Taken after the wait above, which
	// may outlast a TTL.
	l, err := v.e.TryLock(v.ctx, key, ttl)
	if err != nil {
		t.Fatal(err)
	}
	moved := v.e.Stats().ClusterMoved
	if from, to, err = v.lc.MoveSlot(v.ctx, conn.Slot(key), 0); err != nil {
		t.Fatal(err)
	}
	if err := l.Extend(v.ctx, ttl); err != nil {
		t.Fatalf("Extend after the key's slot moved: %v", err)
	}
	t.Logf("extension after the move followed %d MOVED", v.e.Stats().ClusterMoved-moved)
	notQuarantined("after the held key's slot moved " + from + " → " + to)
	if err := l.Unlock(v.ctx); err != nil {
		t.Errorf("Unlock: %v", err)
	}
}
