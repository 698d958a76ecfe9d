package conn_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/internal/localmaster"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/resp"
)

// TestSlot checks the hash slot against values redis-server computes
// (CLUSTER KEYSLOT; the Redis Cluster specification's examples), hash
// tags included.
func TestSlot(t *testing.T) {
	for key, want := range map[string]int{
		"foo": 12182, "bar": 5061, "{user1000}.following": 3443, "{user1000}.followers": 3443,
		"foo{}{bar}": 8363, "foo{{bar}}zap": 4015, "foo{bar}{zap}": 5061, "": 0,
	} {
		if got := conn.Slot(key); got != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
}

// clusterDo runs one command through cl on key and waits for its outcome.
func clusterDo(t *testing.T, cl *conn.Cluster, key string, args ...string) (resp.Reply, error) {
	t.Helper()
	w := newRecorder()
	if err := cl.Do(conn.Request{Cmd: cmd(args...), Key: key, Callback: w, Deadline: time.Now().Add(5 * time.Second)}); err != nil {
		return resp.Reply{}, err
	}
	o := w.wait(t, 1, 10*time.Second)[0]
	if o.err == nil && o.rep.IsError() {
		o.err = o.rep.Err()
	}
	return o.rep, o.err
}

// TestClusterRouting: requests reach the node serving their key's slot;
// after a slot moves (MIGRATE + SETSLOT, as redis-cli --cluster reshard
// does) the MOVED is followed; while it is migrating, a new key of the
// slot is created on the target through ASK.
func TestClusterRouting(t *testing.T) {
	lc := mastertest.StartCluster(t, localmaster.ClusterOptions{Shards: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var newOwners atomic.Int32
	cl := conn.NewClusterWith(conn.ClusterConfig{Seeds: lc.Addrs()[:1], OnNewOwner: func(string) { newOwners.Add(1) }})
	defer cl.Close()
	if err := cl.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		k := "route:" + strconv.Itoa(i)
		if r, err := clusterDo(t, cl, k, "SET", k, "v"); err != nil || !r.IsOK() {
			t.Fatalf("SET %s: %v %v", k, r, err)
		}
	}
	if st := cl.Stats(); st.Moved != 0 || st.Nodes != 3 {
		t.Errorf("stats after routed SETs: %+v, want no MOVED and 3 nodes", st)
	}

	// Move the slot of route:7 to another master.
	key := "route:7"
	slot := conn.Slot(key)
	src := cl.NodeFor(key)
	var dst *conn.Conn
	for _, c := range cl.Nodes() {
		if c != src {
			dst = c
			break
		}
	}
	id := func(c *conn.Conn) string {
		r, err := c.Exec(ctx, "CLUSTER", "MYID")
		if err != nil {
			t.Fatal(err)
		}
		return r.Text()
	}
	srcID, dstID := id(src), id(dst)
	s := strconv.Itoa(slot)
	mustExec := func(c *conn.Conn, args ...string) {
		t.Helper()
		if _, err := c.Exec(ctx, args...); err != nil {
			t.Fatalf("%s on %s: %v", args, c.Addr(), err)
		}
	}
	mustExec(dst, "CLUSTER", "SETSLOT", s, "IMPORTING", srcID)
	mustExec(src, "CLUSTER", "SETSLOT", s, "MIGRATING", dstID)
	// Migrating: route:7 still lives on src (served there); a new key of
	// the same slot is asked to dst.
	newKey := fmt.Sprintf("{%s}:new", key)
	if conn.Slot(newKey) != slot {
		t.Fatal("hash tag did not keep the slot")
	}
	if r, err := clusterDo(t, cl, newKey, "SET", newKey, "x"); err != nil || !r.IsOK() {
		t.Fatalf("SET of a new key in a migrating slot: %v %v", r, err)
	}
	if st := cl.Stats(); st.Asked == 0 {
		t.Errorf("no ASK followed: %+v", st)
	}
	// A script the target does not have: its NOSCRIPT fallback (EVAL) is
	// sent after ASKING too, or the target would redirect it back.
	if _, err := dst.Exec(ctx, "SCRIPT", "FLUSH"); err != nil {
		t.Fatal(err)
	}
	script := conn.NewScript(`return redis.call("set",KEYS[1],ARGV[1])`)
	scriptKey := fmt.Sprintf("{%s}:script", key)
	sw := newRecorder()
	cmdSha := script.AppendEvalSha(nil, 1, 1)
	cmdSha = resp.AppendBulkString(cmdSha, scriptKey)
	cmdSha = resp.AppendBulkString(cmdSha, "y")
	if err := cl.Do(conn.Request{Cmd: cmdSha, Key: scriptKey, Script: script, Callback: sw, Deadline: time.Now().Add(5 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if o := sw.wait(t, 1, 10*time.Second)[0]; o.err != nil || !o.rep.IsOK() {
		t.Fatalf("EVALSHA of a script unknown to the ASK target: %v %v", o.rep, o.err)
	}
	// On a connection of its own: the cluster's node connections start
	// each batch with the replication check's INFO, which would take
	// ASKING's one-command flag.
	plain, err := conn.Dial(ctx, dst.Addr(), conn.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if r, _ := plain.Exec(ctx, "ASKING"); r.IsOK() {
		if r, err := plain.Exec(ctx, "EXISTS", newKey); err != nil || r.Int != 1 {
			t.Errorf("the new key is not on the target: %v %v", r, err)
		}
	}
	host, port, _ := strings.Cut(dst.Addr(), ":")
	mustExec(src, "MIGRATE", host, port, "", "0", "5000", "KEYS", key)
	mustExec(src, "CLUSTER", "SETSLOT", s, "NODE", dstID)
	mustExec(dst, "CLUSTER", "SETSLOT", s, "NODE", dstID)
	for _, c := range cl.Nodes() {
		if c != src && c != dst {
			mustExec(c, "CLUSTER", "SETSLOT", s, "NODE", dstID)
		}
	}
	moved := cl.Stats().Moved
	if r, err := clusterDo(t, cl, key, "GET", key); err != nil || r.Text() != "v" {
		t.Fatalf("GET %s after the slot moved: %v %v", key, r, err)
	}
	if st := cl.Stats(); st.Moved == moved {
		t.Errorf("no MOVED followed: %+v", st)
	}
	if cl.NodeFor(key) != dst {
		t.Errorf("slot map not updated: %s served by %s, want %s", key, cl.NodeFor(key).Addr(), dst.Addr())
	}
	// A reshard between masters is not a failover: no new owner.
	if n := newOwners.Load(); n != 0 {
		t.Errorf("OnNewOwner called %d times for a reshard between masters", n)
	}
}

// TestClusterAskTargetIsNewOwner: an -ASK to a node that was not a master
// in the last slot map (a node added to take over slots, maybe restarted
// empty before this client ever met it) is a new owner like a -MOVED to
// one: the member is told before the request reaches the node, so that a
// grant from it cannot count before its quarantine exists. Before, only
// -MOVED targets were checked.
func TestClusterAskTargetIsNewOwner(t *testing.T) {
	const aAddr, bAddr = "127.0.0.1:7001", "127.0.0.1:7002"
	a, b := newFake(t), newFake(t)
	slots := "*1\r\n*3\r\n:0\r\n:16383\r\n*3\r\n$9\r\n127.0.0.1\r\n:7001\r\n$2\r\nid\r\n"
	a.handle("CLUSTER", func(s *fakeSession, _ []string) { s.reply(slots) })
	b.handle("CLUSTER", func(s *fakeSession, _ []string) { s.reply(slots) })
	a.handle("SET", func(s *fakeSession, args []string) {
		s.reply(fmt.Sprintf("-ASK %d %s\r\n", conn.Slot(args[1]), bAddr))
	})
	var told atomic.Bool
	var toldFirst atomic.Int32 // 1: told before B got the SET, -1: after
	b.handle("ASKING", func(s *fakeSession, _ []string) { s.reply("+OK\r\n") })
	b.handle("SET", func(s *fakeSession, _ []string) {
		if told.Load() {
			toldFirst.CompareAndSwap(0, 1)
		} else {
			toldFirst.CompareAndSwap(0, -1)
		}
		s.reply("+OK\r\n")
	})
	cl, owners := ownersCluster(t, a, b, bAddr, &told, aAddr)
	if r, err := clusterDo(t, cl, "k", "SET", "k", "v", "NX", "PX", "1000"); err != nil || !r.IsOK() {
		t.Fatalf("SET through the ASK: %v %v", r, err)
	}
	if st := cl.Stats(); st.Asked != 1 {
		t.Fatalf("stats %+v: want one ASK followed", st)
	}
	if owners := owners(); len(owners) != 1 || owners[0] != bAddr || toldFirst.Load() != 1 {
		t.Fatalf("new owners %v, told before the request reached it: %v; want [%s], told first", owners, toldFirst.Load() == 1, bAddr)
	}
}

// TestClusterMovedToUnmappedSlotIsNewOwner: a -MOVED for a slot that no
// slot map since the first assigned, to a node that was a master in the
// last map, is a new owner: the slot was assigned without a previous
// owner to MIGRATE its keys (as after CLUSTER FORGET of a dead master and
// ADDSLOTS elsewhere), so the node may lack a lock another client was
// granted there. The member is told before the request reaches the node.
func TestClusterMovedToUnmappedSlotIsNewOwner(t *testing.T) {
	const aAddr, bAddr = "127.0.0.1:7001", "127.0.0.1:7002"
	const key = "k" // slot 7629: in neither range below
	a, b := newFake(t), newFake(t)
	slots := "*2\r\n" +
		"*3\r\n:0\r\n:100\r\n*3\r\n$9\r\n127.0.0.1\r\n:7001\r\n$2\r\nia\r\n" +
		"*3\r\n:101\r\n:200\r\n*3\r\n$9\r\n127.0.0.1\r\n:7002\r\n$2\r\nib\r\n"
	a.handle("CLUSTER", func(s *fakeSession, _ []string) { s.reply(slots) })
	b.handle("CLUSTER", func(s *fakeSession, _ []string) { s.reply(slots) })
	a.handle("SET", func(s *fakeSession, args []string) {
		s.reply(fmt.Sprintf("-MOVED %d %s\r\n", conn.Slot(args[1]), bAddr))
	})
	var told, toldAtB atomic.Bool // toldAtB: told when B last got the SET
	b.handle("SET", func(s *fakeSession, _ []string) {
		toldAtB.Store(told.Load())
		s.reply("+OK\r\n")
	})
	cl, owners := ownersCluster(t, a, b, bAddr, &told, aAddr, bAddr)
	if cl.NodeFor(key) != nil {
		t.Fatalf("slot %d mapped to %s, want unmapped", conn.Slot(key), cl.NodeFor(key).Addr())
	}
	// Sent to any node until it goes to A, whose MOVED names B (one sent
	// to B straight is served there).
	for cl.Stats().Moved == 0 {
		if r, err := clusterDo(t, cl, key, "SET", key, "v"); err != nil || !r.IsOK() {
			t.Fatalf("SET of an unmapped slot: %v %v", r, err)
		}
	}
	if owners := owners(); len(owners) != 1 || owners[0] != bAddr || !toldAtB.Load() {
		t.Fatalf("new owners %v, told before the MOVED request reached B: %v; want [%s], told first", owners, toldAtB.Load(), bAddr)
	}
}

// ownersCluster starts a Cluster over the fake nodes a and b (b answers
// for bAddr) from seeds, recording the new owners it reports (told is set
// at each), and waits for its first map; owners returns them so far.
func ownersCluster(t *testing.T, a, b *fake, bAddr string, told *atomic.Bool, seeds ...string) (cl *conn.Cluster, owners func() []string) {
	t.Helper()
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == bAddr {
			return b.Dial(ctx, network, addr)
		}
		return a.Dial(ctx, network, addr)
	}
	var mu sync.Mutex
	var got []string
	cl = conn.NewClusterWith(conn.ClusterConfig{Seeds: seeds, Conn: conn.Config{Dialer: dial},
		OnNewOwner: func(addr string) {
			mu.Lock()
			got = append(got, addr)
			mu.Unlock()
			told.Store(true)
		}})
	t.Cleanup(func() { cl.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	return cl, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}
