package conn_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/internal/test/check"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
)

// TestReplicationCheck: with OnReplicationID set, a server demoted and
// promoted again between two batches (REPLICAOF another server, then
// REPLICAOF NO ONE) is reported once, with its old and new replication
// ids, before the reply of the request sent in the batch that saw it; a
// flip followed by a dropped connection is reported by the next session's
// handshake, before that session serves; batches without a flip
// report nothing; and an ACL without +info is reported as refused.
func TestReplicationCheck(t *testing.T) {
	set := mastertest.Start(t, 2)
	mastertest.RequireReal(t, set)
	a, other := set.Masters()[0], set.Masters()[1]
	ctx := context.Background()
	admin, err := conn.Dial(ctx, a.Addr(), conn.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	// The replica's first sync without Redis's default 5 s wait for more
	// replicas to share a diskless transfer.
	if o, err := conn.Dial(ctx, other.Addr(), conn.Config{}); err != nil {
		t.Fatal(err)
	} else {
		_, err = o.Exec(ctx, "CONFIG", "SET", "repl-diskless-sync-delay", "0")
		o.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	info := func(field string) string {
		r, err := admin.Exec(ctx, "INFO", "replication")
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(r.Text(), "\r\n") {
			if v, ok := strings.CutPrefix(line, field+":"); ok {
				return v
			}
		}
		return ""
	}
	// flip makes a a replica of other until it has synced, then a master
	// again: a new replication id.
	flip := func() (before, after string) {
		before = info("master_replid")
		host, port, _ := strings.Cut(other.Addr(), ":")
		if _, err := admin.Exec(ctx, "REPLICAOF", host, port); err != nil {
			t.Fatal(err)
		}
		check.Eventually(t, 10*time.Second, "a synced as a replica", func() bool { return info("master_link_status") == "up" })
		if _, err := admin.Exec(ctx, "REPLICAOF", "NO", "ONE"); err != nil {
			t.Fatal(err)
		}
		after = info("master_replid")
		if after == before || info("role") != "master" {
			t.Fatalf("flip: replication id %s → %s, role %s", before, after, info("role"))
		}
		return before, after
	}

	log := &checkLog[conn.ReplicationChange]{name: "change"}
	c, err := conn.Dial(ctx, a.Addr(), conn.Config{OnReplicationID: log.report})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	do := func() {
		t.Helper()
		n := log.repliesSeen()
		if err := c.Do(conn.Request{Cmd: cmd("SET", "k", "v"), Callback: log, Deadline: time.Now().Add(5 * time.Second)}); err != nil {
			t.Fatal(err)
		}
		check.Eventually(t, 5*time.Second, "the reply", func() bool { return log.repliesSeen() > n })
	}
	do()
	do()
	if ch, _ := log.snapshot(); len(ch) != 0 {
		t.Fatalf("no flip, yet reported: %+v", ch)
	}

	from, to := flip()
	do()
	ch, ev := log.snapshot()
	if len(ch) != 1 || ch[0].From != from || ch[0].To != to || ch[0].Role != "master" || ch[0].Addr != a.Addr() {
		t.Fatalf("after a demotion and promotion between two batches: %+v; want one change %s → %s, role master", ch, from, to)
	}
	if got := strings.Join(ev[len(ev)-2:], " "); got != "change reply" {
		t.Fatalf("events %v: the change must come before the reply of the batch that saw it", ev)
	}
	do()
	if ch, _ := log.snapshot(); len(ch) != 1 {
		t.Fatalf("reported again without a flip: %+v", ch)
	}

	// The same, then the connection drops before another batch: the next
	// session's handshake reads it.
	from, to = flip()
	if _, err := admin.Exec(ctx, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"); err != nil {
		t.Fatal(err)
	}
	check.Eventually(t, 10*time.Second, "the change reported by the next session's handshake", func() bool {
		ch, _ := log.snapshot()
		return len(ch) == 2 && ch[1].From == from && ch[1].To == to
	})

	// An ACL without +info: the check is blind, and says so.
	if _, err := admin.Exec(ctx, "ACL", "SETUSER", "noinfo", "on", ">pw", "~*", "&*", "+@all", "-info"); err != nil {
		t.Fatal(err)
	}
	blind := &checkLog[conn.ReplicationChange]{name: "change"}
	b, err := conn.Dial(ctx, a.Addr(), conn.Config{Username: "noinfo", Password: "pw", OnReplicationID: blind.report})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if ch, _ := blind.snapshot(); len(ch) != 1 || ch[0].Refused == nil {
		t.Fatalf("INFO refused by the ACL: %+v; want one report with Refused set", ch)
	}
}
