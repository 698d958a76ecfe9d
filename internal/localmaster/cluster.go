package localmaster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ClusterOptions configures StartCluster.
type ClusterOptions struct {
	// Shards is the number of master nodes (at least 3: redis-cli
	// --cluster create refuses fewer).
	Shards int
	// Replicas is the number of replicas per master (default 0).
	Replicas int
	// NodeTimeout is cluster-node-timeout (default 1s): how long a master
	// may be unreachable before its replica is promoted.
	NodeTimeout time.Duration
	// ServerPath and ExtraArgs are as in Options.
	ServerPath string
	ExtraArgs  []string
}

// Cluster is a Redis Cluster of local redis-server nodes formed by
// StartCluster: Shards masters holding every slot, each with Replicas
// replicas. Close it (Set.Close) when done.
type Cluster struct {
	*Set
	Shards, Replicas int
}

// StartCluster starts Shards×(1+Replicas) redis-server nodes in cluster
// mode on free loopback ports, forms a cluster of them with redis-cli
// --cluster create (16384 slots spread evenly over the masters), and waits
// until every node reports cluster_state:ok and the same slot map. It
// needs redis-server and redis-cli (ErrNoRedisServer otherwise); nodes
// are never embedded.
func StartCluster(ctx context.Context, co ClusterOptions) (*Cluster, error) {
	if co.Shards < 3 || co.Replicas < 0 {
		return nil, fmt.Errorf("localmaster: a cluster needs at least 3 shards and no negative replicas, got %d and %d", co.Shards, co.Replicas)
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, fmt.Errorf("%w: redis-cli: %v", ErrNoRedisServer, err)
	}
	timeout := co.NodeTimeout
	if timeout <= 0 {
		timeout = time.Second
	}
	extra := append([]string{
		"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", strconv.FormatInt(timeout.Milliseconds(), 10),
		// Replicas of a test cluster may be promoted without having
		// synced recently, and a slot range whose master is down must
		// not stop the other shards from answering.
		"--cluster-replica-validity-factor", "0", "--cluster-require-full-coverage", "no",
	}, co.ExtraArgs...)
	set, err := Start(ctx, Options{N: co.Shards * (1 + co.Replicas), RequireReal: true, ServerPath: co.ServerPath, ExtraArgs: extra})
	if err != nil {
		return nil, err
	}
	c := &Cluster{Set: set, Shards: co.Shards, Replicas: co.Replicas}
	args := append([]string{"--cluster", "create"}, set.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(co.Replicas), "--cluster-yes")
	out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput()
	if err != nil {
		set.Close()
		return nil, fmt.Errorf("localmaster: redis-cli --cluster create: %w\n%s", err, out)
	}
	if err := c.WaitOK(ctx); err != nil {
		set.Close()
		return nil, err
	}
	return c, nil
}

// WaitOK waits until every running node reports cluster_state:ok and
// sees every slot assigned, and all of them agree on which node serves
// each slot range, or ctx ends.
func (c *Cluster) WaitOK(ctx context.Context) error {
	var last error
	for {
		last = c.check(ctx)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("localmaster: cluster not ok: %w (%w)", last, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *Cluster) check(ctx context.Context) error {
	var slots string
	for _, m := range c.Masters() {
		if !m.Running() {
			continue
		}
		info, err := nodeCommand(ctx, m.Addr(), "CLUSTER", "INFO")
		if err != nil {
			return err
		}
		if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_slots_assigned:16384") {
			return fmt.Errorf("node %s: %s", m.Addr(), firstLines(info, 3))
		}
		nodes, err := nodeCommand(ctx, m.Addr(), "CLUSTER", "NODES")
		if err != nil {
			return err
		}
		s := masterView(nodes)
		if slots == "" {
			slots = s
		} else if s != slots {
			return fmt.Errorf("node %s sees another slot map: %s, not %s", m.Addr(), s, slots)
		}
	}
	return nil
}

// MasterAddrs returns the addresses of the nodes that are masters now,
// as one running node sees it (a failover changes them).
func (c *Cluster) MasterAddrs(ctx context.Context) ([]string, error) {
	for _, m := range c.Masters() {
		if !m.Running() {
			continue
		}
		out, err := nodeCommand(ctx, m.Addr(), "CLUSTER", "NODES")
		if err != nil {
			continue
		}
		var addrs []string
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) < 3 || !strings.Contains(f[2], "master") || strings.Contains(f[2], "fail") {
				continue
			}
			addrs = append(addrs, strings.SplitN(f[1], "@", 2)[0])
		}
		return addrs, nil
	}
	return nil, errors.New("localmaster: no running cluster node")
}

// masterView reduces CLUSTER NODES output to the masters serving slots
// and their slot ranges, sorted: what every node of a settled cluster
// agrees on.
func masterView(nodes string) string {
	var view []string
	for _, line := range strings.Split(nodes, "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || !strings.Contains(f[2], "master") || strings.Contains(f[2], "fail") {
			continue
		}
		view = append(view, strings.SplitN(f[1], "@", 2)[0]+" "+strings.Join(f[8:], " "))
	}
	slices.Sort(view)
	return strings.Join(view, "; ")
}

// nodeCommand runs one command on addr with redis-cli (raw output).
func nodeCommand(ctx context.Context, addr string, args ...string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(cctx, "redis-cli", append([]string{"-h", host, "-p", port, "--raw"}, args...)...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("redis-cli -p %s %s: %w: %s", port, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, " ")
}
