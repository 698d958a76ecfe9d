//go:build linux

package netns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// RequireEnv is the environment variable that, set to "1", turns a skip
// for want of network namespaces into a failure.
const RequireEnv = "REDLOCK_REQUIRE_NETNS"

// namePrefix starts every namespace name: redlock-<pid>-<n>.
const namePrefix = "redlock-"

// maxEndpoints is how many /30 links fit in 127.200.0.0/16.
const maxEndpoints = 1 << 14

var (
	seq       atomic.Uint64 // namespace names of this process
	availOnce sync.Once
	availErr  error
)

// Available reports why this process cannot make network namespaces (not
// Linux, not root, no ip, or ip netns refused), or nil. The first call
// also deletes the namespaces dead processes left behind (see the package
// doc).
func Available() error {
	availOnce.Do(func() {
		if os.Geteuid() != 0 {
			availErr = errors.New("network namespaces need root")
			return
		}
		if _, err := exec.LookPath("ip"); err != nil {
			availErr = fmt.Errorf("iproute2's ip not found: %w", err)
			return
		}
		sweep()
		probe := newName()
		if err := ip("netns", "add", probe); err != nil {
			availErr = err
			return
		}
		availErr = ip("netns", "del", probe)
	})
	return availErr
}

// Require skips t when network namespaces are not available, or fails it
// when REDLOCK_REQUIRE_NETNS is "1".
func Require(t testing.TB) {
	t.Helper()
	if err := Available(); err != nil {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("netns: %v (%s=1)", err, RequireEnv)
		}
		t.Skipf("netns: %v", err)
	}
}

// Net is a client namespace and the endpoints linked to it (see the
// package doc). Its methods are safe for concurrent use.
type Net struct {
	t      testing.TB
	client *nsHandle

	mu    sync.Mutex
	eps   []*Endpoint // guarded by mu
	views int         // views made by AddView; guarded by mu
}

// New makes a Net for t (after [Require]) and removes it when t ends.
func New(t testing.TB) *Net {
	t.Helper()
	Require(t)
	name := newName()
	h, err := addNS(name)
	if err != nil {
		t.Fatalf("netns: %v", err)
	}
	n := &Net{t: t, client: h}
	t.Cleanup(n.close)
	// lo stays down: with no local 127.0.0.0/8 route, loopback addresses
	// route over the links.
	if err := h.do(setLocalnet); err != nil {
		t.Fatalf("netns: %s: %v", name, err)
	}
	return n
}

// Add links a new endpoint namespace to n. It fails the test on error.
func (n *Net) Add() *Endpoint {
	n.t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	k := len(n.eps)
	if k >= maxEndpoints {
		n.t.Fatalf("netns: more than %d endpoints", maxEndpoints)
	}
	base := netip.AddrFrom4([4]byte{127, 200, byte(k >> 6), byte(k << 2)})
	ep := &Endpoint{
		n:       n,
		clientA: base.Next(), addr: base.Next().Next(),
		clientDev: "c" + strconv.Itoa(k), dev: "veth0",
		clientMAC: fmt.Sprintf("02:72:6c:%02x:%02x:01", k>>8, k&0xff),
		mac:       fmt.Sprintf("02:72:6c:%02x:%02x:02", k>>8, k&0xff),
	}
	h, err := addNS(newName())
	if err != nil {
		n.t.Fatalf("netns: %v", err)
	}
	ep.h = h
	n.eps = append(n.eps, ep) // removed by close from now on
	if err := ep.setup(); err != nil {
		n.t.Fatalf("netns: endpoint %s: %v", h.name, err)
	}
	return ep
}

func (ep *Endpoint) setup() error {
	c, e := ep.n.client.name, ep.h.name
	steps := [][]string{
		{"-n", c, "link", "add", ep.clientDev, "address", ep.clientMAC, "type", "veth",
			"peer", "name", ep.dev, "address", ep.mac, "netns", e},
		// No IPv6 link-local addresses: the links stay silent but for the test's traffic.
		{"-n", c, "link", "set", "dev", ep.clientDev, "addrgenmode", "none"},
		{"-n", e, "link", "set", "dev", ep.dev, "addrgenmode", "none"},
		{"-n", c, "addr", "add", ep.clientA.String() + "/30", "dev", ep.clientDev},
		{"-n", e, "addr", "add", ep.addr.String() + "/30", "dev", ep.dev},
		{"-n", c, "link", "set", "dev", ep.clientDev, "up"},
		// Permanent neighbour entries: no ARP, and while the endpoint's end
		// is down the client's packets are dropped on the link instead of
		// failing neighbour resolution (which would report "no route to host").
		{"-n", c, "neigh", "replace", ep.addr.String(), "lladdr", ep.mac, "dev", ep.clientDev, "nud", "permanent"},
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			return err
		}
	}
	if err := ep.h.do(setLocalnet); err != nil {
		return err
	}
	return ep.LinkUp()
}

// Endpoints returns n's endpoints in the order Add made them.
func (n *Net) Endpoints() []*Endpoint {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]*Endpoint(nil), n.eps...)
}

// Heal brings every link of n up.
func (n *Net) Heal() error {
	var errs []error
	for _, ep := range n.Endpoints() {
		errs = append(errs, ep.LinkUp())
	}
	return errors.Join(errs...)
}

