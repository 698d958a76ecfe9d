package proxy

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/proxy/internal/redisson"
)

// readEntry is an entry point that reports a lock's state — a quorum read
// — rather than granting: property (a) holds for it as for a grant (a
// master in restart quarantine may have lost the key: its "no key" is no
// answer), and TestGrantRule checks it in column (a) with the rows.
type readEntry struct {
	name   string
	method string // as ruleEntry.method: a proxy command, an engine method, a subcommand
	// of is the grant row whose hold it reads ("": the plain key readsKey
	// holds, taken with SET NX PX; readersKey: an RWLock's read lock).
	of string
	// read reads key through instance inst: refused is the answer "too
	// few masters to tell", text the reply for messages.
	read func(x *ruleRun, inst int, key, holder string) (refused bool, text string)
}

// readsKey is the plain lock the reads without a row of their own read.
const readsKey = "gr:a:{reads}"

// readersKey is an RWLock held by one reader, as the rows of the reads
// that see readers read it (of: readersKey).
const readersKey = "gr:a:{readers}"

// holdReaders takes readersKey's read lock through instance inst.
func holdReaders(t *testing.T, x *ruleRun, inst int, ttl time.Duration) {
	rw, err := x.eng(inst).NewRWLock(readersKey)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := opCtx()
	defer cancel()
	if _, err := rw.TryRLock(ctx, ttl); err != nil {
		t.Fatalf("%s: the reader: %v", readersKey, err)
	}
}

func readEntries() []readEntry {
	proxyRead := func(args ...string) func(x *ruleRun, inst int, key, holder string) (bool, string) {
		return func(x *ruleRun, inst int, key, holder string) (bool, string) {
			a := make([]string, len(args))
			for i, s := range args {
				switch s {
				case "KEY":
					s = key
				case "HOLDER":
					s = holder
				}
				a[i] = s
			}
			r := x.cmd(x.t, inst, a...)
			return strings.HasPrefix(r, "-ERR redlock proxy: unavailable"), r
		}
	}
	engineRead := func(err error, what string) (bool, string) {
		return errors.Is(err, engine.ErrUnavailable), what + ", " + errString(err)
	}
	tryLock := "" // Redisson's tryLock row: its hold is a hash whose field is the owner
	for _, rs := range redisson.Table {
		if rs.Kind == redisson.KindTryLock && tryLock == "" {
			tryLock = rs.Name
		}
	}
	return []readEntry{
		{name: "GET", method: "get", read: proxyRead("GET", "KEY")},
		{name: "EXISTS", method: "exists", read: proxyRead("EXISTS", "KEY")},
		{name: "PTTL", method: "pttl", read: proxyRead("PTTL", "KEY")},
		{name: "TTL", method: "ttl", read: proxyRead("TTL", "KEY")},
		{name: "bsm/redislock pttl", method: "LibTable", read: proxyRead("EVAL", scripts.Lib("bsm-redislock-v0.9.4-luaPTTL"), "1", "KEY", "HOLDER")},
		{name: "Redisson isHeldByThread", method: "hexists", of: tryLock, read: proxyRead("HEXISTS", "KEY", "HOLDER")},
		{name: "Redisson getHoldCount", method: "hget", of: tryLock, read: proxyRead("HGET", "KEY", "HOLDER")},
		{name: "Engine.Holder", method: "Engine.Holder", read: func(x *ruleRun, inst int, key, _ string) (bool, string) {
			ctx, cancel := opCtx()
			defer cancel()
			h, err := x.eng(inst).Holder(ctx, key)
			return engineRead(err, "token "+h.Token)
		}},
		// A key held by readers only is held: not "free" from the
		// quarantined masters' empty answers.
		{name: "Engine.Holder, read locks", method: "Engine.Holder", of: readersKey, read: func(x *ruleRun, inst int, key, _ string) (bool, string) {
			ctx, cancel := opCtx()
			defer cancel()
			h, err := x.eng(inst).Holder(ctx, key)
			return engineRead(err, fmt.Sprintf("%d readers", h.Readers))
		}},
		{name: "Election.Leader", method: "Election.Leader", of: "Election.Campaign", read: func(x *ruleRun, inst int, key, _ string) (bool, string) {
			el, err := x.eng(inst).NewElection(key, 5*time.Second)
			if err != nil {
				return false, err.Error()
			}
			ctx, cancel := opCtx()
			defer cancel()
			ld, err := el.Leader(ctx)
			return engineRead(err, "leader "+ld.Token)
		}},
		{name: "redlock holder", method: "holder", read: cliHolder()},
		{name: "redlock holder, read locks", method: "holder", of: readersKey, read: cliHolder()},
		// The permits of redlock lock -n 2 (the row's semaphore has one:
		// its permit 0 is the first of two).
		{name: "redlock holder -n", method: "holder", of: "Semaphore.TryAcquire", read: cliHolder("-n", "2")},
	}
}

// cliHolder reads key with `redlock holder` and flags: refused is its
// exit 69.
func cliHolder(flags ...string) func(x *ruleRun, inst int, key, _ string) (bool, string) {
	return func(x *ruleRun, inst int, key, _ string) (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		args := append([]string{"holder", "--masters", strings.Join(x.addrs[inst], ","), "--max-ttl", x.maxTTL.String()}, flags...)
		out, err := exec.CommandContext(ctx, x.cli, append(args, key)...).CombinedOutput()
		var ee *exec.ExitError
		return errors.As(err, &ee) && ee.ExitCode() == 69, errString(err) + ": " + string(out)
	}
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}

// checkReadsQuarantined is column (a) for the reads: with three of five
// masters restarted empty and in quarantine, and the hold each read reads
// kept on the other two, every read answers "too few masters to tell" —
// never "free" counted from the restarted masters' empty answers.
func checkReadsQuarantined(t *testing.T, x *ruleRun, holder string) {
	for _, r := range readEntries() {
		t.Run("read "+r.name, func(t *testing.T) {
			x.t = t
			key := readsKey
			switch r.of {
			case "":
			case readersKey:
				key = readersKey
			default:
				key = entryKey(ruleQuarantine, ruleEntry{name: r.of})
			}
			if refused, text := r.read(x, 0, key, holder); !refused {
				t.Errorf("read with 3 of 5 masters quarantined and the hold on the other two: %q; want the answer that too few masters answered", text)
			}
		})
	}
}
