package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/internal/test/proctest"
	"github.com/redlock-dev/redlock/proxy/internal/respserver"
)

// TestLoopIdleNotWithBytesWaiting: a proxy process that did not run for
// longer than its IdleTimeout (here: stopped, as a starved process is)
// while a client's command arrived answers the command when it runs
// again. The loop's first turn finds the client readable and its idle
// deadline past; it closed the client with the command unread (a client
// of a busy machine got no reply at all: TestLoopIdleTimeoutDropsPendingReplies).
//
// The loop only: the goroutine path's read deadline is Go's, which fails
// a read whose deadline passed even with bytes waiting.
func TestLoopIdleNotWithBytesWaiting(t *testing.T) {
	if !respserver.LoopsSupported {
		t.Skip("no event loop here")
	}
	set := mastertest.Start(t, 1)
	p := proctest.StartProxy(t, nil, set.Addrs(), "--idle-timeout", "2s", "--event-loops", "1")
	nc, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	br := bufio.NewReader(nc)
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := nc.Write([]byte("PING\r\n")); err != nil {
		t.Fatal(err)
	}
	if l, err := br.ReadString('\n'); err != nil || l != "+PONG\r\n" {
		t.Fatalf("PING: %q %v", l, err)
	}
	if err := p.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	cont := func() { p.Cmd.Process.Signal(syscall.SIGCONT) }
	defer cont()
	// Stopped before the command is sent (a 2 s IdleTimeout: the test's
	// own process may be starved between the PONG and here on a busy
	// machine, and the proxy would then rightly find it idle).
	stat := fmt.Sprintf("/proc/%d/stat", p.Cmd.Process.Pid)
	for deadline := time.Now().Add(5 * time.Second); ; {
		if b, err := os.ReadFile(stat); err == nil {
			if f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:])); len(f) > 0 && f[0] == "T" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the proxy did not stop")
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := nc.Write([]byte("ECHO waiting\r\n")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * time.Second) // two IdleTimeouts, the command in the socket
	cont()
	if l, err := br.ReadString('\n'); err != nil || l != "$7\r\n" {
		t.Fatalf("after the proxy ran again: %q %v; want the ECHO's reply", l, err)
	}
}
