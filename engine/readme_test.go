package engine_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/enginex"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
)

// readmeSnippetStart and End delimit processOrder below, which must be the
// README's library example byte for byte.
const readmeSnippetStart, readmeSnippetEnd = "// processOrder takes a lock", "\treturn nil\n}\n"

// processOrder takes a lock on orders:42 over independent Redis masters,
// works while it holds it, and releases it.
func processOrder(ctx context.Context, cfg engine.Config) error {
	e, err := engine.New(cfg) // cfg.Addrs: e.g. 5 host:port
	if err != nil {
		return err
	}
	defer e.Close()

	lock, err := e.TryLock(ctx, "orders:42", 10*time.Second) // one attempt
	// or e.Lock(ctx, key, ttl) to wait (queued; handed the key at Unlock)
	switch {
	case errors.Is(err, engine.ErrNotAcquired):
		fmt.Println("someone else holds orders:42")
		return nil
	case errors.Is(err, engine.ErrUnavailable):
		return err // too few masters answered to tell: not the same as held
	case err != nil:
		return err // ctx errors come back as they are
	}
	defer lock.Unlock(context.WithoutCancel(ctx))

	fmt.Println("processing orders:42 until", lock.Until().Format(time.TimeOnly))
	// Act only while lock.Valid(); Extend before Until to keep it longer.
	if err := lock.Extend(ctx, 10*time.Second); errors.Is(err, engine.ErrLockLost) {
		return err
	}
	return nil
}

// TestReadmeExample: the README's library example, as it appears in
// README.md, against 5 fresh masters, called right after they start: it
// acquires on its first call (no WaitReady), and with 3 of 5 masters down
// it reports them unavailable, not held.
func TestReadmeExample(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.ReadFile("readme_test.go")
	if err != nil {
		t.Fatal(err)
	}
	if want := snippetOf(t, self); !bytes.Contains(readme, want) {
		t.Fatalf("README.md does not contain processOrder as in readme_test.go:\n%s", want)
	}
	set := mastertest.Start(t, 5)
	// The test started the masters empty: their first sessions may vote
	// (FreshMasters). Masters other processes use would be quarantined
	// until they are MaxTTL old.
	cfg := engine.Config{Addrs: set.Addrs(), FreshMasters: true}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := captureStdout(func() error { return processOrder(ctx, cfg) })
	if err != nil || !strings.HasPrefix(out, "processing orders:42 until ") {
		t.Fatalf("README example: %v, printed %q; want it to acquire on the first call", err, out)
	}
	for _, m := range set.Masters()[:3] {
		if err := m.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	out, err = captureStdout(func() error { return processOrder(ctx, cfg) })
	if !errors.Is(err, engine.ErrUnavailable) || out != "" {
		t.Fatalf("README example with 3 of 5 masters down: %v, printed %q; want ErrUnavailable", err, out)
	}
}

func snippetOf(t *testing.T, src []byte) []byte {
	t.Helper()
	i := bytes.Index(src, []byte(readmeSnippetStart+" on"))
	if i < 0 {
		t.Fatal("processOrder not found in readme_test.go")
	}
	j := bytes.Index(src[i:], []byte(readmeSnippetEnd))
	return src[i : i+j+len(readmeSnippetEnd)]
}

// captureStdout runs f with os.Stdout going to a pipe and returns what it
// printed.
func captureStdout(f func() error) (string, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return "", err
	}
	old := os.Stdout
	os.Stdout = w
	done := make(chan []byte)
	go func() { b, _ := io.ReadAll(r); done <- b }()
	ferr := f()
	os.Stdout = old
	w.Close()
	return string(<-done), ferr
}

