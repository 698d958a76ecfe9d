package proxy

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"net"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/proxy/internal/respserver"
)

// TestAllocs bounds the allocations of one SET NX PX through the proxy by
// a client that waits for each reply, counted over the whole process: the
// connection's reader (or event loop), the engine and its master
// connections. The client side (a raw socket, requests rendered before)
// allocates nothing. On goroutines the reader runs the command and writes
// its reply (pool.go): at most 9. On an event loop the command is
// started asynchronously, as a pipelined one (its call, its done channel,
// its callbacks): at most 16 (15 measured, 2026-11-28).
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
	const warm, runs = 200, 1000        // runs: five batches
	reqs := make([][]byte, warm+runs+5) // AllocsPerRun runs once more per batch
	for i := range reqs {
		// As redis-benchmark sends it: upper-case name and options.
		reqs[i] = fmt.Appendf(nil, "*6\r\n$3\r\nSET\r\n$12\r\nallocs:%05d\r\n$1\r\nv\r\n$2\r\nNX\r\n$2\r\nPX\r\n$5\r\n30000\r\n", i)
	}
	next, failed := 0, 0
	var rep [16]byte
	do := func() {
		req := reqs[next]
		next++
		nc.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := nc.Write(req); err != nil {
			failed++
			return
		}
		if _, err := io.ReadFull(nc, rep[:5]); err != nil || !bytes.Equal(rep[:5], []byte("+OK\r\n")) {
			failed++
		}
	}
	for range warm {
		do()
	}
	// AllocsPerRun counts the whole process's allocations: goroutines that
	// earlier tests left running a while (wake-up chains, timers) add
	// theirs (16 against 15 once, after the Redisson tests; issue #43).
	// Their noise only adds: the least of five batches is the request's.
	allocs := math.Inf(1)
	for range 5 {
		allocs = min(allocs, testing.AllocsPerRun(runs/5, do))
	}
	if failed != 0 {
		t.Fatalf("%d of %d SETs failed", failed, next)
	}
	t.Logf("SET NX PX through the proxy: %.2f allocs/op", allocs)
	bound := 9.0
	if loops > 0 {
		bound = 16
	}
	if allocs > bound {
		t.Errorf("SET NX PX through the proxy: %.2f allocs/op, want <= %v", allocs, bound)
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
