//go:build unix

package main

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/proxy"
)

// aclVariant is line for another user: named name, with the rules of
// drop removed and those of add added.
func aclVariant(line []string, name string, drop []string, add ...string) []string {
	out := []string{"user", name}
	for _, w := range line[2:] {
		if !slices.Contains(drop, w) {
			out = append(out, w)
		}
	}
	return append(out, add...)
}

// TestRefusedByMasters: what the masters refuse for good is a
// configuration error, at once: `redlock lock` (plain with --wait,
// --leader) exits 78 naming the refusal and the fix, without waiting;
// `redlock inspect` that could not read a master (its user lacks
// GETRANGE) exits 4 naming the cause, never "no anomalies" (exit 0), and
// its JSON says no master was read whole. The users are the documented
// one short of a rule.
func TestRefusedByMasters(t *testing.T) {
	line := docACLLine(t)
	m := startACLMasters(t, 3, line,
		aclVariant(line, "nogetrange", []string{"+getrange"}),
		aclVariant(line, "nohset", []string{"+hset"}),
		aclVariant(line, "otherkeys", []string{"~*"}, "~other:*"),
		aclVariant(line, "nopexpire", []string{"+pexpire"}))
	masters := []string{"--masters", m.addrs(), "--fresh-masters", "--master-timeout", aclMasterTimeout.String()}
	t.Setenv(envPassword, aclUserPW)
	for _, tt := range []struct {
		name, user string
		args       []string
		code       int
		want       []string
	}{
		{"lock --wait, a key outside the user's patterns", "otherkeys", []string{"--wait", "1m", "acl:refused"}, exitConfig,
			[]string{"refused a key (NOPERM)", "docs/operations.md#security"}},
		{"lock --leader --wait, no +hset", "nohset", []string{"--leader", "--wait", "1m", "acl:refused"}, exitConfig,
			[]string{"refused HSET (NOPERM): the masters' ACL user needs +hset — docs/operations.md#security"}},
		{"lock --leader, no +hset", "nohset", []string{"--leader", "acl:refused"}, exitConfig, []string{"+hset"}},
		{"lock --wait, a wrong password", "wrong", []string{"--wait", "1m", "acl:refused"}, exitConfig, []string{"WRONGPASS", "--master-password"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			code, stderr := runLock(slices.Concat(masters, []string{"--master-user", tt.user}, tt.args, []string{"--", "true"})...)
			if d := time.Since(start); d > refusedWithin {
				t.Errorf("took %v: a refusal must not be waited on", d)
			}
			if code != tt.code {
				t.Errorf("exit %d, want %d", code, tt.code)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q", w)
				}
			}
			if t.Failed() {
				t.Logf("stderr:\n%s", stderr)
			}
		})
	}
	t.Run("lock, its extensions refused (no +pexpire)", func(t *testing.T) {
		// Granted, then every extension refused for good while the
		// command runs: the lock ends at the refusal (no retries until the
		// validity runs out), the command is terminated, exit 78 naming
		// the rule — the extension script's line calls GET and PEXPIRE,
		// and the server does not say which it refused: both are named.
		start := time.Now()
		code, stderr := runLock(slices.Concat(masters, []string{"--master-user", "nopexpire", "--ttl", "900ms", "acl:refused:extend", "--", "sleep", "30"})...)
		if d := time.Since(start); code != exitConfig || d > 10*time.Second || !strings.Contains(stderr, "+pexpire") || !strings.Contains(stderr, "the masters refused its extensions") {
			t.Errorf("exit %d after %v, want %d before the command's 30 s, naming +pexpire; stderr:\n%s", code, d, exitConfig, stderr)
		}
	})
	t.Run("lock --proxy --wait, the proxy's user refused a key", func(t *testing.T) {
		// The proxy answers the masters' refusal as a configuration
		// error, not as unavailable: redlock lock does not wait on it.
		addr := serveProxy(t, proxy.Config{EngineConfig: engine.Config{Addrs: m.set.Addrs(), FreshMasters: true, MasterTimeout: aclMasterTimeout,
			Conn: conn.Config{Username: "otherkeys", Password: aclUserPW}}})
		start := time.Now()
		code, stderr := runLock("--proxy", addr, "--wait", "1m", "acl:refused", "--", "true")
		if d := time.Since(start); code != exitConfig || d > refusedWithin || !strings.Contains(stderr, "misconfigured") || !strings.Contains(stderr, "NOPERM") {
			t.Errorf("exit %d after %v, want %d at once naming the refusal; stderr:\n%s", code, d, exitConfig, stderr)
		}
	})
	var help bytes.Buffer
	run([]string{"lock", "-h"}, &help, &help)
	if !regexp.MustCompile(`(?m)^ +78 +configuration`).MatchString(help.String()) {
		t.Errorf("redlock lock -h does not document exit 78:\n%s", help.String())
	}

	t.Run("inspect without GETRANGE", func(t *testing.T) {
		m.exec(t, 0, "SET", "acl:refused:nottl", "tok") // an anomaly it cannot see
		for _, format := range []string{"text", "json"} {
			args := slices.Concat([]string{"inspect", "--master-user", "nogetrange"}, masters[:2], []string{"--match", "acl:refused:*"})
			if format == "json" {
				args = append(args, "--json")
			}
			var stdout, stderr bytes.Buffer
			code := run(args, &stdout, &stderr)
			out := stdout.String() + stderr.String()
			if code != exitIncomplete || strings.Contains(out, "no anomalies found") || !strings.Contains(stderr.String(), "GETRANGE refused") {
				t.Errorf("%s: exit %d, want %d naming the refused GETRANGE, never \"no anomalies found\":\n%s", format, code, exitIncomplete, out)
			}
			if format == "text" {
				continue
			}
			var rep struct {
				Masters []struct {
					FullyRead *bool  `json:"fully_read"`
					Error     string `json:"error"`
				} `json:"masters"`
			}
			if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
				t.Fatalf("JSON: %v\n%s", err, stdout.String())
			}
			for i, ms := range rep.Masters {
				if ms.FullyRead == nil || *ms.FullyRead || !strings.Contains(ms.Error, "GETRANGE refused") {
					t.Errorf("master %d: fully_read %v, error %q; want false and the refusal", i, ms.FullyRead, ms.Error)
				}
			}
		}
	})
}
