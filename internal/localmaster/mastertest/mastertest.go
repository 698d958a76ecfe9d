// Package mastertest provides test helpers around localmaster.
package mastertest

import (
	"testing"

	"github.com/redlock-dev/redlock/internal/localmaster"
)

// Start starts n local masters for t and closes them when t finishes. If
// the environment variable REDLOCK_REQUIRE_REDIS is "1", it fails instead
// of falling back to embedded masters when redis-server is missing.
func Start(t testing.TB, n int) *localmaster.Set {
	t.Helper()
	return StartWith(t, localmaster.Options{N: n})
}

// RequireReal skips t when s consists of embedded masters, which cannot be
// paused; use it in fault-injection tests.
func RequireReal(t testing.TB, s *localmaster.Set) {
	t.Helper()
	if s.Embedded() {
		t.Skip("mastertest: needs real redis-server masters (embedded masters cannot be paused)")
	}
}
