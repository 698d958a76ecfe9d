package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/test/check"
)

// TestReentrantAnswersWhileLockWaits: while one goroutine's
// Reentrant.Lock waits for a key another holder has, the Reentrant's
// accessors answer at once (Count, Held, Done, Err), its Unlock says it
// does not hold the key, and another Lock of it gives up when its ctx
// ends. Before, acquire held the Reentrant's mutex for the whole wait and
// every one of them blocked until it ended (found by the review of issue
// #46).
func TestReentrantAnswersWhileLockWaits(t *testing.T) {
	v := newEnv(t, 3, functional)
	key := keyName(t)
	v.mustLock(key, 10*time.Second) // another holder
	r, _ := v.e.NewReentrant(key, "me")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waited := make(chan error, 1)
	go func() { waited <- r.Lock(ctx, 5*time.Second) }()
	check.Eventually(t, 10*time.Second, "the Lock call waiting", func() bool { return v.e.Stats().Waiting == 1 })

	answered := make(chan string, 1)
	go func() {
		if n := r.Count(); n != 0 {
			answered <- fmt.Sprint("Count ", n)
			return
		}
		if r.Held() != nil {
			answered <- "Held not nil"
			return
		}
		<-r.Done() // closed: not held
		if err := r.Err(); !errors.Is(err, engine.ErrUnlocked) {
			answered <- "Err " + err.Error()
			return
		}
		if err := r.Unlock(context.Background()); !errors.Is(err, engine.ErrUnlocked) {
			answered <- "Unlock " + err.Error()
			return
		}
		short, c := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer c()
		if err := r.Lock(short, time.Second); !errors.Is(err, context.DeadlineExceeded) {
			answered <- "a second Lock with a 50 ms ctx: " + err.Error()
			return
		}
		answered <- ""
	}()
	select {
	case msg := <-answered:
		if msg != "" {
			t.Fatal(msg)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the Reentrant's methods blocked while its Lock waits for the key")
	}
	cancel()
	if err := <-waited; !errors.Is(err, context.Canceled) {
		t.Fatalf("the waiting Lock: %v, want cancelled", err)
	}
}
