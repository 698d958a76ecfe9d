package proxy

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
)

// recorder is an engine.Observer that keeps what it is told.
type recorder struct {
	engine.NopObserver
	mu       sync.Mutex
	acquires []engine.AcquireEvent
	extends  []bool
	releases []engine.ReleaseResult
	replies  int // MasterReply calls
}

func (r *recorder) Acquire(ev engine.AcquireEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.acquires = append(r.acquires, ev)
}

func (r *recorder) Extend(ok, _ bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.extends = append(r.extends, ok)
}

func (r *recorder) Release(res engine.ReleaseResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.releases = append(r.releases, res)
}

func (r *recorder) MasterReply(int, time.Duration, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.replies++
}

// take returns what was recorded since the last take, and forgets it.
func (r *recorder) take() (acq []engine.AcquireEvent, ext []bool, rel []engine.ReleaseResult, replies int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	acq, ext, rel, replies = r.acquires, r.extends, r.releases, r.replies
	r.acquires, r.extends, r.releases, r.replies = nil, nil, nil, 0
	return
}

// TestLibraryScriptsObserved: library scripts the proxy runs as broadcasts
// (several keys: bsm/redislock v0.10, node-redlock; single-key acquire
// scripts) report to the engine's Observer like the engine's own
// operations — acquisitions by result with margin and validity,
// extensions, releases, and every master's round trip — so /metrics
// counts the locks of every client library, not only SET NX PX.
func TestLibraryScriptsObserved(t *testing.T) {
	rec := &recorder{}
	e := startEnv(t, 5, func(c *Config) { c.EngineConfig.Observer = rec })
	ctx := context.Background()
	c := e.client(t)
	obtain := redis.NewScript(scripts.Lib("bsm-redislock-v0.10.0-obtain"))
	refresh := redis.NewScript(scripts.Lib("bsm-redislock-v0.10.0-refresh"))
	release := redis.NewScript(scripts.Lib("bsm-redislock-v0.10.0-release"))
	keys := []string{"obs:a", "obs:b"}
	token := "tokentokentokentokent"
	rec.take() // the start's probes

	if err := obtain.Run(ctx, c, keys, token, len(token), "10000").Err(); err != nil {
		t.Fatalf("obtain: %v", err)
	}
	acq, _, _, replies := rec.take()
	if len(acq) != 1 || acq[0].Result != engine.AcquireGranted || acq[0].Margin != 2 || acq[0].TTL != 10*time.Second ||
		acq[0].ValidityLeft <= 0 || acq[0].ValidityLeft >= 10*time.Second || acq[0].Latency <= 0 {
		t.Fatalf("obtain reported %+v; want one acquired attempt, margin 2, validity left", acq)
	}
	if replies != 5 {
		t.Fatalf("obtain reported %d master round trips, want 5", replies)
	}
	if err := obtain.Run(ctx, c, []string{"obs:b"}, "other-token-other-token", 23, "10000").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("second obtain: %v", err)
	}
	if acq, _, _, _ := rec.take(); len(acq) != 1 || acq[0].Result != engine.AcquireTaken || acq[0].Margin != -3 || acq[0].ValidityLeft != 0 {
		t.Fatalf("refused obtain reported %+v; want one taken attempt, margin -3", acq)
	}
	if err := refresh.Run(ctx, c, keys, token, len(token), "20000").Err(); err != nil {
		t.Fatalf("refresh: %v", err)
	}
	if err := release.Run(ctx, c, keys, token, len(token)).Err(); err != nil {
		t.Fatalf("release: %v", err)
	}
	if err := release.Run(ctx, c, keys, token, len(token)).Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("second release: %v", err)
	}
	// The second release of a released value is not a lost lock (#42).
	if _, ext, rel, _ := rec.take(); len(ext) != 1 || !ext[0] || len(rel) != 2 || rel[0] != engine.ReleaseReleased || rel[1] != engine.ReleaseCleanup {
		t.Fatalf("refresh and two releases reported extends %v, releases %v; want [true], [released cleanup]", ext, rel)
	}

	// Too few masters: no quorum, and the reply says so.
	for _, m := range e.set.Masters()[:3] {
		if err := m.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	err := obtain.Run(ctx, c, keys, token, len(token), "10000").Err()
	if err == nil || !strings.Contains(err.Error(), "unavailable") {
		t.Fatalf("obtain with 3 of 5 down: %v", err)
	}
	if acq, _, _, _ := rec.take(); len(acq) != 1 || acq[0].Result != engine.AcquireNoQuorum || acq[0].Margin != -1 {
		t.Fatalf("obtain with 3 of 5 down reported %+v; want one no_quorum attempt, margin 2-3 = -1", acq)
	}
}

// TestLibraryScriptsObservedShared: a proxy on a given engine (Config.Engine) reports
// library scripts to that engine's Observer (Config.EngineConfig is ignored).
func TestLibraryScriptsObservedShared(t *testing.T) {
	set := mastertest.Start(t, 3)
	rec := &recorder{}
	eng, err := engine.New(engine.Config{FreshMasters: true, Addrs: set.Addrs(), MasterTimeout: 300 * time.Millisecond, Observer: rec})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	e := startEnvOn(t, set, func(c *Config) { c.Engine = eng })
	rec.take()
	obtain := redis.NewScript(scripts.Lib("bsm-redislock-v0.10.0-obtain"))
	token := "tokentokentokentokent"
	if err := obtain.Run(context.Background(), e.client(t), []string{"sh:a"}, token, len(token), "10000").Err(); err != nil {
		t.Fatalf("obtain: %v", err)
	}
	if acq, _, _, _ := rec.take(); len(acq) != 1 || acq[0].Result != engine.AcquireGranted || acq[0].Margin != 1 {
		t.Fatalf("obtain through a given engine reported %+v; want one acquired attempt, margin 1", acq)
	}
}
