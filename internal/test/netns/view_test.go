package netns_test

import (
	"bufio"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/test/netns"
)

type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// echoes reports whether a line sent to addr through dial comes back
// within d (nil), or the error: a timeout when the way is cut.
func echoes(dial dialFunc, addr string, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	c, err := dial(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	return roundTrip(c, bufio.NewReader(c), "hello", d)
}

// TestViewCutsItsOwnLinks: a view reaches the Net's endpoints over links
// of its own. Cutting a view's link silences that endpoint for the view
// only, and the Net's own cuts do not reach the view: two clients can see
// different sets of endpoints (a bridge). A command runs inside the view.
func TestViewCutsItsOwnLinks(t *testing.T) {
	n := netns.New(t)
	var addrs []string
	for range 2 {
		ep := n.Add()
		ln, err := ep.Listen("tcp", net.JoinHostPort(ep.Addr().String(), "0"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go echo(ln)
		addrs = append(addrs, ln.Addr().String())
	}
	v1, v2 := n.AddView(), n.AddView()
	clients := []struct {
		name string
		dial dialFunc
	}{{"net", n.DialContext}, {"view 1", v1.DialContext}, {"view 2", v2.DialContext}}
	// want[c][k]: client c reaches endpoint k.
	check := func(stage string, want [3][2]bool) {
		t.Helper()
		for c, cl := range clients {
			for k, addr := range addrs {
				err := echoes(cl.dial, addr, 300*time.Millisecond)
				switch {
				case want[c][k] && err != nil:
					t.Errorf("%s: %s to endpoint %d: %v; want an echo", stage, cl.name, k, err)
				case !want[c][k] && !isTimeout(err):
					t.Errorf("%s: %s to endpoint %d: %v; want a timeout (dropped)", stage, cl.name, k, err)
				}
			}
		}
	}
	all := [3][2]bool{{true, true}, {true, true}, {true, true}}
	check("all links up", all)

	// A bridge: the Net reaches endpoint 1 only, view 1 endpoint 0 only.
	if err := v1.Cut(1); err != nil {
		t.Fatal(err)
	}
	if err := n.Endpoints()[0].LinkDown(); err != nil {
		t.Fatal(err)
	}
	if !v1.Down(1) || v1.Down(0) || v2.Down(1) {
		t.Errorf("Down: view 1 %v %v, view 2 %v; want true false false", v1.Down(1), v1.Down(0), v2.Down(1))
	}
	check("bridge", [3][2]bool{{false, true}, {true, false}, {true, true}})
	if err := v1.Cut(7); err == nil {
		t.Error("Cut of an endpoint the view has no link to: no error")
	}

	if err := v1.Heal(); err != nil {
		t.Fatal(err)
	}
	check("view 1 healed", [3][2]bool{{false, true}, {true, true}, {true, true}})
	if err := n.Heal(); err != nil {
		t.Fatal(err)
	}
	check("healed", all)

	// A process inside the view has the view's addresses and routes the
	// endpoints' addresses over its links.
	out, err := v1.Command("ip", "-o", "-4", "route", "get", strings.Split(addrs[1], ":")[0]).CombinedOutput()
	if err != nil {
		t.Fatalf("ip route get inside view 1: %v: %s", err, out)
	}
	if !strings.Contains(string(out), "dev c1") || !strings.Contains(string(out), "src 127.201.0.5") {
		t.Errorf("inside view 1, the way to endpoint 1 is %q; want dev c1 src 127.201.0.5", out)
	}
}