// TestReadmeExampleQuarantine: the README's example against masters
// started a moment ago, without FreshMasters, as a new user runs it. Every
// master answers in restart quarantine: the error counts them as answered
// and quarantined (not "0/5 answered"), says when a quorum votes and how
// long that is from now, carries the end for code ([engine.QuarantineError],
// [engine.QuorumError.VotesAt]), and — every master being younger than the
// quarantine period — says how to declare fresh masters and for which.
func TestReadmeExampleQuarantine(t *testing.T) {
	set := mastertest.Start(t, 5)
	mastertest.RequireReal(t, set) // an embedded master reports no uptime
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err := captureStdout(func() error { return processOrder(ctx, engine.Config{Addrs: set.Addrs()}) })
	if !errors.Is(err, engine.ErrUnavailable) || !errors.Is(err, engine.ErrQuarantined) {
		t.Fatalf("README example on masters started a moment ago: %v; want ErrUnavailable and ErrQuarantined", err)
	}
	msg := err.Error()
	for _, want := range []string{
		"5/5 masters answered: 0 granted, 0 held, 5 in restart quarantine (quorum 3)",
		"; a quorum votes from ", "(in ",
		"every master started less than 1m0s ago: if they were started empty and have never served locks, declare them fresh (Config.FreshMasters)",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error does not say %q:\n%s", want, msg)
		}
	}
	var qe *engine.QuorumError
	var quar *engine.QuarantineError
	if !errors.As(err, &qe) || !errors.As(err, &quar) {
		t.Fatalf("want a QuorumError and a QuarantineError in %v", err)
	}
	// The masters started before the call, so the end is at most a
	// period (60s, the default MaxTTL) plus a second (StartedBy) ahead.
	latest := time.Now().Add(engine.DefaultMaxTTL + time.Second)
	if qe.VotesAt.Before(start) || qe.VotesAt.After(latest) || quar.Until.Before(start) || quar.Until.After(latest) {
		t.Errorf("VotesAt %v, Until %v; want both in [%v, %v]", qe.VotesAt, quar.Until, start, latest)
	}
	if qe.Answered != 5 || qe.Quarantined != 5 || qe.Granted != 0 || qe.Held != 0 {
		t.Errorf("Answered %d Quarantined %d Granted %d Held %d; want 5 5 0 0", qe.Answered, qe.Quarantined, qe.Granted, qe.Held)
	}
	if strings.Count(msg, "in restart quarantine until") != 1 {
		t.Errorf("the five quarantined masters are not listed as one cause:\n%s", msg)
	}
}

// TestQuarantineHintOnlyWhereTrue: the hint to declare masters fresh is
// not given when some master has run longer than the quarantine period —
// it may have served locks, so a restarted one must wait —, and a program
// that names its flags (Config.Names) gets its flag's name, never a Config
// field's.
func TestQuarantineHintOnlyWhereTrue(t *testing.T) {
	set := mastertest.Start(t, 5)
	mastertest.RequireReal(t, set)
	const period = 2 * time.Second
	time.Sleep(period + 1500*time.Millisecond) // every master older than the period
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, m := range set.Masters()[:3] {
		if err := m.Restart(ctx); err != nil {
			t.Fatal(err)
		}
	}
	names := engine.Names{MaxTTL: "--max-ttl", FreshMasters: "--fresh-masters", MasterTimeout: "--master-timeout"}
	e, err := engine.New(engine.Config{Addrs: set.Addrs(), MaxTTL: period, Names: names})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	e.WaitReady(ctx)
	// Every master answering (WaitReady waits for each first connect only;
	// a restarted master may still be coming up on a busy machine): the
	// verdict below counts 3 in quarantine, not fewer answers.
	for i := range set.Masters() {
		for _, c := range enginex.Open(e).Conns(i) {
			if err := c.WaitConnected(ctx); err != nil {
				t.Fatalf("master %d: %v", i, err)
			}
		}
	}
	_, err = e.TryLock(ctx, "k", time.Second)
	if !errors.Is(err, engine.ErrUnavailable) || !strings.Contains(err.Error(), "3 in restart quarantine") || !strings.Contains(err.Error(), "a quorum votes from") {
		t.Fatalf("3 of 5 masters restarted: %v; want unavailable, 3 in quarantine, when a quorum votes", err)
	}
	if strings.Contains(err.Error(), "fresh") {
		t.Errorf("two masters have run longer than the period, yet the error hints at declaring them fresh: %v", err)
	}
	if err := e.Voting(); err == nil || strings.Contains(err.Error(), "fresh") || !strings.Contains(err.Error(), "2/5 masters vote") {
		t.Errorf("Voting: %v", err)
	}
	// The TTL cap names the flag and its cost, not Config.MaxTTL.
	_, err = e.TryLock(ctx, "k", 3*time.Second)
	if !errors.Is(err, engine.ErrBadArgument) || !strings.Contains(err.Error(), "raise --max-ttl to at least 3s") ||
		!strings.Contains(err.Error(), "restart quarantine") || strings.Contains(err.Error(), "Config.") {
		t.Errorf("TTL over the cap: %v", err)
	}
	// Fresh masters, named by the flag.
	set2 := mastertest.Start(t, 3)
	e2, err := engine.New(engine.Config{Addrs: set2.Addrs(), MaxTTL: period, Names: names})
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	e2.WaitReady(ctx) // connected first: a loaded CI run timed the try out while connecting
	_, err = e2.TryLock(ctx, "k", time.Second)
	if !strings.Contains(err.Error(), "declare them fresh (--fresh-masters)") || strings.Contains(err.Error(), "Config.") {
		t.Errorf("masters started a moment ago, flags named: %v", err)
	}
	if err := e2.Voting(); err == nil || !strings.Contains(err.Error(), "declare them fresh (--fresh-masters)") {
		t.Errorf("Voting with masters started a moment ago: %v", err)
	}
}
