//go:build unix

package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/localmaster"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
)

// TestDocumentedACLClusterMember: the ACL line of
// docs/operations.md#security on members that are Redis Clusters:
// `redlock lock` and `redlock bench --plan` as that user, and no entry in
// any node's ACL LOG. The line lacked CLUSTER SLOTS, ASKING and CLUSTER
// NODES: the slot map never loaded (lock stalled 5 s, then went on
// without a cluster member's failover check) and bench --plan exited 2
// (found by the review of issue #46).
func TestDocumentedACLClusterMember(t *testing.T) {
	line := docACLLine(t)
	cl := mastertest.StartCluster(t, localmaster.ClusterOptions{Shards: 3, ExtraArgs: aclUserArgs(t, line)})
	masters := engine.ClusterPrefix + strings.Join(cl.Addrs()[:2], "+")
	t.Setenv(envMasters, "")
	t.Setenv(envMasterUser, line[1])
	t.Setenv(envPassword, aclUserPW)
	aclLog := func(t *testing.T) {
		for _, a := range cl.Addrs() {
			c := conn.New(a, conn.Config{})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			r, err := c.Exec(ctx, "ACL", "LOG")
			cancel()
			c.Close()
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range r.Elems {
				var f []string
				for _, x := range e.Elems {
					f = append(f, x.Text())
				}
				t.Errorf("node %s ACL LOG: %s", a, strings.Join(f[:min(len(f), 10)], " "))
			}
		}
	}
	t.Run("lock", func(t *testing.T) {
		code, stderr := runLock("--fresh-masters", "--masters", masters, "--master-timeout", "300ms", "acl:cl:lock", "--", "true")
		if code != 0 {
			t.Errorf("redlock lock on a cluster member as the documented user: exit %d\n%s", code, stderr)
		}
	})
	t.Run("bench --plan", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		code := run([]string{"bench", "--fresh-masters", "--masters", masters, "--master-user", line[1], "--master-password", aclUserPW,
			"--master-timeout", "300ms", "--duration", "300ms", "--concurrency", "4", "--quiet", "--plan", "10000"}, &stdout, &stderr)
		if code != 0 || strings.Contains(stderr.String()+stdout.String(), "NOPERM") {
			t.Errorf("redlock bench --plan on a cluster member: exit %d\n%s\n%s", code, stdout.String(), stderr.String())
		}
	})
	aclLog(t)
}
