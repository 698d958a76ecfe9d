package bench

import (
	"fmt"
	"io"
	"math"
)

// Plan is the cores a lock rate needs, from the CPU per cycle a run
// measured for each process (Phase.ClientCPUPerCycle, MasterCPUPerCycle,
// ProxyCPUPerCycle): cores = rate × µs per cycle / 10^6. Each master sees
// every lock, so a master's share is the masters' CPU divided by their
// number; a master runs its commands on one thread, so a share above
// MasterCoreBudget of a core needs that many cluster shards per member
// (each member a Redis Cluster, its keys spread over the shards).
type Plan struct {
	Rate    float64 `json:"rate"`
	Masters int     `json:"masters"`
	// Costs measured, µs per cycle (the proxy's 0 when it was not measured).
	ClientUS float64 `json:"client_us_per_cycle"`
	MasterUS float64 `json:"masters_us_per_cycle"`
	ProxyUS  float64 `json:"proxy_us_per_cycle,omitempty"`
	// Cores needed at Rate.
	ClientCores    float64 `json:"client_cores"`
	MasterCores    float64 `json:"masters_cores"`
	PerMasterCores float64 `json:"per_master_cores"`
	ProxyCores     float64 `json:"proxy_cores,omitempty"`
	// Shards is the cluster shards each member needs so that no node is
	// asked for more than MasterCoreBudget of a core (1: a plain master).
	Shards int `json:"shards"`
	// MeasuredShards is the nodes per member of the run the costs come
	// from (1: plain masters). A member split into more shards than that
	// costs more CPU per cycle than measured — each node gets a smaller
	// share of every batch — so a plan that needs more says so (Remeasure)
	// instead of promising that rate.
	MeasuredShards float64 `json:"measured_shards"`
	Remeasure      bool    `json:"remeasure,omitempty"`
}

// MasterCoreBudget is the share of one core a plan lets one master node
// use: a single-threaded server kept below saturation (latency grows
// steeply near it) with room for I/O threads and the OS.
const MasterCoreBudget = 0.7

// PlanFor returns the plan for rate from the costs p measured over
// masters members made of nodes servers (nodes = masters for plain
// masters; all their nodes for cluster members). It fails when p has no
// master CPU (embedded masters, or INFO cpu not readable).
func PlanFor(rate float64, p Phase, masters, nodes int) (Plan, error) {
	if rate <= 0 || math.IsInf(rate, 0) || math.IsNaN(rate) {
		return Plan{}, fmt.Errorf("%w: plan rate must be positive, got %g", ErrBadConfig, rate)
	}
	if p.MasterCPUPerCycle <= 0 || p.ClientCPUPerCycle <= 0 || masters < 1 {
		return Plan{}, fmt.Errorf("bench: no CPU per cycle measured for the masters and the client (real masters whose INFO cpu is readable are needed)")
	}
	pl := Plan{Rate: rate, Masters: masters, ClientUS: p.ClientCPUPerCycle, MasterUS: p.MasterCPUPerCycle, ProxyUS: p.ProxyCPUPerCycle}
	pl.ClientCores = rate * pl.ClientUS / 1e6
	pl.MasterCores = rate * pl.MasterUS / 1e6
	pl.PerMasterCores = pl.MasterCores / float64(masters)
	pl.ProxyCores = rate * pl.ProxyUS / 1e6
	pl.Shards = max(1, int(math.Ceil(pl.PerMasterCores/MasterCoreBudget)))
	pl.MeasuredShards = max(1, float64(nodes)/float64(masters))
	pl.Remeasure = float64(pl.Shards) > pl.MeasuredShards
	return pl, nil
}

// Write prints the plan.
func (pl Plan) Write(w io.Writer) error {
	_, err := fmt.Fprintf(w, `plan for %.0f cycles/s over %d masters (measured: client %.1f µs, masters %.1f µs per cycle together%s):
  client        %6.2f cores
  masters       %6.2f cores in all, %.2f per master
  shards        %d per member (no node above %.0f%% of a core)%s
`, pl.Rate, pl.Masters, pl.ClientUS, pl.MasterUS, proxyNote(pl.ProxyUS, "; proxy %.1f µs"), pl.ClientCores, pl.MasterCores, pl.PerMasterCores,
		pl.Shards, MasterCoreBudget*100, proxyNote(pl.ProxyCores, "\n  proxy         %6.2f cores"))
	if err == nil && pl.Remeasure {
		_, err = fmt.Fprintf(w, `  note: these costs were measured with %.3g node(s) per member; more shards
  cost more CPU per cycle (1 to 3 shards: 2.3x, docs/benchmarks.md), so run
  the bench over members of %d shards and plan again
`, pl.MeasuredShards, pl.Shards)
	}
	return err
}

func proxyNote(v float64, format string) string {
	if v <= 0 {
		return ""
	}
	return fmt.Sprintf(format, v)
}
