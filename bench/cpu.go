package bench

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/internal/members"
	"github.com/redlock-dev/redlock/internal/proccpu"
)

// What a run costs each process it drives, per unit of work: the bench
// process's CPU (getrusage) and read/write syscalls (/proc/self/io), each
// master's CPU (INFO cpu: used_cpu_user + used_cpu_sys, so remote masters
// too), the local masters' syscalls (/proc/<pid>/io) and, with --target
// proxy, the proxy's CPU (its INFO cpu). On a host whose cores the client,
// the masters and the proxy share, these say how many cores a lock rate
// needs where throughput ratios only measure the box.

// processCPU returns the CPU time (user + system) this process used so far,
// or 0 where the system does not say (internal/proccpu).
func processCPU() time.Duration {
	t, _ := proccpu.Self()
	return t.Total()
}

// procSyscalls returns the read and write syscalls process pid ("self":
// this one) made so far, from /proc/<pid>/io; ok false where it cannot be
// read (not Linux, another user's process).
func procSyscalls(pid string) (n uint64, ok bool) {
	b, err := os.ReadFile("/proc/" + pid + "/io")
	if err != nil {
		return 0, false
	}
	found := 0
	for _, line := range bytes.Split(b, []byte("\n")) {
		for _, f := range []string{"syscr: ", "syscw: "} {
			if v, cut := bytes.CutPrefix(line, []byte(f)); cut {
				x, err := strconv.ParseUint(string(v), 10, 64)
				if err != nil {
					return 0, false
				}
				n += x
				found++
			}
		}
	}
	return n, found == 2
}

// serverCPU reads INFO cpu from addr: used_cpu_user + used_cpu_sys.
func serverCPU(ctx context.Context, addr string, cc conn.Config) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := conn.Dial(ctx, addr, cc)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	r, err := c.Exec(ctx, "INFO", "cpu")
	if err != nil {
		return 0, err
	}
	if r.IsError() {
		return 0, fmt.Errorf("INFO cpu: %s", r.Text())
	}
	var total time.Duration
	found := 0
	for _, line := range strings.Split(r.Text(), "\r\n") {
		for _, f := range []string{"used_cpu_user:", "used_cpu_sys:"} {
			if v, cut := strings.CutPrefix(line, f); cut {
				s, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return 0, fmt.Errorf("INFO cpu: %q", line)
				}
				total += time.Duration(s * float64(time.Second))
				found++
			}
		}
	}
	if found != 2 {
		return 0, fmt.Errorf("INFO cpu from %s has no used_cpu_user/used_cpu_sys", addr)
	}
	return total, nil
}

// cpuNodes returns the servers whose CPU the masters' figure sums: each
// standalone master, and every node of each cluster member (CLUSTER NODES
// from its first seed that answers; its seeds if none does). A node's
// INFO cpu counts all its work, replicas included.
func cpuNodes(ctx context.Context, list []string, cc conn.Config) []string {
	addrs, clusters, err := members.Parse(list)
	if err != nil {
		return list // refused before the run, with the reason
	}
	out := addrs
	for _, m := range clusters {
		nodes := clusterNodes(ctx, m.Seeds, cc)
		if len(nodes) == 0 {
			nodes = m.Seeds
		}
		out = append(out, nodes...)
	}
	return out
}

// clusterNodes asks the first seed that answers for its cluster's nodes.
func clusterNodes(ctx context.Context, seeds []string, cc conn.Config) []string {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	for _, seed := range seeds {
		c, err := conn.Dial(ctx, seed, cc)
		if err != nil {
			continue
		}
		r, err := c.Exec(ctx, "CLUSTER", "NODES")
		c.Close()
		if err != nil {
			continue
		}
		var nodes []string
		for _, line := range strings.Split(r.Text(), "\n") {
			// <id> <ip:port@cport[,hostname]> <flags> …
			f := strings.Fields(line)
			if len(f) < 3 || strings.Contains(f[2], "fail") || strings.Contains(f[2], "noaddr") {
				continue
			}
			addr, _, _ := strings.Cut(f[1], "@")
			if host, port, err := net.SplitHostPort(addr); err == nil && port != "0" {
				nodes = append(nodes, net.JoinHostPort(host, port))
			}
		}
		if len(nodes) > 0 {
			return nodes
		}
	}
	return nil
}

