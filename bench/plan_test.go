package bench

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// TestPlanFor: the model is rate × µs per cycle; shards keep each node
// under MasterCoreBudget of a core.
func TestPlanFor(t *testing.T) {
	p := Phase{ClientCPUPerCycle: 15, MasterCPUPerCycle: 40, ProxyCPUPerCycle: 20}
	pl, err := PlanFor(100_000, p, 5, 5)
	if err != nil {
		t.Fatal(err)
	}
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-9 }
	// 100k/s × 15 µs = 1.5 cores; × 40 µs = 4 cores over 5 masters: 0.8
	// each, above 0.7: two shards per member.
	if !near(pl.ClientCores, 1.5) || !near(pl.MasterCores, 4) || !near(pl.PerMasterCores, 0.8) || !near(pl.ProxyCores, 2) || pl.Shards != 2 {
		t.Fatalf("plan %+v", pl)
	}
	if pl, _ := PlanFor(10_000, p, 5, 5); pl.Shards != 1 || pl.Remeasure {
		t.Fatalf("10k/s: %d shards (remeasure %v); want 1", pl.Shards, pl.Remeasure)
	}
	// Two shards from costs measured on plain masters: more shards cost
	// more per cycle than measured, so the plan asks for a run at that
	// topology; measured over 3-shard members, 2 shards are covered.
	if !pl.Remeasure || pl.MeasuredShards != 1 {
		t.Fatalf("2 shards planned from plain masters: remeasure %v, measured shards %v", pl.Remeasure, pl.MeasuredShards)
	}
	if pl3, _ := PlanFor(100_000, p, 5, 15); pl3.Remeasure || pl3.MeasuredShards != 3 || pl3.Shards != 2 {
		t.Fatalf("measured over 3-shard members: %+v", pl3)
	}
	var b strings.Builder
	pl.Write(&b)
	for _, want := range []string{"100000 cycles/s over 5 masters", "1.50 cores", "4.00 cores in all, 0.80 per master", "2 per member", "proxy           2.00 cores", "measured with 1 node(s) per member", "members of 2 shards"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("plan output lacks %q:\n%s", want, b.String())
		}
	}
	if _, err := PlanFor(0, p, 5, 5); !errors.Is(err, ErrBadConfig) {
		t.Errorf("rate 0: %v", err)
	}
	if _, err := PlanFor(1000, Phase{ClientCPUPerCycle: 15}, 5, 5); err == nil {
		t.Error("a plan without the masters' CPU")
	}
}
