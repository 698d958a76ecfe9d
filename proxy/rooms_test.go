package proxy

import (
	"go/build"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/redlock-dev/redlock"

// roomDeps returns the packages of this module that pkg (a path under the
// module) imports, directly or not, tests excluded.
func roomDeps(t *testing.T, pkg string) []string {
	t.Helper()
	seen := map[string]bool{}
	var walk func(path string)
	walk = func(path string) {
		p, err := build.Import(path, ".", 0)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module+"/") || seen[imp] {
				continue
			}
			seen[imp] = true
			walk(imp)
		}
	}
	walk(module + "/" + pkg)
	deps := make([]string, 0, len(seen))
	for d := range seen {
		deps = append(deps, strings.TrimPrefix(d, module+"/"))
	}
	slices.Sort(deps)
	return deps
}

// TestRoomImports: the proxy's rooms import one way (docs/architecture.md):
// proxy → lock commands → Redisson → engine, and the lock commands → the
// RESP server. The RESP server room knows no locks: of this module it may
// import only the resp codec — not the engine, the master connections, or
// the lock rooms — directly or through another package. The Redisson room
// works over the engine and its transport, never the RESP server room or
// the lock commands (it publishes through the Publisher it declares and
// replies through the LockReplies it declares). The lock commands reach
// the server through its Conn and Call, and its services through the
// Server interface they declare.
func TestRoomImports(t *testing.T) {
	for _, tc := range []struct {
		room    string
		allowed []string
	}{
		{"proxy/internal/respserver", []string{"internal/proccpu", "resp"}},
		{"proxy/internal/redisson", []string{"conn", "engine", "internal/enginex", "internal/scripts", "resp"}},
		{"proxy/internal/lockcmds", []string{"conn", "engine", "internal/enginex", "internal/proccpu", "internal/scripts", "resp",
			"proxy/internal/redisson", "proxy/internal/respserver"}},
	} {
		t.Run(tc.room, func(t *testing.T) {
			for _, d := range roomDeps(t, tc.room) {
				if !slices.Contains(tc.allowed, d) {
					t.Errorf("%s imports %s (allowed within the module: %v)", tc.room, d, tc.allowed)
				}
			}
		})
	}
}
