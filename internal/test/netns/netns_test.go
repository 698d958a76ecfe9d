package netns_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/localmaster"
	"github.com/redlock-dev/redlock/internal/test/netns"
)

// echo serves ln: every line read is written back.
func echo(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			io.Copy(c, c)
		}()
	}
}

// roundTrip writes a line to c and reads it back within d.
func roundTrip(c net.Conn, r *bufio.Reader, line string, d time.Duration) error {
	c.SetDeadline(time.Now().Add(d))
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return err
	}
	got, err := r.ReadString('\n')
	if err == nil && got != line+"\n" {
		err = errors.New("echoed " + strconv.Quote(got))
	}
	return err
}

// isTimeout reports whether err is a timeout (silence), not a refusal or
// an unreachable network.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() && !errors.Is(err, syscall.ECONNREFUSED) &&
		!errors.Is(err, syscall.ENETUNREACH) && !errors.Is(err, syscall.EHOSTUNREACH) && !errors.Is(err, syscall.ECONNRESET)
}

// TestLinkDownBlackHoles: a cut link drops packets — a new dial hangs
// until its timeout instead of being refused, an established connection
// hears nothing — and LinkUp restores both, the established connection
// included (TCP retransmits what the cut dropped).
func TestLinkDownBlackHoles(t *testing.T) {
	n := netns.New(t)
	ep := n.Add()
	ln, err := ep.Listen("tcp", net.JoinHostPort(ep.Addr().String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go echo(ln)
	addr := ln.Addr().String()
	if !strings.HasPrefix(addr, "127.") {
		t.Fatalf("endpoint address %s is not a loopback address", addr)
	}
	ctx := context.Background()
	dial := func(d time.Duration) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		return n.DialContext(ctx, "tcp", addr)
	}
	est, err := dial(time.Second)
	if err != nil {
		t.Fatalf("dial before the cut: %v", err)
	}
	defer est.Close()
	r := bufio.NewReader(est)
	if err := roundTrip(est, r, "before", time.Second); err != nil {
		t.Fatalf("round trip before the cut: %v", err)
	}

	// The host's own namespace has no way to the endpoint: the same
	// address there is the host's loopback (nothing leaves the host).
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Logf("%s answered in the host's namespace (another listener on the host's loopback)", addr)
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial %s from the host's namespace: %v, want connection refused (its own loopback)", addr, err)
	}

	if err := ep.LinkDown(); err != nil {
		t.Fatal(err)
	}
	if !ep.Down() {
		t.Error("Down() = false after LinkDown")
	}
	const wait = 300 * time.Millisecond
	start := time.Now()
	c, err := dial(wait)
	if err == nil {
		c.Close()
		t.Fatal("dial through a cut link connected")
	}
	if took := time.Since(start); !isTimeout(err) || took < wait-20*time.Millisecond {
		t.Fatalf("dial through a cut link: %v after %v; want a timeout after %v (dropped, not refused)", err, took, wait)
	}
	if err := roundTrip(est, r, "during", wait); !isTimeout(err) {
		t.Fatalf("round trip on an established connection through a cut link: %v; want a timeout (silence)", err)
	}

	if err := n.Heal(); err != nil {
		t.Fatal(err)
	}
	if ep.Down() {
		t.Error("Down() = true after Heal")
	}
	c, err = dial(time.Second)
	if err != nil {
		t.Fatalf("dial after Heal: %v", err)
	}
	cr := bufio.NewReader(c)
	if err := roundTrip(c, cr, "after", time.Second); err != nil {
		t.Fatalf("round trip on a new connection after Heal: %v", err)
	}
	c.Close()
	// The line written during the cut is retransmitted, then echoed.
	est.SetDeadline(time.Now().Add(5 * time.Second))
	if got, err := r.ReadString('\n'); err != nil || got != "during\n" {
		t.Fatalf("established connection after Heal: %q, %v; want the line sent during the cut", got, err)
	}
	if err := roundTrip(est, r, "healed", time.Second); err != nil {
		t.Fatalf("round trip on the established connection after Heal: %v", err)
	}
}

// TestMastersCut: redis-server masters in endpoints answer through
// DialContext; a cut master is silent while the others answer, and
// answers again after Heal.
func TestMastersCut(t *testing.T) {
	m := netns.StartMasters(t, localmaster.Options{N: 3})
	ping := func(i int, d time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		c, err := m.DialContext(ctx, "tcp", m.Addrs()[i])
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(d))
		io.WriteString(c, "PING\r\n")
		line, err := bufio.NewReader(c).ReadString('\n')
		if err == nil && line != "+PONG\r\n" {
			err = errors.New("PING: " + strconv.Quote(line))
		}
		return err
	}
	for i, a := range m.Addrs() {
		if want := m.Links[i].Addr().String(); !strings.HasPrefix(a, want+":") {
			t.Errorf("master %d listens on %s, want its endpoint's %s", i, a, want)
		}
		if err := ping(i, time.Second); err != nil {
			t.Fatalf("master %d: %v", i, err)
		}
	}
	if err := m.Cut(0); err != nil {
		t.Fatal(err)
	}
	if err := ping(0, 200*time.Millisecond); !isTimeout(err) {
		t.Errorf("cut master 0: %v; want a timeout", err)
	}
	for _, i := range []int{1, 2} {
		if err := ping(i, time.Second); err != nil {
			t.Errorf("master %d with master 0 cut: %v", i, err)
		}
	}
	if err := m.Heal(); err != nil {
		t.Fatal(err)
	}
	if err := ping(0, time.Second); err != nil {
		t.Errorf("master 0 after Heal: %v", err)
	}
	if !m.Masters()[0].Running() {
		t.Error("master 0 stopped running")
	}
}

// TestCleanup: a Net's namespaces are gone when its test ends, and a
// namespace that a dead redlock process left behind is deleted by the
// sweep of the next process's first Available (run here in a child
// process: this one's has run already).
func TestCleanup(t *testing.T) {
	netns.Require(t)
	list := func() []string {
		out, err := exec.Command("ip", "netns", "list").Output()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, line := range strings.Split(string(out), "\n") {
			name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
			names = append(names, name)
		}
		return names
	}
	var names []string
	t.Run("net", func(t *testing.T) {
		n := netns.New(t)
		names = append(names, n.Add().Name(), n.Add().Name())
	})
	for _, name := range names {
		if slices.Contains(list(), name) {
			t.Errorf("namespace %s outlived its test", name)
		}
	}

	// A pid above pid_max belongs to no process, ever.
	b, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		t.Fatal(err)
	}
	max, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	dead := "redlock-" + strconv.Itoa(max+1) + "-1"
	if out, err := exec.Command("ip", "netns", "add", dead).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", dead, err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", dead).Run() })
	child := exec.Command(os.Args[0], "-test.run=^TestSweepChild$", "-test.count=1")
	child.Env = append(os.Environ(), "NETNS_SWEEP_CHILD=1")
	if out, err := child.CombinedOutput(); err != nil {
		t.Fatalf("child: %v: %s", err, out)
	}
	if slices.Contains(list(), dead) {
		t.Errorf("the leftover namespace %s survived the next process's sweep", dead)
	}
}

// TestSweepChild is TestCleanup's child process.
func TestSweepChild(t *testing.T) {
	if os.Getenv("NETNS_SWEEP_CHILD") != "1" {
		t.Skip("TestCleanup's child process")
	}
	if err := netns.Available(); err != nil {
		t.Fatal(err)
	}
}
