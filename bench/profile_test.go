package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/redlock-dev/redlock/internal/test/mastertest"
)

func TestTopOfSyntheticProfile(t *testing.T) {
	fn := map[string]*profile.Function{}
	loc := func(names ...string) *profile.Location { // names: innermost (inlined) first
		l := &profile.Location{}
		for _, n := range names {
			if fn[n] == nil {
				fn[n] = &profile.Function{Name: n}
			}
			l.Line = append(l.Line, profile.Line{Function: fn[n]})
		}
		return l
	}
	p := &profile.Profile{SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}}}
	add := func(ns int64, stack ...*profile.Location) {
		p.Sample = append(p.Sample, &profile.Sample{Value: []int64{1, ns}, Location: stack})
	}
	// main -> work -> hash (leaf): 6s; main -> work (leaf): 2s;
	// main -> rec -> rec (recursion, leaf rec): 1s; main -> inlined(leaf) in work: 1s.
	add(6e9, loc("hash"), loc("work"), loc("main"))
	add(2e9, loc("work"), loc("main"))
	add(1e9, loc("rec"), loc("rec"), loc("main"))
	add(1e9, loc("inl", "work"), loc("main"))

	top, err := topOf(p, 3)
	if err != nil {
		t.Fatal(err)
	}
	if top.Total != 10 {
		t.Fatalf("total = %v s", top.Total)
	}
	wantFlat := []struct {
		name string
		s    float64
	}{{"hash", 6}, {"work", 2}, {"inl", 1}}
	if len(top.Flat) != 3 {
		t.Fatalf("flat = %+v", top.Flat)
	}
	for i, w := range wantFlat {
		if top.Flat[i].Name != w.name || top.Flat[i].Flat != w.s {
			t.Errorf("flat[%d] = %+v, want %s %vs", i, top.Flat[i], w.name, w.s)
		}
	}
	if top.Flat[0].FlatPct != 60 {
		t.Errorf("hash flat%% = %v", top.Flat[0].FlatPct)
	}
	wantCum := []struct {
		name string
		s    float64
	}{{"main", 10}, {"work", 9}, {"hash", 6}}
	for i, w := range wantCum {
		if top.Cum[i].Name != w.name || top.Cum[i].Cum != w.s {
			t.Errorf("cum[%d] = %+v, want %s %vs", i, top.Cum[i], w.name, w.s)
		}
	}
	// Recursion counts once per sample.
	all, _ := topOf(p, 100)
	for _, f := range all.Cum {
		if f.Name == "rec" && f.Cum != 1 {
			t.Errorf("rec cum = %v, want 1 (once per sample)", f.Cum)
		}
	}
}

func TestTopFunctionsMissingFile(t *testing.T) {
	if _, err := TopFunctions(t.TempDir()+"/none.pprof", 10); err == nil {
		t.Fatal("no error for a missing profile")
	}
}

// TestCPUProfileTargetOnly: the CPU profile covers the target's measured
// windows only. With a warm-up, two rounds, a redsync peer and the
// ceiling, the merged profile spans about Duration (its two windows: not
// the warm-ups, which would double it), holds the engine's functions and
// none of redsync's or the ceiling's, and the report says so.
func TestCPUProfileTargetOnly(t *testing.T) {
	set := mastertest.Start(t, 3)
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	const d = time.Second
	r, err := Run(t.Context(), Config{FreshMasters: true, Masters: set.Addrs(), Duration: d, Warmup: d / 2, Rounds: 2, Concurrency: 8,
		Compare: []string{PeerRedsync}, Ceiling: true, CPUProfile: path})
	if err != nil {
		t.Fatal(err)
	}
	if r.Peers[0].CyclesPerSec == 0 || r.Ceiling == nil || r.Ceiling.CyclesPerSec == 0 {
		t.Fatalf("the peer or the ceiling did not run: %+v %+v", r.Peers, r.Ceiling)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	// One window alone spans d/2 and the warm-ups would add d: the bounds
	// tell those apart with room for a busy machine's late starts (899.6
	// ms once failed a 0.9 d bound).
	if got := time.Duration(p.DurationNanos); got < d*7/10 || got > d*3/2 {
		t.Errorf("profile spans %v; want about %v (the target's two windows, without warm-ups)", got, d)
	}
	var engine int
	for _, s := range p.Sample {
		for _, loc := range s.Location {
			for _, l := range loc.Line {
				if l.Function == nil {
					continue
				}
				name := l.Function.Name
				switch {
				case strings.Contains(name, "redlock/engine."):
					engine++
				case strings.Contains(name, "redsync"), strings.Contains(name, "go-redis"),
					strings.Contains(name, "bench.measureCeiling"), strings.Contains(name, "bench.(*pump)"):
					t.Fatalf("the profile has %s: a peer's or the ceiling's", name)
				}
			}
		}
	}
	if engine == 0 {
		t.Errorf("no engine function in %d samples", len(p.Sample))
	}
	var table strings.Builder
	if err := r.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if want := "(CPU profile of the engine's measured windows only: not the warm-ups, peers or ceiling)"; !strings.Contains(table.String(), want) {
		t.Errorf("table lacks %q:\n%s", want, table.String())
	}
	if pg := newReportPage(r); pg.ProfileNote != r.profileNote() || len(pg.TopTables) == 0 {
		t.Errorf("report page: note %q, %d top tables", pg.ProfileNote, len(pg.TopTables))
	}
}
