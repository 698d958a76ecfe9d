package fault_test

import (
	"os"
	"testing"

	"github.com/redlock-dev/redlock/internal/test/proctest"
)

// redlockProxy starts `redlock proxy` (built from this tree) over masters
// with flags; it returns the address it listens on and stops it (SIGTERM)
// when t ends.
func redlockProxy(t *testing.T, masters []string, flags ...string) string {
	t.Helper()
	return proctest.StartProxy(t, nil, masters, flags...).Addr
}

// TestMain removes the built binary after the tests; with
// REDLOCK_FAULT_PAUSED_CHILD set, this binary is a paused holder's
// process instead (paused_test.go).
func TestMain(m *testing.M) {
	if os.Getenv(pausedChildEnv) != "" {
		os.Exit(pausedChild())
	}
	code := m.Run()
	proctest.Cleanup()
	os.Exit(code)
}
