package main

import (
	"bytes"
	"strings"
	"testing"

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
		{"negative shutdown-timeout", []string{"--masters", masters, "--shutdown-timeout", "-1s"}, "--shutdown-timeout must not be negative"},
		{"negative master-timeout", []string{"--masters", masters, "--master-timeout", "-5ms"}, "--master-timeout must not be negative"},
		{"drift factor out of range", []string{"--masters", masters, "--drift-factor", "1.5"}, "invalid"},
		{"same address twice", []string{"--masters", set.Addrs()[0] + "," + set.Addrs()[0] + "," + set.Addrs()[1]}, "listed twice"},
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
