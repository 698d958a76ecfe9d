package proxy

import (
	"fmt"
	"io"
	"math"
	"net"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/proxy/internal/respserver"
)

// TestAllocs bounds the allocations of one SET NX PX through the proxy by
// a client that waits for each reply, and of a SET NX PX followed by the
// engine's release script (a recognised compare-and-delete), counted over
// the whole process: the connection's reader (or event loop), the engine
// and its master connections. The client side (a raw socket, requests
// rendered before) allocates nothing. On goroutines the reader runs the
// command and writes its reply (pool.go): at most 6 for a SET (5
// measured; docs/benchmarks.md). On an event loop the command is started
// asynchronously, as a pipelined one (its call, its done channel, its
// callback): at most 10 (9 measured).
func TestAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	for _, loops := range []int{-1, 1} {
		if loops > 0 && !respserver.LoopsSupported {
			continue
		}
		t.Run(fmt.Sprintf("loops=%d", loops), func(t *testing.T) { testAllocs(t, loops) })
	}
}

func testAllocs(t *testing.T, loops int) {
	e := startEnv(t, 5, func(c *Config) {
		c.EventLoops = loops
		// A per-master timeout no busy machine misses (313 of 1205 SETs
		// were answered unavailable once under load): what is counted is
		// the allocations of a granted SET.
		c.EngineConfig.MasterTimeout = 2 * time.Second
	})
	nc, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	const warm, runs = 200, 1000 // runs: five batches
	n := warm + runs + 5         // AllocsPerRun runs once more per batch
	sets, rels := make([][]byte, 2*n), make([][]byte, 2*n)
	for i := range sets {
		// As redis-benchmark sends it: upper-case name and options.
		key := fmt.Sprintf("allocs:%05d", i)
		sets[i] = fmt.Appendf(nil, "*6\r\n$3\r\nSET\r\n$12\r\n%s\r\n$1\r\nv\r\n$2\r\nNX\r\n$2\r\nPX\r\n$5\r\n30000\r\n", key)
		rels[i] = fmt.Appendf(nil, "*5\r\n$7\r\nEVALSHA\r\n$40\r\n%s\r\n$1\r\n1\r\n$12\r\n%s\r\n$1\r\nv\r\n", scripts.Release.SHA(), key)
	}
	next, failed := 0, 0
	var rep [16]byte
	call := func(req []byte, want string) {
		nc.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := nc.Write(req); err != nil {
			failed++
			return
		}
		if _, err := io.ReadFull(nc, rep[:len(want)]); err != nil || string(rep[:len(want)]) != want {
			failed++
		}
	}
	set := func() {
		call(sets[next], "+OK\r\n")
		next++
	}
	cycle := func() {
		call(sets[next], "+OK\r\n")
		call(rels[next], ":1\r\n")
		next++
	}
	// AllocsPerRun counts the whole process's allocations: goroutines that
	// earlier tests left running a while (wake-up chains, timers) add
	// theirs (16 against 15 once, after the Redisson tests; issue #43).
	// Their noise only adds: the least of five batches is the request's.
	measure := func(f func()) float64 {
		for range warm {
			f()
		}
		allocs := math.Inf(1)
		for range 5 {
			allocs = min(allocs, testing.AllocsPerRun(runs/5, f))
		}
		if failed != 0 {
			t.Fatalf("%d of %d requests failed", failed, next)
		}
		return allocs
	}
	setAllocs := measure(set)
	t.Logf("SET NX PX through the proxy: %.2f allocs/op", setAllocs)
	cycleAllocs := measure(cycle)
	t.Logf("SET NX PX and the release script through the proxy: %.2f allocs/op", cycleAllocs)
	bound, cycleBound := 6.0, 12.0
	if loops > 0 {
		bound, cycleBound = 10, 22
	}
	if setAllocs > bound {
		t.Errorf("SET NX PX through the proxy: %.2f allocs/op, want <= %v", setAllocs, bound)
	}
	if cycleAllocs > cycleBound {
		t.Errorf("SET NX PX and the release script through the proxy: %.2f allocs/op, want <= %v", cycleAllocs, cycleBound)
	}
}

func TestLower(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"SET", "set"}, {"nX", "nx"}, {"Px", "px"}, {"REDLOCK.LOCK", "redlock.lock"},
		{"Unknown", "unknown"}, {"", ""}, {"A-VERY-LONG-COMMAND-NAME", "a-very-long-command-name"},
		{"\xffSET", "\xffset"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			if got := respserver.Lower([]byte(tc.in)); got != tc.want {
				t.Errorf("Lower(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
	for _, w := range []string{"SET", "nx", "PX", "evalsha", "CLIENT", "SetName"} {
		b := []byte(w)
		if n := testing.AllocsPerRun(100, func() { respserver.Lower(b) }); n != 0 {
			t.Errorf("Lower(%q): %.0f allocs, want 0", w, n)
		}
	}
}
