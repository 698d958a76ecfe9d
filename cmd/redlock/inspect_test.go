//go:build unix

package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/redlock-dev/redlock/internal/inspect"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/internal/test/proctest"
)

// TestInspectCLI: `redlock inspect` reports exactly the planted leaked and
// minority keys (exit 3), honours --match, and exits 0 when clean.
func TestInspectCLI(t *testing.T) {
	set := mastertest.Start(t, 3)
	mastertest.RequireReal(t, set)
	mc := dialMasters(t, set)
	masters := strings.Join(set.Addrs(), ",")
	mc.do(t, "SET", "lock:ok", "t", "PX", "60000")
	mc[0].Exec(t.Context(), "SET", "lock:leaked", "t")
	mc[1].Exec(t.Context(), "SET", "lock:minority", "t", "PX", "60000")
	mc.do(t, "SET", "redlock:fence", "42")                  // the fencing counter: no TTL by design
	mc.do(t, "SET", "lock:big", strings.Repeat("x", 2<<20)) // no TTL, but no lock: 2 MiB, read only 1 KiB
	var stdout, stderr proctest.Buffer
	code := run([]string{"inspect", "--masters", masters, "--json"}, &stdout, &stderr)
	if code != exitFindings {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitFindings, stderr.String())
	}
	var rep inspect.Report
	if err := json.Unmarshal([]byte(stdout.String()), &rep); err != nil {
		t.Fatalf("%v: %s", err, stdout.String())
	}
	var keys []string
	for _, f := range rep.Findings {
		keys = append(keys, f.Key+":"+string(f.Kinds[0]))
	}
	if strings.Join(keys, " ") != "lock:leaked:no_ttl lock:minority:minority" {
		t.Fatalf("findings %q", keys)
	}
	if strings.Join(rep.NotLocks, " ") != "lock:big" {
		t.Fatalf("not locks %q, want the 2 MiB value", rep.NotLocks)
	}
	stdout, stderr = proctest.Buffer{}, proctest.Buffer{}
	if code := run([]string{"inspect", "--masters", masters, "--match", "lock:ok*"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "no anomalies") {
		t.Fatalf("clean match: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	if code := run([]string{"inspect", "--masters", masters, "--count", "0"}, &stdout, &stderr); code != 2 {
		t.Fatalf("--count 0: exit %d", code)
	}
}
