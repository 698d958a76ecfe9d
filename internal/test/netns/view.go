//go:build linux

package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
)

// maxViews is how many views fit in 127.201.0.0/16 … 127.255.0.0/16.
const maxViews = 55

// View is another client namespace of a Net, with links of its own to
// the Net's endpoints: a second host that sees the same endpoints over a
// network of its own. Its cuts ([View.Cut]) are its own: cutting a view's
// link to an endpoint leaves the Net's link (and other views') up, and
// [Endpoint.LinkDown] does not cut the view's. So two clients can be given
// different views of the same endpoints — a bridge partition, where each
// reaches a different majority of masters. A process runs inside the view
// with [View.Command]; the test process dials from it with
// [View.DialContext].
//
// View v's link to endpoint k is 127.(200+v).0.0/30 + 4k: the view's end
// .1, the endpoint's end .2. The view routes the endpoint's own address
// (127.200.…, on the Net's link) over it, so an endpoint's listeners need
// no second address. Like the Net's links, a cut drops packets (the
// endpoint's end is set down; the view's end keeps its route and a
// permanent neighbour entry). Methods are safe for concurrent use.
type View struct {
	n     *Net
	h     *nsHandle
	links []*viewLink // links[k] goes to endpoint k
}

// viewLink is a view's veth pair to one endpoint.
type viewLink struct {
	ep             *Endpoint
	clientA, addr  netip.Addr // the view's end, the endpoint's end
	clientDev, dev string     // in the view's namespace, in the endpoint's
	clientMAC, mac string
	mu             sync.Mutex // serialises down and up
	down           atomic.Bool
}

// AddView makes a view of n linked to every endpoint n has now (not to
// endpoints added later) and removes it when n's test ends. It fails the
// test on error.
func (n *Net) AddView() *View {
	n.t.Helper()
	n.mu.Lock()
	n.views++
	v := n.views
	eps := append([]*Endpoint(nil), n.eps...)
	n.mu.Unlock()
	if v > maxViews {
		n.t.Fatalf("netns: more than %d views", maxViews)
	}
	h, err := addNS(newName())
	if err != nil {
		n.t.Fatalf("netns: %v", err)
	}
	// Before n's own cleanup (t.Cleanup is LIFO): the endpoints are still there.
	n.t.Cleanup(func() {
		if err := h.remove(); err != nil {
			n.t.Errorf("netns: cleanup: %v", err)
		}
	})
	if err := h.do(setLocalnet); err != nil {
		n.t.Fatalf("netns: %s: %v", h.name, err)
	}
	vw := &View{n: n, h: h}
	for k, ep := range eps {
		base := netip.AddrFrom4([4]byte{127, byte(200 + v), byte(k >> 6), byte(k << 2)})
		l := &viewLink{
			ep:      ep,
			clientA: base.Next(), addr: base.Next().Next(),
			clientDev: "c" + strconv.Itoa(k), dev: "view" + strconv.Itoa(v),
			clientMAC: fmt.Sprintf("02:%02x:6c:%02x:%02x:01", 0x72+v, k>>8, k&0xff),
			mac:       fmt.Sprintf("02:%02x:6c:%02x:%02x:02", 0x72+v, k>>8, k&0xff),
		}
		if err := vw.setup(l); err != nil {
			n.t.Fatalf("netns: view %s to endpoint %s: %v", h.name, ep.h.name, err)
		}
		vw.links = append(vw.links, l)
	}
	return vw
}

func (vw *View) setup(l *viewLink) error {
	c, e := vw.h.name, l.ep.h.name
	steps := [][]string{
		{"-n", c, "link", "add", l.clientDev, "address", l.clientMAC, "type", "veth",
			"peer", "name", l.dev, "address", l.mac, "netns", e},
		{"-n", c, "link", "set", "dev", l.clientDev, "addrgenmode", "none"},
		{"-n", e, "link", "set", "dev", l.dev, "addrgenmode", "none"},
		{"-n", c, "addr", "add", l.clientA.String() + "/30", "dev", l.clientDev},
		{"-n", e, "addr", "add", l.addr.String() + "/30", "dev", l.dev},
		{"-n", c, "link", "set", "dev", l.clientDev, "up"},
		// The endpoint's own address, over this link.
		{"-n", c, "route", "add", l.ep.addr.String() + "/32", "dev", l.clientDev, "src", l.clientA.String()},
		{"-n", c, "neigh", "replace", l.ep.addr.String(), "lladdr", l.mac, "dev", l.clientDev, "nud", "permanent"},
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			return err
		}
	}
	return l.up()
}

// Name returns the view's namespace name (for ip netns exec).
func (vw *View) Name() string { return vw.h.name }

// DialContext dials addr (an endpoint's address) from the view's
// namespace: a conn.Config.Dialer.
func (vw *View) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := vw.h.do(func() error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// Command returns a command that runs name with args inside the view's
// namespace (ip netns exec, which execs it). The view's removal kills it
// if it still runs.
func (vw *View) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", vw.h.name, name}, args...)...)
}

// Cut drops every packet between the view and the endpoints listed (by
// the order Add made them: with [StartMasters], endpoint i is master i).
func (vw *View) Cut(endpoints ...int) error {
	var errs []error
	for _, k := range endpoints {
		if k < 0 || k >= len(vw.links) {
			errs = append(errs, fmt.Errorf("netns: view %s has no link to endpoint %d", vw.h.name, k))
			continue
		}
		errs = append(errs, vw.links[k].setDown())
	}
	return errors.Join(errs...)
}

// Heal restores every link of the view.
func (vw *View) Heal() error {
	var errs []error
	for _, l := range vw.links {
		errs = append(errs, l.up())
	}
	return errors.Join(errs...)
}

// Down reports whether the view's link to endpoint k is cut.
func (vw *View) Down(k int) bool { return k >= 0 && k < len(vw.links) && vw.links[k].down.Load() }

func (l *viewLink) setDown() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := ip("-n", l.ep.h.name, "link", "set", "dev", l.dev, "down"); err != nil {
		return err
	}
	l.down.Store(true)
	return nil
}

func (l *viewLink) up() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := ip("-n", l.ep.h.name, "link", "set", "dev", l.dev, "up"); err != nil {
		return err
	}
	// Setting the device down flushed even permanent neighbour entries.
	if err := ip("-n", l.ep.h.name, "neigh", "replace", l.clientA.String(), "lladdr", l.clientMAC, "dev", l.dev, "nud", "permanent"); err != nil {
		return err
	}
	if err := waitOperUp(l.ep.h.name, l.dev); err != nil { // as Endpoint.LinkUp
		return err
	}
	l.down.Store(false)
	return nil
}
