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

// TestHolderReadersCannotTell: Holder answers "free", or a count of
// readers, only when the answers decide it (found by the review of the
// readers' read):
//   - a master with more unexpired readers than the read returns (1,024):
//     a reader every master holds was cut off behind a minority's
//     leftovers, and the key read "free" while every writer was refused;
//   - a reader short of a quorum that the silent masters could complete,
//     beside one a quorum holds: it was dropped, and Remaining was the
//     other's;
//   - a key whose value is "" (SET NX refuses it): it read "free".
//
// Each is ErrUnavailable. A reader scored +inf is held with no expiry, and
// a readers key of another type is no readers.
func TestHolderReadersCannotTell(t *testing.T) {
	v := newEnv(t, 5, functional)
	ctx := context.Background()
	rw, _ := v.e.NewRWLock("hc:many")
	r, err := rw.TryRLock(ctx, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	for i := range 5 {
		args := []string{"ZADD", "hc:many:readers"}
		for j := range 1024 {
			args = append(args, fmt.Sprint(now+20000), fmt.Sprintf("leftover-%d-%d", i, j))
		}
		v.mustExec(i, args...)
	}
	if _, err := v.e.Holder(ctx, "hc:many"); !errors.Is(err, engine.ErrUnavailable) {
		t.Fatalf("1,025 readers on each master: %v; want ErrUnavailable (too many to tell)", err)
	}
	for i := range 5 {
		v.mustExec(i, "ZREMRANGEBYRANK", "hc:many:readers", "0", "1")
	}
	if h, err := v.e.Holder(ctx, "hc:many"); err != nil || h.Readers != 1 || h.Remaining < 25*time.Second {
		t.Fatalf("1,023 readers on each master, one held by all: %+v, %v; want Readers 1, its 30s", h, err)
	}
	r.Unlock(ctx)

	now = time.Now().UnixMilli()
	for i := range 5 {
		v.mustExec(i, "ZADD", "hc:und:readers", fmt.Sprint(now+2000), "short")
		if i < 3 {
			v.mustExec(i, "ZADD", "hc:und:readers", fmt.Sprint(now+30000), "long")
		}
		v.mustExec(i, "SET", "hc:empty", "", "PX", "30000")
		v.mustExec(i, "ZADD", "hc:inf:readers", "+inf", "forever")
		v.mustExec(i, "SET", "hc:typ", "tok", "PX", "30000")
		v.mustExec(i, "SET", "hc:typ:readers", "not a set")
	}
	if h, err := v.e.Holder(ctx, "hc:inf"); err != nil || h.Readers != 1 || h.Remaining != engine.NoExpiry {
		t.Fatalf("a reader scored +inf: %+v, %v; want Readers 1, NoExpiry", h, err)
	}
	if h, err := v.e.Holder(ctx, "hc:typ"); err != nil || h.Token != "tok" {
		t.Fatalf("a string at :readers: %+v, %v; want the key's token", h, err)
	}
	if _, err := v.e.TryLock(ctx, "hc:empty", time.Second); !errors.Is(err, engine.ErrNotAcquired) {
		t.Fatalf("TryLock of the empty value's key: %v; want refused", err)
	}
	if h, err := v.e.Holder(ctx, "hc:empty"); !errors.Is(err, engine.ErrUnavailable) {
		t.Fatalf("an empty value on every master: %+v, %v; want ErrUnavailable", h, err)
	}
	v.pause(2)
	if h, err := v.e.Holder(ctx, "hc:und"); !errors.Is(err, engine.ErrUnavailable) {
		t.Fatalf("a reader on 2 answering masters and the paused one, beside one on all: %+v, %v; want ErrUnavailable", h, err)
	}
}

// TestElectionEmptyValueCannotTell: an election's key holding the empty
// value (no campaign can take it) is no answer, as it is to Holder:
// Leader says ErrUnavailable, not ErrNoLeader (found by the review of the
// readers' read, which made Holder's "" mean "nothing held").
func TestElectionEmptyValueCannotTell(t *testing.T) {
	v := newEnv(t, 3, functional)
	for i := range 3 {
		v.mustExec(i, "SET", "ev:election", "", "PX", "30000")
	}
	el, err := v.e.NewElection("ev:election", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if ld, err := el.Leader(context.Background()); !errors.Is(err, engine.ErrUnavailable) {
		t.Fatalf("Leader of an election whose key is empty on every master: %+v, %v; want ErrUnavailable", ld, err)
	}
}
