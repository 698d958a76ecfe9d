package main

import (
	"bytes"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/localmaster/mastertest"
	"github.com/redlock-dev/redlock/internal/relay"
)

func TestProxyFlagValidation(t *testing.T) {
	set := mastertest.Start(t, 3)
	r, err := relay.Start(set.Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	masters := strings.Join(set.Addrs(), ",")
	for _, tt := range []struct {
		name string
		args []string
		want string // substring of stderr
	}{
		{"no masters", nil, "--masters is required"},
		{"zero max-clients", []string{"--masters", masters, "--max-clients", "0"}, "--max-clients must be positive, got 0"},
		{"zero max-request-bytes", []string{"--masters", masters, "--max-request-bytes", "0"}, "--max-request-bytes must be positive"},
		{"negative max-args", []string{"--masters", masters, "--max-args", "-1"}, "--max-args must be positive"},
		{"zero max-client-memory", []string{"--masters", masters, "--max-client-memory", "0"}, "--max-client-memory must be positive"},
		{"negative shutdown-timeout", []string{"--masters", masters, "--shutdown-timeout", "-1s"}, `invalid value "-1s" for flag -shutdown-timeout: must not be negative`},
		{"negative master-timeout", []string{"--masters", masters, "--master-timeout", "-5ms"}, `flag -master-timeout: must not be negative`},
		{"zero dial-timeout", []string{"--masters", masters, "--dial-timeout", "0"}, "--dial-timeout must be a positive duration"},
		{"idle-timeout without unit", []string{"--masters", masters, "--idle-timeout", "30"}, "want a duration with a unit"},
		{"drift factor out of range", []string{"--masters", masters, "--drift-factor", "1.5"}, "invalid"},
		{"same address twice", []string{"--masters", set.Addrs()[0] + "," + set.Addrs()[0] + "," + set.Addrs()[1]}, "listed twice"},
		{"bad address", []string{"--masters", "127.0.0.1:abc"}, `--masters: "127.0.0.1:abc": port must be a number`},
		{"one server under two addresses", []string{"--masters", set.Addrs()[0] + "," + set.Addrs()[1] + "," + r.Addr()}, "are the same server"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"proxy", "--listen", "127.0.0.1:0"}, tt.args...), &stdout, &stderr)
			if code != 2 {
				t.Fatalf("exit code %d, want 2; stderr:\n%s", code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.want) {
				t.Fatalf("stderr lacks %q:\n%s", tt.want, stderr.String())
			}
		})
	}
}

// TestProxyNoQuorum: with fewer than a quorum reachable the proxy refuses
// to start at once, naming the dial errors (unless --wait-masters).
func TestProxyNoQuorum(t *testing.T) {
	set := mastertest.Start(t, 1)
	var refused []string
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		refused = append(refused, ln.Addr().String())
		ln.Close()
	}
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := run([]string{"proxy", "--listen", "127.0.0.1:0", "--masters", strings.Join(append(set.Addrs(), refused...), ",")}, &stdout, &stderr)
	if d := time.Since(start); code != 2 || d > 5*time.Second || !strings.Contains(stderr.String(), "--masters: ") || !strings.Contains(stderr.String(), "1/3 masters reachable") ||
		!strings.Contains(stderr.String(), "connection refused") || !strings.Contains(stderr.String(), "--wait-masters") {
		t.Fatalf("exit %d after %v:\n%s", code, d, stderr.String())
	}
}
