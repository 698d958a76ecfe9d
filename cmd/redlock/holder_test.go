//go:build unix

package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
)

// TestHolder (issue #42): `redlock holder KEY` says who holds a lock and
// for how long, or that it is free; `--leader NAME` says an election's
// leader, its value and term; too few masters to tell is exit 69.
func TestHolder(t *testing.T) {
	set := mastertest.Start(t, 3)
	e, err := engine.New(engine.Config{Addrs: set.Addrs(), FreshMasters: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := e.TryLock(ctx, "holder:k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	el, _ := e.NewElection("holder:e", 10*time.Second)
	ld, err := el.Campaign(ctx, "node-7")
	if err != nil {
		t.Fatal(err)
	}
	defer ld.Resign(ctx)
	holder := func(args ...string) (int, string) {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"holder", "--masters", strings.Join(set.Addrs(), ","), "--fresh-masters"}, args...), &stdout, &stderr)
		return code, stdout.String() + stderr.String()
	}
	if code, out := holder("holder:k"); code != 0 || !strings.Contains(out, "holder:k is held by token "+l.Token()) {
		t.Errorf("held: exit %d %q", code, out)
	}
	if code, out := holder("holder:free"); code != 0 || !strings.Contains(out, "holder:free is free") {
		t.Errorf("free: exit %d %q", code, out)
	}
	want := fmt.Sprintf(`leader "node-7", term %d`, ld.Term())
	if code, out := holder("--leader", "holder:e"); code != 0 || !strings.Contains(out, want) {
		t.Errorf("--leader: exit %d %q; want %q", code, out, want)
	}
	if code, out := holder("--json", "holder:k"); code != 0 || !strings.Contains(out, `"held":true`) || !strings.Contains(out, l.Token()) {
		t.Errorf("--json: exit %d %q", code, out)
	}
	// A read-write lock held by readers is held, for reading (it was
	// "free", while every writer was refused).
	rw, _ := e.NewRWLock("holder:rw")
	for range 2 {
		if _, err := rw.TryRLock(ctx, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if code, out := holder("holder:rw"); code != 0 || !strings.Contains(out, "holder:rw is held for reading by 2 readers") {
		t.Errorf("read-locked: exit %d %q", code, out)
	}
	if code, out := holder("--json", "holder:rw"); code != 0 || !strings.Contains(out, `"held":true`) || !strings.Contains(out, `"readers":2`) {
		t.Errorf("read-locked, --json: exit %d %q", code, out)
	}
	// -n: the permits of redlock lock -n (the key itself is not held:
	// "free" said nothing of the permits).
	sem, _ := e.NewSemaphore("holder:sem", 3)
	p0, err := sem.TryAcquire(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	p1, err := sem.TryAcquire(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	code, out := holder("-n", "3", "holder:sem")
	if code != 0 || !strings.Contains(out, "holder:sem: 2 of 3 permits held") ||
		!strings.Contains(out, p0.Key()+" by token "+p0.Token()) || !strings.Contains(out, p1.Key()+" by token "+p1.Token()) {
		t.Errorf("-n 3: exit %d %q", code, out)
	}
	if code, out := holder("-n", "3", "--json", "holder:sem"); code != 0 || !strings.Contains(out, `"held":true`) || !strings.Contains(out, `"held_permits":2`) || !strings.Contains(out, `"permits":3`) || !strings.Contains(out, p1.Token()) {
		t.Errorf("-n 3 --json: exit %d %q", code, out)
	}
	// A permit's key held by an RWLock's readers is held (the review of
	// holder -n: it read as a free permit, as plain holder did not).
	free := "holder:sem:permit:0"
	for _, k := range []string{"holder:sem:permit:1", "holder:sem:permit:2"} {
		if free == p0.Key() || free == p1.Key() {
			free = k
		}
	}
	prw, _ := e.NewRWLock(free)
	if _, err := prw.TryRLock(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if code, out := holder("-n", "3", "holder:sem"); code != 0 || !strings.Contains(out, "3 of 3 permits held") || !strings.Contains(out, free+" for reading by 1 reader") {
		t.Errorf("-n 3, a permit read-locked: exit %d %q", code, out)
	}
	if code, out := holder("-n", "65", "holder:sem"); code != 2 {
		t.Errorf("-n 65: exit %d %q; want 2", code, out)
	}
	// A key a quorum holds without a TTL (written outside the engine, or
	// leaked) is held until deleted: said so, never a finite time left
	// (it read as --max-ttl left, every time).
	mc := dialMasters(t, set)
	for i, c := range mc {
		args := []string{"SET", "holder:nottl", "leaked-token"}
		if i == 2 {
			args = append(args, "PX", "60000")
		}
		if _, err := c.Exec(ctx, args...); err != nil {
			t.Fatal(err)
		}
	}
	if code, out := holder("--json", "holder:nottl"); code != 0 || !strings.Contains(out, `"remaining_ms":-1`) {
		t.Errorf("a key held without a TTL, --json: exit %d %q; want remaining_ms -1", code, out)
	}
	if code, out := holder("holder:nottl"); code != 0 || !strings.Contains(out, "no TTL") || strings.Contains(out, " left") {
		t.Errorf("a key held without a TTL: exit %d %q; want it said to have no TTL", code, out)
	}
	// A key of another type (a Redisson hash written straight to Redis) is
	// not a lock's key: said so, not "too few masters answered".
	for _, c := range mc {
		if _, err := c.Exec(ctx, "HSET", "holder:hash", "uuid:1", "1"); err != nil {
			t.Fatal(err)
		}
	}
	if code, out := holder("holder:hash"); code != exitNotALock || !strings.Contains(out, "not a lock's key") {
		t.Errorf("a hash: exit %d %q; want %d", code, out, exitNotALock)
	}
	for _, m := range set.Masters()[:2] {
		m.Kill()
	}
	if code, out := holder("--timeout", "300ms", "holder:k"); code != exitUnavailable {
		t.Errorf("2 of 3 masters down: exit %d %q; want %d", code, out, exitUnavailable)
	}
	if code, out := holder("--timeout", "300ms", "-n", "3", "holder:sem"); code != exitUnavailable || !strings.Contains(out, "holder:sem:permit:") {
		t.Errorf("-n 3, 2 of 3 masters down: exit %d %q; want %d naming a permit", code, out, exitUnavailable)
	}
}
