package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
)

// TestHolderSeesReaders: Holder reads an RWLock's readers with its key.
// A key held only by readers is held (for reading): Readers counts the
// read locks a quorum holds, Remaining how long a quorum still holds the
// last of them. Before, Holder read the writer's key alone, and `redlock
// holder` said "free" of a key that refused every writer.
func TestHolderSeesReaders(t *testing.T) {
	v := newEnv(t, 5, functional)
	ctx := context.Background()
	rw, err := v.e.NewRWLock("hr:key")
	if err != nil {
		t.Fatal(err)
	}
	r1, err := rw.TryRLock(ctx, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := rw.TryRLock(ctx, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	h, err := v.e.Holder(ctx, "hr:key")
	if err != nil || h.Token != "" || h.Readers != 2 || !h.Held() {
		t.Fatalf("two readers: %+v, %v; want Readers 2, no token", h, err)
	}
	if h.Remaining <= 2*time.Second || h.Remaining > 3*time.Second {
		t.Fatalf("two readers: remaining %v; want the longer reader's, in (2s, 3s]", h.Remaining)
	}
	if err := r1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if h, err := v.e.Holder(ctx, "hr:key"); err != nil || h.Readers != 1 || h.Remaining > 2*time.Second {
		t.Fatalf("one reader left: %+v, %v; want Readers 1, at most 2s", h, err)
	}
	if err := r2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if h, err := v.e.Holder(ctx, "hr:key"); err != nil || h.Held() {
		t.Fatalf("readers gone: %+v, %v; want free", h, err)
	}
	w, err := rw.TryLock(ctx, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if h, err := v.e.Holder(ctx, "hr:key"); err != nil || h.Token != w.Token() || h.Readers != 0 {
		t.Fatalf("writer: %+v, %v; want its token", h, err)
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	// Readers written on some masters only: a reader counts where a
	// quorum holds it unexpired, the key is free where even the masters
	// that did not answer could not make a quorum of any, and too few
	// answers to tell is ErrUnavailable.
	readers := func(key string, scores ...int64) {
		now := time.Now().UnixMilli()
		for i, s := range scores {
			v.mustExec(i, "DEL", key+":readers")
			if s != 0 {
				v.mustExec(i, "ZADD", key+":readers", fmt.Sprint(now+s), "reader-A")
				v.mustExec(i, "PEXPIRE", key+":readers", "10000")
			}
		}
	}
	readers("hr:split", 9000, 9000, 9000, 0, 0)
	if h, err := v.e.Holder(ctx, "hr:split"); err != nil || h.Readers != 1 {
		t.Fatalf("a reader on 3 of 5: %+v, %v; want Readers 1", h, err)
	}
	// Expired where its score passed (the master's clock): not counted.
	readers("hr:split", 9000, 9000, -1000, -1000, 0)
	if h, err := v.e.Holder(ctx, "hr:split"); err != nil || h.Held() {
		t.Fatalf("a reader unexpired on 2 of 5: %+v, %v; want free", h, err)
	}
	readers("hr:split", 9000, 9000, 0, 0, 0)
	v.pause(2, 3)
	_, err = v.e.Holder(ctx, "hr:split")
	if !errors.Is(err, engine.ErrUnavailable) {
		t.Fatalf("a reader on 2 answering masters, 2 silent: %v; want ErrUnavailable", err)
	}
	if qe := quorumError(t, err); qe.Answered != 3 || qe.Granted != 2 || len(qe.Masters) != 2 {
		t.Fatalf("answered %d granted %d, %d failed; want 3, 2, 2", qe.Answered, qe.Granted, len(qe.Masters))
	}
}
