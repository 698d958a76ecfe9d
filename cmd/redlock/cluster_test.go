//go:build unix

package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/localmaster"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
)

// TestLockClusterMember: `redlock lock --masters` mixes a Redis Cluster
// member (cluster:seed+seed) with standalone masters; the lock is held on
// all three while the command runs, a second runner is refused (75), and
// the command's status passes through.
func TestLockClusterMember(t *testing.T) {
	t.Setenv(envMasters, "")
	cl := mastertest.StartCluster(t, localmaster.ClusterOptions{Shards: 3})
	set := mastertest.Start(t, 2)
	masters := engine.ClusterPrefix + strings.Join(cl.Addrs()[:2], "+") + "," + strings.Join(set.Addrs(), ",")

	env := filepath.Join(t.TempDir(), "env")
	done := make(chan int, 1)
	go func() {
		code, stderr := runLock("--fresh-masters", "--masters", masters, "--ttl", "5s", "cl:job", "--", "sh", "-c", `echo "$REDLOCK_TOKEN" > `+env+`; sleep 1; exit 7`)
		if code != 7 {
			t.Errorf("first runner: exit %d, want the command's 7; stderr:\n%s", code, stderr)
		}
		done <- code
	}()
	token := strings.TrimSpace(waitFile(t, env, 10*time.Second))
	for i, v := range dialMasters(t, set).await(t, 5*time.Second, token, "GET", "cl:job") {
		if v != token {
			t.Errorf("standalone master %d holds %q, want %q", i, v, token)
		}
	}
	if code, stderr := runLock("--fresh-masters", "--masters", masters, "cl:job", "--", "true"); code != 75 {
		t.Errorf("second runner: exit %d, want 75 (held); stderr:\n%s", code, stderr)
	}
	<-done
	if code, stderr := runLock("--masters", "cluster:+", "k", "--", "true"); code != 2 || !strings.Contains(stderr, "cluster:") {
		t.Errorf("empty cluster member: exit %d, want 2 naming it; stderr:\n%s", code, stderr)
	}
}
