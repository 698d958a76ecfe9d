package proxy

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/internal/test/proctest"
	"github.com/redlock-dev/redlock/resp"
)

// The tests in this file run `redlock proxy` as its own process, built
// from this tree without the race detector, so that "the process is
// alive", its CPU time and its RSS are the real program's.

// proxyProc is a running `redlock proxy` (internal/test/proctest), with what
// these tests read of it.
type proxyProc struct {
	*proctest.Proxy
	t *testing.T
}

func startProxyProc(t *testing.T, env []string, masters []string, flags ...string) *proxyProc {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	return &proxyProc{Proxy: proctest.StartProxy(t, env, masters, flags...), t: t}
}

// cpuTicks returns the process's user+system CPU time in clock ticks.
func (p *proxyProc) cpuTicks() int64 {
	p.t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Cmd.Process.Pid))
	if err != nil {
		p.t.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	// After the command name: state is field 3, utime 14, stime 15.
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s
}

// rssBytes returns the process's resident set size.
func (p *proxyProc) rssBytes() int64 {
	p.t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Cmd.Process.Pid))
	if err != nil {
		p.t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	p.t.Fatal("no VmRSS")
	return 0
}

// ping checks that a new connection gets PONG.
func (p *proxyProc) ping() {
	p.t.Helper()
	if !p.Alive() {
		p.t.Fatalf("redlock proxy exited: %v\n%s", p.Cmd.ProcessState, p.Stderr())
	}
	c := dialRaw(p.t, p.Addr)
	if got := c.cmd("PING"); got != "+PONG\r\n" {
		p.t.Fatalf("a new connection got %q, want +PONG\n%s", got, p.Stderr())
	}
	c.nc.Close()
}

// firstReply reads one reply within d: "" when none came (timeout or close).
func firstReply(c *rawConn, d time.Duration) string {
	c.nc.SetReadDeadline(time.Now().Add(d))
	r, err := c.rd.ReadReply()
	if err != nil {
		return ""
	}
	return string(resp.AppendReply(nil, r))
}

// TestHostileInput sends what an attacker would to a real `redlock proxy`
// (the 24-byte crash and the 2^63-element spin of redcon's reader among
// them). After each input: the process is alive, a new connection gets
// PONG, and the process uses no CPU while it sits idle for a second with
// the hostile connection still open.
func TestHostileInput(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	set := mastertest.Start(t, 3)
	const noReply = ""
	mib := strings.Repeat("A", 1<<20)
	cases := []struct {
		name, in string
		oneByte  bool
		want     string // prefix of the first reply; noReply: none within 300ms
	}{
		{"24-byte crash: bulk length 2^63-1", "*1\r\n$9223372036854775807\r\n", false, "-ERR Protocol error: invalid bulk length"},
		{"spin: array length 2^63-1", "*9223372036854775807\r\n", false, "-ERR Protocol error: invalid multibulk length"},
		{"overflowing array length", "*99999999999999999999\r\n", false, "-ERR Protocol error: invalid multibulk length"},
		{"overflowing bulk length", "*1\r\n$18446744073709551616\r\n", false, "-ERR Protocol error: invalid bulk length"},
		{"negative array length is ignored", "*-5\r\nPING\r\n", false, "+PONG"},
		{"negative bulk length", "*1\r\n$-5\r\n", false, "-ERR Protocol error: invalid bulk length"},
		{"million-element array header", "*1000000\r\n", false, "-ERR Protocol error: invalid multibulk length"},
		{"more args than max-args", "*2000\r\n", false, "-ERR Protocol error: invalid multibulk length"},
		{"bulk over max-request-bytes", "*2\r\n$4\r\nECHO\r\n$2000000\r\n" + strings.Repeat("x", 100), false, "-ERR Protocol error: invalid bulk length"},
		{"wrong type byte", "*1\r\n:1\r\n", false, "-ERR Protocol error: expected '$'"},
		{"RESP3 map as a request", "%1\r\n", false, "-ERR unknown or unsupported command '%1'"},
		{"CR without LF in a header", "*1\r$4\r\nPING\r\n", false, "-ERR Protocol error: invalid multibulk length"},
		{"unterminated request", "*2\r\n$3\r\nGET\r\n$1\r\n", false, noReply},
		{"1 MiB inline line", mib, false, "-ERR Protocol error: too big inline request"},
		{"NUL bytes inline", "\x00\x00\x00\r\n", false, "-ERR unknown or unsupported command '???'"},
		{"NUL bytes in a bulk", "*1\r\n$3\r\n\x00\x00\x00\r\n", false, "-ERR unknown or unsupported command '???'"},
		{"valid request one byte at a time", string(resp.AppendCommandStrings(nil, "SET", "h:1", "tok", "NX", "PX", "10000")), true, "+OK"},
		{"inline request one byte at a time", "SET h:2 tok NX PX 10000\r\n", true, "+OK"},
	}
	p := startProxyProc(t, nil, set.Addrs())
	p.ping()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, p.Addr)
			if tc.oneByte {
				for i := range len(tc.in) {
					c.send(tc.in[i : i+1])
					time.Sleep(time.Millisecond)
				}
			} else {
				c.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
				c.nc.Write([]byte(tc.in)) // may fail once the proxy closed the connection
			}
			wait := 5 * time.Second
			if tc.want == noReply {
				wait = 300 * time.Millisecond
			}
			if got := firstReply(c, wait); !strings.HasPrefix(got, tc.want) || (tc.want == noReply && got != "") {
				t.Fatalf("first reply %q, want prefix %q", got, tc.want)
			}
			p.ping()
			before := p.cpuTicks()
			time.Sleep(time.Second) // the hostile connection stays open
			if used := p.cpuTicks() - before; used > 5 {
				t.Fatalf("idle for 1s after this input, the proxy used %d clock ticks of CPU (a spinning connection?)", used)
			}
			p.ping()
		})
	}
}

