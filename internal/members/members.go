// Package members reads the member list syntax of the redlock command's
// --masters flag (and bench.Config.Masters) into an engine configuration:
// "host:port" is a standalone master, "cluster:host:port+host:port" a
// Redis Cluster member given by seed nodes.
package members

import (
	"fmt"
	"strings"

	"github.com/redlock-dev/redlock/engine"
)

// Parse splits list into the standalone masters and the cluster members of
// an [engine.Config] (the engine numbers them Addrs first, then Clusters).
// A cluster entry without seeds, or with an empty one, is an error.
func Parse(list []string) (addrs []string, clusters []engine.ClusterMember, err error) {
	for _, a := range list {
		rest, ok := strings.CutPrefix(a, engine.ClusterPrefix)
		if !ok {
			addrs = append(addrs, a)
			continue
		}
		seeds := strings.Split(rest, "+")
		for _, s := range seeds {
			if strings.TrimSpace(s) == "" {
				return nil, nil, fmt.Errorf("%q: want %shost:port+host:port", a, engine.ClusterPrefix)
			}
		}
		clusters = append(clusters, engine.ClusterMember{Seeds: seeds})
	}
	return addrs, clusters, nil
}

// Apply sets cfg.Addrs and cfg.Clusters from list (see [Parse]).
func Apply(cfg *engine.Config, list []string) error {
	addrs, clusters, err := Parse(list)
	if err != nil {
		return err
	}
	cfg.Addrs, cfg.Clusters = addrs, clusters
	return nil
}

// Nodes returns every address list names: the standalone masters and every
// cluster member's seeds.
func Nodes(addrs []string, clusters []engine.ClusterMember) []string {
	out := append([]string(nil), addrs...)
	for _, m := range clusters {
		out = append(out, m.Seeds...)
	}
	return out
}

// HasCluster reports whether list names a cluster member.
func HasCluster(list []string) bool {
	for _, a := range list {
		if strings.HasPrefix(a, engine.ClusterPrefix) {
			return true
		}
	}
	return false
}
