//go:build !linux

package netns

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"testing"
)

// RequireEnv is the environment variable that, set to "1", turns a skip
// for want of network namespaces into a failure.
const RequireEnv = "REDLOCK_REQUIRE_NETNS"

var errUnsupported = errors.New("network namespaces need Linux")

// Available reports why this process cannot make network namespaces.
func Available() error { return errUnsupported }

// Require skips t, or fails it when REDLOCK_REQUIRE_NETNS is "1".
func Require(t testing.TB) {
	t.Helper()
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("netns: %v (%s=1)", errUnsupported, RequireEnv)
	}
	t.Skipf("netns: %v", errUnsupported)
}

// Net is not available on this platform: [New] skips.
type Net struct{}

// New skips t (see [Require]).
func New(t testing.TB) *Net { Require(t); return nil }

// Add is never reached: New skipped the test.
func (n *Net) Add() *Endpoint { return nil }

// Endpoints returns nothing.
func (n *Net) Endpoints() []*Endpoint { return nil }

// Heal fails.
func (n *Net) Heal() error { return errUnsupported }

// DialContext fails.
func (n *Net) DialContext(context.Context, string, string) (net.Conn, error) {
	return nil, errUnsupported
}

// Endpoint is not available on this platform.
type Endpoint struct{}

// Name returns "".
func (ep *Endpoint) Name() string { return "" }

// Addr returns the zero address.
func (ep *Endpoint) Addr() netip.Addr { return netip.Addr{} }

// Down returns false.
func (ep *Endpoint) Down() bool { return false }

// LinkDown fails.
func (ep *Endpoint) LinkDown() error { return errUnsupported }

// LinkUp fails.
func (ep *Endpoint) LinkUp() error { return errUnsupported }

// Command returns a command that fails.
func (ep *Endpoint) Command(name string, args ...string) *exec.Cmd { return exec.Command("false") }

// Listen fails.
func (ep *Endpoint) Listen(string, string) (net.Listener, error) { return nil, errUnsupported }
