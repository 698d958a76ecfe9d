package bench

import (
	"testing"

	"github.com/google/pprof/profile"
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
