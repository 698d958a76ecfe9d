// Command rawfloor measures the latency floor of one lock cycle at
// concurrency 1 on this machine, without redlock's code: a hand-written
// "SET k v NX PX 30000" to 5 local masters waiting for 3 replies, then a
// "DEL k" (cheaper than the release script) waiting for 3. It is the
// yardstick for `redlock bench --concurrency 1` in docs/benchmarks.md.
//
//	go run ./internal/tools/rawfloor                # both modes
//	go run ./internal/tools/rawfloor -mode epoll
//
// Modes:
//   - goroutines: plain net.Conn, one goroutine per master, the way a Go
//     client without pipelining does it (the Go scheduler and netpoller in
//     the path, like the engine's reader and writer goroutines).
//   - epoll (Linux): one thread, raw write(2) to the 5 sockets, then
//     epoll_wait(2) and read(2) until 3 replies; the other 2 replies are
//     drained after the clock stops. No scheduler, no netpoller, no
//     goroutine switch: the floor of the syscalls and the masters alone.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/redlock-dev/redlock/internal/localmaster"
)

const (
	masters = 5
	quorum  = masters/2 + 1
)

func main() {
	mode := flag.String("mode", "all", "goroutines, epoll or all")
	n := flag.Int("n", 20000, "cycles per mode")
	flag.Parse()
	if err := run(*mode, *n); err != nil {
		fmt.Fprintln(os.Stderr, "rawfloor:", err)
		os.Exit(1)
	}
}

func run(mode string, n int) error {
	if n < 100 {
		return fmt.Errorf("-n %d: need at least 100 cycles", n)
	}
	set, err := localmaster.Start(context.Background(), localmaster.Options{N: masters, RequireReal: true})
	if err != nil {
		return err
	}
	defer set.Close()
	modes := map[string]func([]string, int) ([]time.Duration, error){"goroutines": goroutineCycles, "epoll": epollCycles}
	names := []string{mode}
	if mode == "all" {
		names = []string{"goroutines", "epoll"}
	}
	for _, name := range names {
		f, ok := modes[name]
		if !ok {
			return fmt.Errorf("unknown mode %q", name)
		}
		lat, err := f(set.Addrs(), n)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		slices.Sort(lat)
		fmt.Printf("raw cycle, %s (5 masters, quorum 3, concurrency 1): p50 %v p99 %v\n", name,
			lat[len(lat)/2].Round(time.Microsecond), lat[len(lat)*99/100].Round(time.Microsecond))
	}
	return nil
}

func setCmd(k string) []byte {
	return []byte("*6\r\n$3\r\nSET\r\n$" + strconv.Itoa(len(k)) + "\r\n" + k + "\r\n$1\r\nv\r\n$2\r\nNX\r\n$2\r\nPX\r\n$5\r\n30000\r\n")
}

func delCmd(k string) []byte {
	return []byte("*2\r\n$3\r\nDEL\r\n$" + strconv.Itoa(len(k)) + "\r\n" + k + "\r\n")
}

type req struct {
	cmd  []byte
	done chan struct{}
}

// goroutineCycles: one goroutine per master with a blocking net.Conn.
func goroutineCycles(addrs []string, n int) ([]time.Duration, error) {
	var queues []chan req
	defer func() {
		for _, q := range queues {
			close(q)
		}
	}()
	for _, a := range addrs {
		c, err := net.Dial("tcp", a)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		q := make(chan req, 4)
		queues = append(queues, q)
		go func() {
			buf := make([]byte, 512)
			for r := range q {
				c.Write(r.cmd)
				c.Read(buf) // one short reply per command
				r.done <- struct{}{}
			}
		}()
	}
	fan := func(cmd []byte) {
		done := make(chan struct{}, len(queues))
		for _, q := range queues {
			q <- req{cmd, done}
		}
		for range quorum {
			<-done
		}
	}
	lat := make([]time.Duration, 0, n)
	for i := range n {
		k := "k" + strconv.Itoa(i)
		t0 := time.Now()
		fan(setCmd(k))
		fan(delCmd(k))
		lat = append(lat, time.Since(t0))
	}
	return lat, nil
}
