package main

import (
	"runtime"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/test/mastertest"
)

// TestModes runs both floors for a few cycles against real masters: each
// returns one positive latency per cycle, bounded by the epoll timeout.
func TestModes(t *testing.T) {
	set := mastertest.Start(t, masters)
	modes := map[string]func([]string, int) ([]time.Duration, error){"goroutines": goroutineCycles}
	if runtime.GOOS == "linux" {
		modes["epoll"] = epollCycles
	}
	for name, f := range modes {
		t.Run(name, func(t *testing.T) {
			lat, err := f(set.Addrs(), 200)
			if err != nil {
				t.Fatal(err)
			}
			if len(lat) != 200 {
				t.Fatalf("%d latencies, want 200", len(lat))
			}
			for i, d := range lat {
				if d <= 0 || d > 10*time.Second {
					t.Fatalf("cycle %d took %v", i, d)
				}
			}
		})
	}
}

func TestBadArguments(t *testing.T) {
	if err := run("all", 10); err == nil {
		t.Error("run with -n 10: no error")
	}
	if err := run("spin", 100); err == nil {
		t.Error("run with an unknown mode: no error")
	}
}
