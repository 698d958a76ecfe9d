//go:build unix

package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/internal/test/relay"
	"github.com/redlock-dev/redlock/proxy"
)

// TestLockReleaseAfterValidityIsLoss: property (h) for redlock lock — exit
// 0 reports work done under the lock, so when the release returns after
// the validity ended, redlock lock exits 76 (lost), decided from the
// clock. Each case takes a 1 s lock, the command exits 0 well inside it,
// and then the release stalls past it: a proxy that stops answering (a
// partition, a SIGSTOPped proxy: default flags), masters stopped under
// --leader (whose resignation is two broadcasts) and under a per-master
// timeout longer than the TTL. Before, each exited 0 1.1–5.3 s after the
// start (found by the review of issue #46).
func TestLockReleaseAfterValidityIsLoss(t *testing.T) {
	set := mastertest.Start(t, 3)
	mastertest.RequireReal(t, set)
	masters := strings.Join(set.Addrs(), ",")
	stopMasters := func() func() {
		for _, m := range set.Masters() {
			if err := m.Pause(); err != nil {
				t.Fatal(err)
			}
		}
		return func() {
			for _, m := range set.Masters() {
				m.Resume()
			}
		}
	}
	for _, c := range []struct {
		name, sleep string
		// setup returns redlock lock's flags and what stalls its release
		// (which returns what undoes the stall).
		setup func(t *testing.T) (flags []string, stall func() (undo func()))
	}{
		{name: "proxy stops answering", sleep: "0.3",
			setup: func(t *testing.T) ([]string, func() func()) {
				addr := serveProxy(t, proxy.Config{EngineConfig: engine.Config{FreshMasters: true, Addrs: set.Addrs(), MasterTimeout: 50 * time.Millisecond}})
				r, err := relay.Start(addr)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { r.Close() })
				t.Setenv(envProxyPassword, "")
				return []string{"--proxy", r.Addr()}, func() func() { r.Hold(); return r.Release }
			}},
		{name: "leader, masters stopped", sleep: "0.5",
			setup: func(*testing.T) ([]string, func() func()) {
				return []string{"--fresh-masters", "--masters", masters, "--leader", "--master-timeout", "600ms"}, stopMasters
			}},
		{name: "master timeout over the TTL, masters stopped", sleep: "0.1",
			setup: func(*testing.T) ([]string, func() func()) {
				return []string{"--fresh-masters", "--masters", masters, "--master-timeout", "1500ms"}, stopMasters
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ready := filepath.Join(t.TempDir(), "ready")
			flags, stall := c.setup(t)
			args := append(flags, "--ttl", "1s", "relclock:"+c.name, "--", "sh", "-c", "echo x > "+ready+"; sleep "+c.sleep+"; exit 0")
			type result struct {
				code   int
				stderr string
			}
			done := make(chan result, 1)
			start := time.Now()
			go func() {
				code, stderr := runLock(args...)
				done <- result{code, stderr}
			}()
			waitFile(t, ready, 10*time.Second)
			undo := stall()
			r := <-done
			took := time.Since(start)
			undo()
			if took <= time.Second {
				t.Fatalf("returned %v after the start of a 1 s lock (exit %d): the release did not stall past the validity\n%s", took, r.code, r.stderr)
			}
			if r.code != exitLost || !strings.Contains(r.stderr, "validity ended before the release returned") {
				t.Fatalf("returned %v after the start of a 1 s lock, after its validity: exit %d, want %d (lost)\n%s", took, r.code, exitLost, r.stderr)
			}
		})
	}
}
