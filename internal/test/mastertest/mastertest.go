// Package mastertest provides test helpers around localmaster.
package mastertest

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/localmaster"
)

// Start starts n local masters for t and closes them when t finishes. If
// the environment variable REDLOCK_REQUIRE_REDIS is "1", it fails instead
// of falling back to embedded masters when redis-server is missing.
func Start(t testing.TB, n int) *localmaster.Set {
	t.Helper()
	return StartWith(t, localmaster.Options{N: n})
}

// RequireReal skips t when s consists of embedded masters, which cannot be
// paused; use it in fault-injection tests.
func RequireReal(t testing.TB, s *localmaster.Set) {
	t.Helper()
	if s.Embedded() {
		t.Skip("mastertest: needs real redis-server masters (embedded masters cannot be paused)")
	}
}

// StartCluster forms a local Redis Cluster for t (localmaster.StartCluster)
// and closes it when t finishes. Without redis-server or redis-cli it
// skips t, or fails it when REDLOCK_REQUIRE_REDIS is "1".
func StartCluster(t testing.TB, o localmaster.ClusterOptions) *localmaster.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	c, err := localmaster.StartCluster(ctx, o)
	if errors.Is(err, localmaster.ErrNoRedisServer) && os.Getenv("REDLOCK_REQUIRE_REDIS") != "1" {
		t.Skipf("mastertest: %v", err)
	}
	if err != nil {
		t.Fatalf("mastertest: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("mastertest: %v", err)
		}
	})
	return c
}
