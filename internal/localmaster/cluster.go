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

// MasterAddrs returns the addresses of the nodes that are masters serving
// slots now, as one running node sees it (a failover changes them).
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
		for _, f := range servingMasters(out) {
			addrs = append(addrs, strings.SplitN(f[1], "@", 2)[0])
		}
		return addrs, nil
	}
	return nil, errors.New("localmaster: no running cluster node")
}

// servingMasters returns the fields of the CLUSTER NODES lines of the
// masters that serve slots and are not failing. Just after a cluster
// formed, a node's view may still list a replica-to-be as a master
// without slots: it is not one of them.
func servingMasters(nodes string) [][]string {
	var out [][]string
	for _, line := range strings.Split(nodes, "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || !strings.Contains(f[2], "master") || strings.Contains(f[2], "fail") {
			continue
		}
		out = append(out, f)
	}
	return out
}

// masterView reduces CLUSTER NODES output to the masters serving slots
// and their slot ranges, sorted: what every node of a settled cluster
// agrees on.
func masterView(nodes string) string {
	var view []string
	for _, f := range servingMasters(nodes) {
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

// MoveSlot moves slot, with its keys, from the master serving it to the
// next master (in address order), the way redis-cli --cluster reshard
// does: SETSLOT IMPORTING on the target and MIGRATING on the source, a
// pause of hold (meanwhile the source answers -ASK for keys it does not
// have), MIGRATE of every key (without REPLACE: a key exists on one side
// only), then SETSLOT NODE on every master, the target first and the
// source next (the other order lets the target, still importing, bounce
// requests back to the source that has just redirected them to it). It
// returns both addresses.
func (c *Cluster) MoveSlot(ctx context.Context, slot int, hold time.Duration) (from, to string, err error) {
	any, err := c.MasterAddrs(ctx)
	if err != nil || len(any) == 0 {
		return "", "", fmt.Errorf("localmaster: no master: %v", err)
	}
	nodes, err := nodeCommand(ctx, any[0], "CLUSTER", "NODES")
	if err != nil {
		return "", "", err
	}
	ids := map[string]string{}
	var masters []string
	// Masters that serve slots (SETSLOT on a replica-to-be still listed
	// as a master fails: "Please use SETSLOT only with masters").
	for _, f := range servingMasters(nodes) {
		addr := strings.SplitN(f[1], "@", 2)[0]
		ids[addr] = f[0]
		masters = append(masters, addr)
		for _, rng := range f[8:] {
			lo, hi, ok := strings.Cut(rng, "-")
			if !ok {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 == nil && err2 == nil && a <= slot && slot <= b {
				from = addr
			}
		}
	}
	if from == "" || len(masters) < 2 {
		return "", "", fmt.Errorf("localmaster: no owner of slot %d, or no other master", slot)
	}
	slices.Sort(masters)
	to = masters[(slices.Index(masters, from)+1)%len(masters)]
	s := strconv.Itoa(slot)
	run := func(addr string, args ...string) error {
		out, err := nodeCommand(ctx, addr, args...)
		if r := strings.TrimSpace(out); err == nil && r != "OK" && r != "NOKEY" { // NOKEY: the keys expired meanwhile
			err = fmt.Errorf("%s on %s: %s", args, addr, r)
		}
		return err
	}
	if err := run(to, "CLUSTER", "SETSLOT", s, "IMPORTING", ids[from]); err != nil {
		return from, to, err
	}
	if err := run(from, "CLUSTER", "SETSLOT", s, "MIGRATING", ids[to]); err != nil {
		return from, to, err
	}
	time.Sleep(hold)
	host, port, _ := net.SplitHostPort(to)
	for {
		out, err := nodeCommand(ctx, from, "CLUSTER", "GETKEYSINSLOT", s, "100")
		if err != nil {
			return from, to, err
		}
		keys := strings.Fields(out)
		if len(keys) == 0 {
			break
		}
		if err := run(from, append([]string{"MIGRATE", host, port, "", "0", "5000", "KEYS"}, keys...)...); err != nil {
			return from, to, err
		}
	}
	order := append([]string{to, from}, slices.DeleteFunc(slices.Clone(masters), func(m string) bool { return m == to || m == from })...)
	for _, m := range order {
		if err := run(m, "CLUSTER", "SETSLOT", s, "NODE", ids[to]); err != nil && !strings.Contains(err.Error(), "only with masters") {
			return from, to, err
		}
	}
	return from, to, nil
}
