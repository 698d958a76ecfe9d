package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redlock-dev/redlock/conn"
)

// ClusterMember is one member of [Config.Clusters]: a whole Redis Cluster.
// The member grants a lock when the node serving the key's hash slot grants
// it; the quorum is still counted over members, standalone and cluster
// alike.
type ClusterMember struct {
	// Seeds are host:port addresses of some of the cluster's nodes (at
	// least one). The slot map is loaded from them and kept current by
	// following -MOVED and -ASK replies and by periodic reloads.
	Seeds []string
}

// ClusterPrefix starts the name of a cluster member in logs, errors,
// [MasterStatus.Addr] and [Engine.Masters]: "cluster:" and the seeds joined
// by '+', e.g. "cluster:10.0.1.1:7000+10.0.1.2:7000" (also the syntax of
// the redlock command's --masters flag).
const ClusterPrefix = "cluster:"

// String returns the member's name: [ClusterPrefix] and the seeds joined
// by '+'.
func (m ClusterMember) String() string { return ClusterPrefix + strings.Join(m.Seeds, "+") }

// errUnfenceable refuses WithFencing, with cluster members, for a key
// whose hashed part cannot be wrapped in a hash tag.
var errUnfenceable = fmt.Errorf("%w: with Redis Cluster members, a fenced key must have a hash tag or no braces", ErrBadArgument)

// fenceKeyFor returns the fencing counter of key. With standalone members
// only, it is Config.FenceKey, one per master. With a cluster member the
// fenced acquire's two keys must share a slot, so every member keeps one
// counter per hashed part of the key: FenceKey{tag} (tokens still
// increase per key: a key's grants all use its counter).
func (e *Engine) fenceKeyFor(key string) (string, error) {
	if e.clusters == nil {
		return e.cfg.FenceKey, nil
	}
	tag := conn.HashTag(key)
	if strings.ContainsAny(tag, "{}") || strings.ContainsAny(e.cfg.FenceKey, "{}") {
		return "", errUnfenceable
	}
	return e.cfg.FenceKey + "{" + tag + "}", nil
}

// member i's cluster, or nil for a standalone master.
func (e *Engine) cluster(i int) *conn.Cluster {
	if e.clusters == nil {
		return nil
	}
	return e.clusters[i]
}

// newCluster connects member i, a Redis Cluster. Every node's state
// changes go to watchNode (restart quarantine per node, for the member);
// a node that starts serving slots after the first map load (a promoted
// replica), or whose replication id changed between two of its batches,
// quarantines the member too.
func (e *Engine) newCluster(i int, seeds []string, cc conn.Config) *conn.Cluster {
	user := cc.OnState
	cc.OnState = func(sc conn.StateChange) {
		e.watchNode(i, sc)
		if user != nil {
			user(sc)
		}
	}
	if e.cfg.DisableQuarantine {
		// Nothing to quarantine: no new-owner reports, and no
		// replication check (its INFO per batch).
		return conn.NewClusterWith(conn.ClusterConfig{Seeds: seeds, Conn: cc})
	}
	// Every node connection checks the node's replication id at each
	// batch (conn.Cluster, with OnNewOwner): a change quarantines the
	// member through newOwner; this logs what changed, or that the check
	// is blind on a node.
	cc.OnReplicationID = func(ch conn.ReplicationChange) {
		if ch.Refused != nil {
			e.cfg.Logger.Warn("engine: cluster node refused INFO replication: a promotion between two slot-map loads would go unseen (allow +info)", "master", i, "node", ch.Addr, "err", ch.Refused)
			return
		}
		e.cfg.Logger.Info("engine: cluster node's replication id changed (promoted or demoted since the previous batch)", "master", i, "node", ch.Addr, "role", ch.Role, "from", ch.From, "to", ch.To)
	}
	return conn.NewClusterWith(conn.ClusterConfig{Seeds: seeds, Conn: cc, OnNewOwner: func(addr string) { e.newOwner(i, addr) }})
}

// watchNode follows one node of cluster member i: a node that comes up
// having started less than the quarantine period ago (a restart, maybe
// empty; or first met young, see quarantineFrom) puts the whole member in
// quarantine, like a restarted standalone master: its grants do not count
// until the period has passed. The whole member, not only the node's
// slots: safe, at the price of the member's other shards not voting
// meanwhile.
func (e *Engine) watchNode(i int, sc conn.StateChange) {
	if !sc.Up {
		e.cfg.Logger.Warn("engine: cluster node down", "master", i, "node", sc.Addr, "err", sc.Err)
		return
	}
	if sc.Restarted {
		e.cfg.Logger.Warn("engine: cluster node restarted (new run_id: it may have lost its keys)", "master", i, "node", sc.Addr, "run_id", sc.Info.RunID)
	}
	e.serverUp(i, sc)
}

// newOwner runs when a node starts serving slots of member i after the
// first map load, which is what a failover looks like: a replica promoted
// may lack the last writes of its master (replication is asynchronous),
// so the member does not vote for the quarantine period from now. So
// does a master taking over slots that their previous owner, down or
// gone from the map, cannot have migrated to it: it serves them empty.
func (e *Engine) newOwner(i int, addr string) {
	if e.cfg.DisableQuarantine {
		return
	}
	period := e.quarantinePeriod()
	until := time.Now().Add(period)
	e.raiseQuarantine(i, until)
	e.cfg.Logger.Warn("engine: cluster node became a master, or took over slots from a master down or gone (failover?): the member's grants do not count until the quarantine ends",
		"master", i, "node", addr, "until", until.Format(time.RFC3339Nano), "period", period)
}

// raiseQuarantine moves member i's quarantine end to until if later.
func (e *Engine) raiseQuarantine(i int, until time.Time) {
	u := int64(until.Sub(e.epoch))
	for {
		cur := e.quar[i].Load()
		if u <= cur || e.quar[i].CompareAndSwap(cur, u) {
			return
		}
	}
}

// clusterConns returns member i's node connections, ordered by address.
func clusterConns(cl *conn.Cluster) []*conn.Conn {
	nodes := cl.Nodes()
	addrs := make([]string, 0, len(nodes))
	for a := range nodes {
		addrs = append(addrs, a)
	}
	slices.Sort(addrs)
	out := make([]*conn.Conn, len(addrs))
	for k, a := range addrs {
		out[k] = nodes[a]
	}
	return out
}

// waitCluster waits for cluster member cl's first slot map and for the
// first connect attempt to each node in it (WaitReady).
func waitCluster(ctx context.Context, cl *conn.Cluster) {
	if cl.WaitLoaded(ctx) != nil {
		return
	}
	for _, c := range cl.Nodes() {
		_ = c.WaitFirstAttempt(ctx)
	}
}

// serverIDs returns the run_id of every server member i reaches now,
// with its address (one for a standalone master, every connected node of
// a cluster member).
func (e *Engine) serverIDs(i int, st MasterStatus) map[string]string {
	cl := e.cluster(i)
	if cl == nil {
		if st.Up && st.Info.RunID != "" {
			return map[string]string{st.Info.RunID: e.addrs[i]}
		}
		return nil
	}
	ids := map[string]string{}
	for a, c := range cl.Nodes() {
		if id := c.Info().RunID; c.Connected() && id != "" {
			ids[id] = a
		}
	}
	return ids
}
