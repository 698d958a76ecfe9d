package proxy

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/internal/test/proctest"
	"github.com/redlock-dev/redlock/resp"
)

// TestMain doubles as a proxy process for TestManyConnections: with
// REDLOCK_PROXY_HELPER set to master addresses it serves until stdin closes.
func TestMain(m *testing.M) {
	if addrs := os.Getenv("REDLOCK_PROXY_HELPER"); addrs != "" {
		os.Exit(helperProxy(strings.Split(addrs, ",")))
	}
	code := m.Run()
	proctest.Cleanup()
	os.Exit(code)
}

func helperProxy(addrs []string) int {
	srv, err := New(Config{EngineConfig: engine.Config{FreshMasters: true, Addrs: addrs, MasterTimeout: time.Second}, MaxClients: 20000})
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	go srv.Serve(ln)
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if _, err := srv.Engine().WaitReady(wctx); err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	fmt.Println("LISTENING", ln.Addr())
	bufio.NewReader(os.Stdin).ReadString('\n')
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	return 0
}

// TestManyConnections opens 10,000 concurrent client connections to a proxy
// in a child process (the file-descriptor limit counts both ends), each
// taking a lock, then checks the proxy still answers. Under -race the
// detector's goroutine limit (8128) caps it at 2,500.
func TestManyConnections(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	n := 10000
	if raceEnabled {
		n = 2500
	}
	set := mastertest.Start(t, 3)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "REDLOCK_PROXY_HELPER="+strings.Join(set.Addrs(), ","))
	p := startPeer(t, cmd)
	addr := p.step("LISTENING")[1]
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	start := time.Now()
	for i := range n {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		conns = append(conns, c)
		c.Write(resp.AppendCommandStrings(nil, "SET", fmt.Sprintf("mc:%d", i), "tok", "NX", "PX", "30000"))
	}
	ok := 0
	for i, c := range conns {
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		r, err := resp.NewReader(c).ReadReply()
		if err != nil {
			t.Fatalf("conn %d: %v", i, err)
		}
		if r.IsOK() {
			ok++
		} else if i-ok < 3 {
			t.Logf("conn %d: %s", i, r)
		}
	}
	t.Logf("%d connections, %d locks in %v", n, ok, time.Since(start))
	if ok < n*99/100 {
		t.Fatalf("only %d/%d acquisitions succeeded", ok, n)
	}
	c := dialRaw(t, addr)
	if got := c.cmd("INFO"); !strings.Contains(got, fmt.Sprintf("connected_clients:%d", n+1)) {
		t.Fatalf("INFO: %.300q", got)
	}
	p.next() // graceful shutdown
}
