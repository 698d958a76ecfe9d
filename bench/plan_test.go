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
	pl, err := PlanFor(100_000, p, 5)
	if err != nil {
		t.Fatal(err)
	}
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-9 }
	// 100k/s × 15 µs = 1.5 cores; × 40 µs = 4 cores over 5 masters: 0.8
	// each, above 0.7: two shards per member.
	if !near(pl.ClientCores, 1.5) || !near(pl.MasterCores, 4) || !near(pl.PerMasterCores, 0.8) || !near(pl.ProxyCores, 2) || pl.Shards != 2 {
		t.Fatalf("plan %+v", pl)
	}
	if pl, _ := PlanFor(10_000, p, 5); pl.Shards != 1 {
		t.Fatalf("10k/s: %d shards; want 1", pl.Shards)
	}
	var b strings.Builder
	pl.Write(&b)
	for _, want := range []string{"100000 cycles/s over 5 masters", "1.50 cores", "4.00 cores in all, 0.80 per master", "2 per member", "proxy           2.00 cores"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("plan output lacks %q:\n%s", want, b.String())
		}
	}
	if _, err := PlanFor(0, p, 5); !errors.Is(err, ErrBadConfig) {
		t.Errorf("rate 0: %v", err)
	}
	if _, err := PlanFor(1000, Phase{ClientCPUPerCycle: 15}, 5); err == nil {
		t.Error("a plan without the masters' CPU")
	}
}