// DialContext dials addr (an endpoint's address) from the client
// namespace, as [net.Dialer.DialContext] does from the host's: a
// conn.Config.Dialer and a go-redis Options.Dialer.
func (n *Net) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := n.client.do(func() error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// close removes n's namespaces, killing what still runs inside them.
func (n *Net) close() {
	n.mu.Lock()
	eps := n.eps
	n.mu.Unlock()
	var errs []error
	for _, ep := range eps {
		errs = append(errs, ep.h.remove())
	}
	errs = append(errs, n.client.remove())
	if err := errors.Join(errs...); err != nil {
		n.t.Errorf("netns: cleanup: %v", err)
	}
}

// Endpoint is a namespace linked to its Net's client namespace by a veth
// pair.
type Endpoint struct {
	n              *Net
	h              *nsHandle
	clientA, addr  netip.Addr
	clientDev, dev string // the veth's ends: in the client namespace, in the endpoint's
	clientMAC, mac string
	mu             sync.Mutex // serialises LinkDown and LinkUp
	down           atomic.Bool
}

// Name returns the endpoint's namespace name (for ip netns exec).
func (ep *Endpoint) Name() string { return ep.h.name }

// Addr returns the endpoint's address on its link.
func (ep *Endpoint) Addr() netip.Addr { return ep.addr }

// Down reports whether the link is cut (LinkDown without LinkUp since).
func (ep *Endpoint) Down() bool { return ep.down.Load() }

// LinkDown cuts the endpoint's link: packets either way are dropped
// (a partition; see the package doc). Processes inside keep running.
func (ep *Endpoint) LinkDown() error {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if err := ip("-n", ep.h.name, "link", "set", "dev", ep.dev, "down"); err != nil {
		return err
	}
	ep.down.Store(true)
	return nil
}

// LinkUp restores the endpoint's link.
func (ep *Endpoint) LinkUp() error {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if err := ip("-n", ep.h.name, "link", "set", "dev", ep.dev, "up"); err != nil {
		return err
	}
	// Setting the device down flushed even permanent neighbour entries.
	if err := ip("-n", ep.h.name, "neigh", "replace", ep.clientA.String(), "lladdr", ep.clientMAC, "dev", ep.dev, "nud", "permanent"); err != nil {
		return err
	}
	// The kernel activates the link's queue asynchronously (linkwatch,
	// up to a second later, more on a busy machine), dropping packets
	// until then: wait for the link to be operationally up.
	if err := waitOperUp(ep.h.name, ep.dev); err != nil {
		return err
	}
	ep.down.Store(false)
	return nil
}

// linkUpWait bounds waitOperUp.
const linkUpWait = 10 * time.Second

// waitOperUp waits until dev in namespace ns reports state UP.
func waitOperUp(ns, dev string) error {
	deadline := time.Now().Add(linkUpWait)
	for {
		out, err := exec.Command("ip", "-n", ns, "-o", "link", "show", "dev", dev).CombinedOutput()
		if err == nil && bytes.Contains(out, []byte(" state UP ")) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ip -n %s link show dev %s: not up %v after link set up: %s", ns, dev, linkUpWait, bytes.TrimSpace(out))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Command returns a command that runs name with args inside the
// endpoint's namespace (ip netns exec, which execs it: the process is
// name's own).
func (ep *Endpoint) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", ep.h.name, name}, args...)...)
}

// Listen listens on address (an endpoint address and a port) inside the
// endpoint's namespace; the listener works from any goroutine.
func (ep *Endpoint) Listen(network, address string) (net.Listener, error) {
	var ln net.Listener
	err := ep.h.do(func() error {
		var err error
		ln, err = net.Listen(network, address)
		return err
	})
	return ln, err
}

// nsHandle is a named namespace and an open descriptor of it (for setns).
type nsHandle struct {
	name string
	mu   sync.RWMutex
	f    *os.File // nil once removed; guarded by mu
}

func addNS(name string) (*nsHandle, error) {
	if err := ip("netns", "add", name); err != nil {
		return nil, err
	}
	f, err := os.Open("/run/netns/" + name)
	if err != nil {
		_ = ip("netns", "del", name)
		return nil, err
	}
	return &nsHandle{name: name, f: f}, nil
}

// do runs f on an OS thread of its own inside the namespace. Sockets f
// makes stay in the namespace, wherever they are used afterwards.
func (h *nsHandle) do(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer self.Close()
		h.mu.RLock()
		if h.f == nil {
			err = fmt.Errorf("namespace %s removed", h.name)
		} else {
			err = unix.Setns(int(h.f.Fd()), unix.CLONE_NEWNET)
		}
		h.mu.RUnlock()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("setns %s: %w", h.name, err)
			return
		}
		err = f()
		// A thread that cannot go back stays locked: the runtime ends it
		// with this goroutine instead of running other goroutines in the
		// wrong namespace.
		if unix.Setns(int(self.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

// remove kills the processes left in the namespace and deletes it.
func (h *nsHandle) remove() error {
	h.mu.Lock()
	if h.f != nil {
		h.f.Close()
		h.f = nil
	}
	h.mu.Unlock()
	if out, err := exec.Command("ip", "netns", "pids", h.name).Output(); err == nil {
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	return ip("netns", "del", h.name)
}

// setLocalnet lets the calling thread's namespace route 127.0.0.0/8 over
// its links (route_localnet).
func setLocalnet() error {
	return os.WriteFile("/proc/sys/net/ipv4/conf/all/route_localnet", []byte("1"), 0)
}

func newName() string {
	return namePrefix + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(seq.Add(1), 10)
}

var leftover = regexp.MustCompile(`^` + namePrefix + `([0-9]+)-[0-9a-z]+$`)

// sweep deletes the namespaces of redlock processes no longer alive.
func sweep() {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		m := leftover.FindStringSubmatch(name)
		if m == nil {
			continue
		}
		if pid, err := strconv.Atoi(m[1]); err == nil && !alive(pid) {
			_ = ip("netns", "del", name)
		}
	}
}

// alive reports whether a process pid exists.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// ip runs iproute2's ip with args.
func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}
