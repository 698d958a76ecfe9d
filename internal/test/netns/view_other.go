//go:build !linux

package netns

import (
	"context"
	"net"
	"os/exec"
)

// View is not available on this platform.
type View struct{}

// AddView is never reached: New skipped the test.
func (n *Net) AddView() *View { return nil }

// Name returns "".
func (vw *View) Name() string { return "" }

// DialContext fails.
func (vw *View) DialContext(context.Context, string, string) (net.Conn, error) {
	return nil, errUnsupported
}

// Command returns a command that fails.
func (vw *View) Command(name string, args ...string) *exec.Cmd { return exec.Command("false") }

// Cut fails.
func (vw *View) Cut(...int) error { return errUnsupported }

// Heal fails.
func (vw *View) Heal() error { return errUnsupported }

// Down returns false.
func (vw *View) Down(int) bool { return false }