// probe reads the per-process counters of one phase: masters (INFO cpu),
// local masters' pids (syscalls), the proxy (INFO cpu).
type probe struct {
	masters []string
	pids    []int
	proxy   string
	cc      conn.Config
}

// sample is one reading of every process's counters; a negative value is
// one that could not be read.
type sample struct {
	clientSys int64
	masterCPU time.Duration
	masterSys int64
	proxyCPU  time.Duration
}

func (p *probe) read(ctx context.Context) sample {
	var s sample
	s.clientSys = -1
	if n, ok := procSyscalls("self"); ok {
		s.clientSys = int64(n)
	}
	if p == nil {
		s.masterCPU, s.masterSys, s.proxyCPU = -1, -1, -1
		return s
	}
	for _, a := range p.masters {
		d, err := serverCPU(ctx, a, p.cc)
		if err != nil {
			s.masterCPU = -1
			break
		}
		s.masterCPU += d
	}
	if len(p.masters) == 0 {
		s.masterCPU = -1
	}
	s.masterSys = -1
	if len(p.pids) > 0 {
		s.masterSys = 0
		for _, pid := range p.pids {
			n, ok := procSyscalls(strconv.Itoa(pid))
			if !ok || pid <= 0 {
				s.masterSys = -1
				break
			}
			s.masterSys += int64(n)
		}
	}
	s.proxyCPU = -1
	if p.proxy != "" {
		if d, err := serverCPU(ctx, p.proxy, conn.Config{}); err == nil {
			s.proxyCPU = d
		}
	}
	return s
}

// minus returns the counts from start to s (unknown where either is).
func (s sample) minus(start sample) sample {
	d := func(a, b int64) int64 {
		if a < 0 || b < 0 {
			return -1
		}
		return a - b
	}
	return sample{clientSys: d(s.clientSys, start.clientSys), masterCPU: time.Duration(d(int64(s.masterCPU), int64(start.masterCPU))),
		masterSys: d(s.masterSys, start.masterSys), proxyCPU: time.Duration(d(int64(s.proxyCPU), int64(start.proxyCPU)))}
}

// plus adds two windows' counts (unknown where either is).
func (s sample) plus(o sample) sample {
	a := func(x, y int64) int64 {
		if x < 0 || y < 0 {
			return -1
		}
		return x + y
	}
	return sample{clientSys: a(s.clientSys, o.clientSys), masterCPU: time.Duration(a(int64(s.masterCPU), int64(o.masterCPU))),
		masterSys: a(s.masterSys, o.masterSys), proxyCPU: time.Duration(a(int64(s.proxyCPU), int64(o.proxyCPU)))}
}

// perCycle sets p's per-process figures from its window's counts.
func (p *Phase) perCycle() {
	if p.cycles == 0 {
		return
	}
	n, d := float64(p.cycles), p.procs
	round := func(v float64) float64 { return math.Round(v*100) / 100 }
	if d.clientSys >= 0 {
		p.ClientSyscallsPerCycle = round(float64(d.clientSys) / n)
	}
	if d.masterCPU >= 0 {
		p.MasterCPUPerCycle = round(float64(d.masterCPU.Microseconds()) / n)
	}
	if d.masterSys >= 0 {
		p.MasterSyscallsPerCycle = round(float64(d.masterSys) / n)
	}
	if d.proxyCPU >= 0 {
		p.ProxyCPUPerCycle = round(float64(d.proxyCPU.Microseconds()) / n)
	}
}