// TestHostileInputBeforeAuth: with a password (from the environment, so it
// is not in the process list), requests are bounded as Redis bounds
// unauthenticated ones, and a client guessing passwords is cut off.
func TestHostileInputBeforeAuth(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	set := mastertest.Start(t, 3)
	p := startProxyProc(t, []string{"REDLOCK_PROXY_PASSWORD=s3cret-pw"}, set.Addrs())
	if cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.Cmd.Process.Pid)); bytes.Contains(cmdline, []byte("s3cret")) {
		t.Fatalf("the password shows in the process list: %q", cmdline)
	}
	for _, tc := range []struct{ name, in, want string }{
		{"11 args before AUTH", "*11\r\n", "-ERR Protocol error: unauthenticated multibulk length"},
		{"17 KiB bulk before AUTH", "*2\r\n$4\r\nAUTH\r\n$17408\r\n", "-ERR Protocol error: unauthenticated bulk length"},
		{"command before AUTH", "PING\r\n", "-NOAUTH"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, p.Addr)
			c.send(tc.in)
			if got := firstReply(c, 5*time.Second); !strings.HasPrefix(got, tc.want) {
				t.Fatalf("got %q, want prefix %q", got, tc.want)
			}
		})
	}
	t.Run("wrong passwords close the connection", func(t *testing.T) {
		c := dialRaw(t, p.Addr)
		for i := 1; i <= DefaultMaxAuthFailures; i++ {
			if got := c.cmd("AUTH", fmt.Sprint("guess", i)); !strings.HasPrefix(got, "-WRONGPASS") {
				t.Fatalf("guess %d: %q", i, got)
			}
		}
		if got := firstReply(c, 2*time.Second); got != "" {
			t.Fatalf("after %d wrong passwords the connection still answers: %q", DefaultMaxAuthFailures, got)
		}
	})
	c := dialRaw(t, p.Addr)
	for _, step := range [][2]string{{"AUTH s3cret-pw", "+OK"}, {"SET a:1 tok NX PX 10000", "+OK"}, {"INFO proxy", "$"}} {
		if got := c.cmd(strings.Fields(step[0])...); !strings.HasPrefix(got, step[1]) {
			t.Fatalf("%s: %q", step[0], got)
		}
	}
	if strings.Contains(p.Stderr(), "s3cret") {
		t.Fatalf("the password was logged:\n%s", p.Stderr())
	}
}

// TestMemoryBound: 1,000 connections each send most of a 512 KiB request
// and stall, then 100 clients pipeline 10,000 commands each without reading
// a reply. The proxy's RSS stays under 512 MiB and it keeps serving.
func TestMemoryBound(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	set := mastertest.Start(t, 3)
	p := startProxyProc(t, nil, set.Addrs())
	p.ping()
	const stallers, pipeliners, perPipeline = 1000, 100, 10000
	partial := append(resp.AppendCommandStrings(nil, "ECHO"), "$524288\r\n"...)
	partial[1] = '2' // *2: ECHO and the 512 KiB argument
	partial = append(partial, strings.Repeat("x", 512<<10-1)...)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	var wg sync.WaitGroup
	var mu sync.Mutex
	for range stallers {
		nc, err := net.DialTimeout("tcp", p.Addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, nc)
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
			nc.Write(partial)
		}()
	}
	wg.Wait()
	var pipe []byte
	for i := range perPipeline {
		pipe = append(pipe, resp.AppendCommandStrings(nil, "ECHO", fmt.Sprintf("%04d%s", i, strings.Repeat("e", 1020)))...)
	}
	for range pipeliners {
		nc, err := net.DialTimeout("tcp", p.Addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		conns = append(conns, nc)
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc.SetWriteDeadline(time.Now().Add(3 * time.Second))
			nc.Write(pipe) // blocks once the proxy stops reading: backpressure
		}()
	}
	wg.Wait()
	time.Sleep(500 * time.Millisecond)
	rss := p.rssBytes()
	c := dialRaw(t, p.Addr)
	info := c.cmd("INFO", "clients")
	t.Logf("RSS %.1f MiB with %d stalled 512 KiB requests and %d clients pipelining %d commands unread (%s)",
		float64(rss)/(1<<20), stallers, pipeliners, perPipeline, strings.Join(strings.Fields(strings.ReplaceAll(info, "\r\n", " "))[3:], " "))
	if rss >= 512<<20 {
		t.Fatalf("RSS %d MiB, want < 512 MiB", rss>>20)
	}
	if got := c.cmd("SET", "mem:1", "tok", "NX", "PX", "10000"); got != "+OK\r\n" {
		t.Fatalf("a new client during the load: %q", got)
	}
	p.ping()
}
