package localmaster_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/internal/localmaster"
)

// TestStartCluster forms a 3-shard cluster with one replica each and
// checks that every slot is served, that a key is stored on the node its
// slot maps to (the others answer MOVED), and that Close removes it all.
func TestStartCluster(t *testing.T) {
	if !localmaster.Available() {
		t.Skip("redis-server not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := localmaster.StartCluster(ctx, localmaster.ClusterOptions{Shards: 3, Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	masters, err := c.MasterAddrs(ctx)
	if err != nil || len(masters) != 3 {
		t.Fatalf("masters %v %v, want 3", masters, err)
	}
	moved, stored := 0, 0
	for _, a := range masters {
		cc, err := conn.Dial(ctx, a, conn.Config{})
		if err != nil {
			t.Fatal(err)
		}
		r, err := cc.Exec(ctx, "SET", "cluster-test-key", "v")
		switch {
		case err == nil && r.IsOK():
			stored++
		case err != nil && strings.HasPrefix(err.Error(), "MOVED "):
			moved++
		default:
			t.Errorf("SET on %s: %v %v", a, r, err)
		}
		cc.Close()
	}
	if stored != 1 || moved != 2 {
		t.Errorf("SET stored on %d masters and MOVED by %d, want 1 and 2", stored, moved)
	}
	// MoveSlot moves the key's slot, and the key, to another master.
	from, to, err := c.MoveSlot(ctx, conn.Slot("cluster-test-key"), 0)
	if err != nil || from == to {
		t.Fatalf("MoveSlot: %s → %s, %v", from, to, err)
	}
	tc, err := conn.Dial(ctx, to, conn.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := tc.Exec(ctx, "GET", "cluster-test-key"); err != nil || r.Text() != "v" {
		t.Errorf("GET on the new owner %s: %v %v", to, r, err)
	}
	tc.Close()
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}
