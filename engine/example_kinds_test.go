package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redlock-dev/redlock/engine"
)

// A reentrant lock may be taken again by its holder: nested calls that
// each lock and unlock the same key work, and the key is released when
// the outermost Unlock brings the count to zero.
func ExampleEngine_NewReentrant() {
	ctx := context.Background()
	e, stop, err := exampleEngine(3, 2*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()

	r, _ := e.NewReentrant("account:7", "billing")
	r.Lock(ctx, 10*time.Second)
	r.Lock(ctx, 10*time.Second) // a nested call: one script per master
	fmt.Println("count:", r.Count(), "owner in token:", strings.HasPrefix(r.Held().Token(), "billing:"))

	other, _ := e.NewReentrant("account:7", "reports")
	fmt.Println("another owner refused:", errors.Is(other.TryLock(ctx, time.Second), engine.ErrNotAcquired))

	r.Unlock(ctx)
	fmt.Println("after one Unlock, count:", r.Count())
	r.Unlock(ctx)
	fmt.Println("released:", r.Count() == 0 && other.TryLock(ctx, time.Second) == nil)
	// Output:
	// count: 2 owner in token: true
	// another owner refused: true
	// after one Unlock, count: 1
	// released: true
}

// A semaphore admits up to its number of permits at once; each permit is
// a Lock.
func ExampleEngine_NewSemaphore() {
	ctx := context.Background()
	e, stop, err := exampleEngine(3, 2*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()

	s, _ := e.NewSemaphore("exports", 2)
	a, _ := s.TryAcquire(ctx, 10*time.Second)
	b, _ := s.TryAcquire(ctx, 10*time.Second)
	_, err = s.TryAcquire(ctx, 10*time.Second)
	fmt.Println("third refused:", errors.Is(err, engine.ErrNotAcquired))
	a.Unlock(ctx)
	c, err := s.TryAcquire(ctx, 10*time.Second)
	fmt.Println("after an Unlock:", err == nil, c.Key() == a.Key())
	b.Unlock(ctx)
	c.Unlock(ctx)
	// Output:
	// third refused: true
	// after an Unlock: true true
}

// Any number of readers, or one writer.
func ExampleEngine_NewRWLock() {
	ctx := context.Background()
	e, stop, err := exampleEngine(3, 2*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()

	rw, _ := e.NewRWLock("catalog")
	r1, err := rw.TryRLock(ctx, 10*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	r2, err := rw.TryRLock(ctx, 10*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("two readers: true")
	_, err = rw.TryLock(ctx, 10*time.Second)
	fmt.Println("writer refused while they read:", errors.Is(err, engine.ErrNotAcquired))
	h, _ := e.Holder(ctx, "catalog")
	fmt.Println("held for reading by", h.Readers)
	r1.Unlock(ctx)
	r2.Unlock(ctx)
	w, err := rw.TryLock(ctx, 10*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("writer after them: true")
	h, _ = e.Holder(ctx, "catalog")
	fmt.Println("held by the writer:", h.Token == w.Token())
	w.Unlock(ctx)
	// Output:
	// two readers: true
	// writer refused while they read: true
	// held for reading by 2
	// writer after them: true
	// held by the writer: true
}

// LockAll takes several keys, all or none, in an order every caller
// shares; Holder tells who holds a key.
func ExampleEngine_LockAll() {
	ctx := context.Background()
	e, stop, err := exampleEngine(3, 2*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()

	s, err := e.LockAll(ctx, []string{"stock:b", "stock:a"}, 10*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, l := range s.Locks() {
		h, _ := e.Holder(ctx, l.Key())
		fmt.Println(l.Key(), "held by its token:", h.Token == l.Token())
	}
	fmt.Println("released:", s.Unlock(ctx) == nil)
	h, _ := e.Holder(ctx, "stock:a")
	fmt.Printf("holder now: %q\n", h.Token)
	// Output:
	// stock:a held by its token: true
	// stock:b held by its token: true
	// released: true
	// holder now: ""
}

// An election: Campaign returns once the caller leads, with a term that
// grows from one leader to the next (pass it to the storage the leader
// writes to); Leader reads the current leader by quorum.
func ExampleElection() {
	ctx := context.Background()
	e, stop, err := exampleEngine(3, 2*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()

	el, _ := e.NewElection("scheduler", 10*time.Second)
	a, _ := el.Campaign(ctx, "host-a:8080")
	l, _ := el.Leader(ctx)
	fmt.Println("leader:", l.Value, "term matches:", l.Term == a.Term())

	_, err = el.TryCampaign(ctx, "host-b:8080")
	fmt.Println("a second campaign waits:", errors.Is(err, engine.ErrNotAcquired))

	a.Proclaim(ctx, "host-a:9090")
	l, _ = el.Leader(ctx)
	fmt.Println("proclaimed:", l.Value)

	a.Resign(ctx)
	b, _ := el.Campaign(ctx, "host-b:8080")
	fmt.Println("next term is higher:", b.Term() > a.Term())
	b.Resign(ctx)
	// Output:
	// leader: host-a:8080 term matches: true
	// a second campaign waits: true
	// proclaimed: host-a:9090
	// next term is higher: true
}

// A fair lock hands the key to its waiters in the order they arrived,
// whichever process they are in; TryLock does not jump the queue.
func ExampleEngine_NewFairLock() {
	ctx := context.Background()
	e, stop, err := exampleEngine(3, 2*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()

	fl, _ := e.NewFairLock("reports", 5*time.Second)
	holder, _ := fl.TryLock(ctx, 10*time.Second)
	got := make(chan *engine.Lock)
	go func() {
		l, _ := fl.Lock(ctx, 10*time.Second, engine.WithRetryDelay(20*time.Millisecond))
		got <- l
	}()
	time.Sleep(100 * time.Millisecond) // the waiter is queued
	holder.Unlock(ctx)
	_, err = fl.TryLock(ctx, 10*time.Second)
	fmt.Println("a try after the release is refused:", errors.Is(err, engine.ErrNotAcquired))
	l := <-got
	fmt.Println("the queued waiter got it:", l.Valid())
	l.Unlock(ctx)
	// Output:
	// a try after the release is refused: true
	// the queued waiter got it: true
}
