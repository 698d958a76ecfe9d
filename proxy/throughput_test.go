package proxy

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
)

// TestThroughput measures, in one run on the same 5 masters, redis-benchmark
// acquisitions through the proxy and the embedded engine's acquire-only
// rate at the same concurrency (50 clients x 16 pipelined = 800 in flight,
// 100,000 keys, TTL 30s, value "v"), alternating 3 rounds with the masters
// flushed before each phase. It only runs with REDLOCK_PROXY_BENCH=1:
//
//	REDLOCK_PROXY_BENCH=1 go test -run TestThroughput -v -count=1 ./proxy
func TestThroughput(t *testing.T) {
	if os.Getenv("REDLOCK_PROXY_BENCH") != "1" {
		t.Skip("set REDLOCK_PROXY_BENCH=1")
	}
	requirePeer(t, "redis-benchmark", haveCmd("redis-benchmark"))
	const n = 300000
	set := mastertest.Start(t, 5)
	srv, err := New(Config{EngineConfig: engine.Config{FreshMasters: true, Addrs: set.Addrs()}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go srv.Serve(ln)
	e, err := engine.New(engine.Config{FreshMasters: true, Addrs: set.Addrs()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := srv.Engine().WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	flush := func() {
		for _, a := range set.Addrs() {
			c := redis.NewClient(&redis.Options{Addr: a})
			c.FlushAll(context.Background())
			c.Close()
		}
	}
	args := []string{"-h", "127.0.0.1", "-p", port(ln.Addr().String()), "-P", "16", "-c", "50", "-r", "100000",
		"-n", fmt.Sprint(n), "--csv", "SET", "k:__rand_int__", "v", "NX", "PX", "30000"}
	t.Logf("redis-benchmark %s", strings.Join(args, " "))
	var ratios []float64
	for round := 1; round <= 3; round++ {
		flush()
		before := srv.Engine().Stats()
		out, err := exec.Command("redis-benchmark", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("redis-benchmark: %v\n%s", err, out)
		}
		var rps float64
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Split(line, ","); len(f) > 2 && strings.HasPrefix(f[0], `"SET`) {
				rps, _ = strconv.ParseFloat(strings.Trim(f[1], `"`), 64)
				t.Logf("round %d proxy: %s", round, line)
			}
		}
		st := srv.Engine().Stats()
		t.Logf("round %d proxy: %.0f SET/s (acquired %d, refused %d)", round, rps, st.Acquired-before.Acquired, st.Failed-before.Failed)

		flush()
		var ops, ok atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for range 800 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ops.Add(1) <= n {
					_, err := e.TryLock(context.Background(), "k:"+strconv.Itoa(rand.IntN(100000)), 30*time.Second, engine.WithToken("v"))
					if err == nil {
						ok.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		emb := float64(n) / time.Since(start).Seconds()
		t.Logf("round %d embedded: %.0f TryLock/s (acquired %d), 800 goroutines, GOMAXPROCS=%d", round, emb, ok.Load(), runtime.GOMAXPROCS(0))
		ratios = append(ratios, rps/emb)
		t.Logf("round %d ratio proxy/embedded = %.2f", round, rps/emb)
	}
	slices.Sort(ratios)
	t.Logf("median ratio proxy/embedded = %.2f (min %.2f, max %.2f)", ratios[1], ratios[0], ratios[2])
}
