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
