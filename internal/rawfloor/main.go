// Command rawfloor measures the latency floor of one lock cycle at
// concurrency 1 on this machine, without redlock's code: plain net.Conn,
// one goroutine per master, a hand-written "SET k v NX PX 30000" to 5 local
// masters waiting for 3 replies, then a "DEL k" (cheaper than the release
// script) waiting for 3. It is the yardstick for `redlock bench
// --concurrency 1` in docs/benchmarks.md.
//
//	go run ./internal/rawfloor
package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"time"

	"github.com/redlock-dev/redlock/internal/localmaster"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "rawfloor:", err)
		os.Exit(1)
	}
}

type req struct {
	cmd  []byte
	done chan struct{}
}

func run() error {
	set, err := localmaster.Start(context.Background(), localmaster.Options{N: 5, RequireReal: true})
	if err != nil {
		return err
	}
	defer set.Close()
	var queues []chan req
	for _, a := range set.Addrs() {
		c, err := net.Dial("tcp", a)
		if err != nil {
			return err
		}
		defer c.Close()
		rd := bufio.NewReader(c)
		q := make(chan req, 4)
		queues = append(queues, q)
		go func() {
			for r := range q {
				c.Write(r.cmd)
				rd.ReadSlice('\n')
				r.done <- struct{}{}
			}
		}()
	}
	defer func() {
		for _, q := range queues {
			close(q)
		}
	}()
	fan := func(cmd []byte) {
		done := make(chan struct{}, len(queues))
		for _, q := range queues {
			q <- req{cmd, done}
		}
		for range len(queues)/2 + 1 {
			<-done
		}
	}
	const n = 30000
	lat := make([]time.Duration, 0, n)
	for i := range n {
		k := "k" + strconv.Itoa(i)
		t0 := time.Now()
		fan([]byte("*6\r\n$3\r\nSET\r\n$" + strconv.Itoa(len(k)) + "\r\n" + k + "\r\n$1\r\nv\r\n$2\r\nNX\r\n$2\r\nPX\r\n$5\r\n30000\r\n"))
		fan([]byte("*2\r\n$3\r\nDEL\r\n$" + strconv.Itoa(len(k)) + "\r\n" + k + "\r\n"))
		lat = append(lat, time.Since(t0))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	fmt.Printf("raw cycle (5 masters, quorum 3, concurrency 1): p50 %v p99 %v\n",
		lat[n/2].Round(time.Microsecond), lat[n*99/100].Round(time.Microsecond))
	return nil
}
