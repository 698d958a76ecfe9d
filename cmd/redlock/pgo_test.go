//go:build unix

package main

import (
	"os"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
)

// TestDefaultPGO: default.pgo, the profile `go build` optimises the
// command with (internal/tools/pgo-profile.sh writes it), is a CPU profile
// of this program's hot paths — the engine's fan-out, the master
// connections' readers and the proxy's event loop — not a stray file: a
// profile that does not parse fails every build, and one of another
// program optimises nothing. (make race builds with -pgo=off, so this is
// what checks it.)
func TestDefaultPGO(t *testing.T) {
	f, err := os.Open("default.pgo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		t.Fatalf("default.pgo: %v", err)
	}
	if len(p.SampleType) < 2 || p.SampleType[1].Type != "cpu" || p.SampleType[1].Unit != "nanoseconds" {
		t.Fatalf("default.pgo is not a CPU profile: sample types %v", p.SampleType)
	}
	var total int64
	seen := map[string]int64{}
	want := []string{"engine.(*op).fanout", "conn.(*Conn).readLoop", "respserver.(*loop).run"}
	for _, s := range p.Sample {
		total += s.Value[1]
		hit := map[string]bool{}
		for _, loc := range s.Location {
			for _, ln := range loc.Line {
				for _, w := range want {
					if !hit[w] && strings.HasSuffix(ln.Function.Name, w) {
						hit[w] = true
						seen[w] += s.Value[1]
					}
				}
			}
		}
	}
	if total < 10e9 {
		t.Errorf("default.pgo holds %.1f s of CPU samples, want at least 10 s", float64(total)/1e9)
	}
	for _, w := range want {
		if seen[w] < total/100 {
			t.Errorf("default.pgo: %s in %.2f%% of the samples, want at least 1%%", w, 100*float64(seen[w])/float64(total))
		}
	}
}
