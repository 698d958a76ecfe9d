package bench

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/localmaster"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
)

// TestCPUNodesCluster: the masters' CPU of a run over a cluster member
// sums every node of the cluster (found from one seed), not only the
// seeds; a standalone master is itself.
func TestCPUNodesCluster(t *testing.T) {
	lc := mastertest.StartCluster(t, localmaster.ClusterOptions{Shards: 3})
	set := mastertest.Start(t, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	got := cpuNodes(ctx, []string{set.Addrs()[0], engine.ClusterPrefix + lc.Addrs()[0]}, conn.Config{})
	want := append([]string{set.Addrs()[0]}, lc.Addrs()...)
	slices.Sort(got[1:])
	slices.Sort(want[1:])
	if !slices.Equal(got, want) {
		t.Fatalf("cpuNodes %v, want %v", got, want)
	}
	// An unreachable member counts its seeds (their INFO cpu then fails
	// the figure, which is reported as not measured).
	if got := cpuNodes(ctx, []string{engine.ClusterPrefix + "127.0.0.1:1"}, conn.Config{}); !slices.Equal(got, []string{"127.0.0.1:1"}) {
		t.Fatalf("unreachable member: %v", got)
	}
}
