package engine_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redlock-dev/redlock/conn"
)

// TestEveryScriptLoadedAtConnect: every engine script is in the masters'
// script cache once the engine's connections are up, so that no first
// call of a script meets NOSCRIPT — which fails instead of being re-sent
// when a later call of its key is queued behind it (keeping one key's
// order): Campaign's first record right after its lock failed so, the
// election and fair lock scripts not being loaded (found by the review of
// issue #46).
func TestEveryScriptLoadedAtConnect(t *testing.T) {
	v := newEnv(t, 3, functional)
	paths, err := filepath.Glob("../internal/scripts/engine/*.lua")
	if err != nil || len(paths) < 20 {
		t.Fatalf("engine scripts: %v, %v", paths, err)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		sha := conn.NewScript(strings.TrimSuffix(string(b), "\n")).SHA()
		for m := range v.direct {
			r := v.mustExec(m, "SCRIPT", "EXISTS", sha)
			if len(r.Elems) != 1 || r.Elems[0].Int != 1 {
				t.Errorf("master %d: %s not loaded at connect", m, filepath.Base(p))
			}
		}
	}
}
