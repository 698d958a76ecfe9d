//go:build unix

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/members"
)

const holderHelp = `redlock holder: who holds a lock, or leads an election, as a quorum of
the masters says now (etcdctl elect -l, consul lock's holder read).

usage: redlock holder [flags] KEY
       redlock holder -n COUNT [flags] KEY
       redlock holder --leader [flags] NAME

It prints the holder's token and how long a quorum still holds the key
("KEY is free" when none does; a key a quorum holds without a TTL says
so, and --json's remaining_ms is then -1), or, for a read-write lock
held by readers, how many (--json: readers) and how long a quorum still
holds the last of them; with -n, the permits of redlock lock -n COUNT KEY
(KEY:permit:0 … KEY:permit:COUNT-1): how many are held, and each holder
(--json: permits, held_permits, holders); with --leader, the election's leader:
its value, its term (the fencing token its writes carry: $REDLOCK_TERM of
redlock lock --leader) and its token. A lock's fencing token is not kept
with its key: the holder has it ($REDLOCK_FENCING_TOKEN). The read is a
snapshot. Exit status: 0 when a quorum answered (held or free), 69 when
too few masters answered to tell, 65 when the key holds another type
(not a lock's key), 78 when the masters refuse the user, 2 for bad usage.
`

// holderCmd reads who holds KEY (or leads the election NAME).
func holderCmd(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("holder")
	var mf masterFlags
	mf.register(fs, "the Redis masters")
	var ec engine.Config
	leader := fs.Bool("leader", false, "read the leader of the election NAME (redlock lock --leader NAME)")
	permits := fs.Int("n", 1, "read the `count` permits of redlock lock -n COUNT KEY (KEY:permit:0 … KEY:permit:count-1; 1: the lock KEY itself)")
	jsonOut := fs.Bool("json", false, "print one JSON object")
	durationVar(fs, &ec.MaxTTL, "max-ttl", engine.DefaultMaxTTL, "as redlock lock's: a master that started less than this ago does not count (restart quarantine)")
	fs.BoolVar(&ec.FreshMasters, "fresh-masters", false, "the masters were just started empty (tests)")
	timeout := fs.Duration("timeout", 2*time.Second, "how long to wait for the masters' answers")
	if err := parseFlagsArgs(fs, args, []string{"KEY"}, stdout, holderHelp, "timeout", "max-ttl"); err != nil {
		return err
	}
	key := fs.Arg(0)
	if *permits < 1 || *permits > maxHolders {
		return usageError{fmt.Errorf("-n %d: want 1 to %d permits", *permits, maxHolders)}
	}
	if *permits > 1 && *leader {
		return usageError{errors.New("-n and --leader: an election has one leader")}
	}
	list := mf.list()
	if len(list) == 0 {
		return usageError{errors.New("--masters (or $" + envMasters + ") is required")}
	}
	if err := checkAddrs("masters", list); err != nil {
		return err
	}
	ec.Addrs, ec.Clusters, _ = members.Parse(list)
	if err := mf.apply(&ec.Conn); err != nil {
		return err
	}
	ec.Names = flagNames
	e, err := engine.New(ec)
	if err != nil {
		return usageError{err}
	}
	defer e.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	e.WaitReady(ctx)
	out := map[string]any{"key": key}
	var text string
	if *leader {
		el, err := e.NewElection(key, ec.MaxTTL)
		if err != nil {
			return usageError{err}
		}
		ld, err := el.Leader(ctx)
		if err != nil && !errors.Is(err, engine.ErrNoLeader) {
			return readExit(err)
		}
		out["leader"] = ld.Token != ""
		if ld.Token == "" {
			text = fmt.Sprintf("election %s has no leader", key)
		} else {
			out["value"], out["term"], out["token"], out["remaining_ms"] = ld.Value, ld.Term, ld.Token, remainingMs(ld.Remaining)
			text = fmt.Sprintf("election %s: leader %q, term %d, token %s, %s", key, ld.Value, ld.Term, shownToken(ld.Token), remainingText(ld.Remaining))
		}
	} else if *permits > 1 {
		var err error
		if text, err = readPermits(ctx, e, key, *permits, out); err != nil {
			return readExit(err)
		}
	} else {
		h, err := e.Holder(ctx, key)
		if err != nil {
			return readExit(err)
		}
		out["held"] = h.Held()
		switch {
		case h.Readers > 0:
			out["readers"], out["remaining_ms"] = h.Readers, remainingMs(h.Remaining)
			text = fmt.Sprintf("%s is held for reading by %s, %s", key, plural(h.Readers, "reader"), remainingText(h.Remaining))
		case h.Token == "":
			text = key + " is free"
		default:
			out["token"], out["remaining_ms"] = h.Token, remainingMs(h.Remaining)
			text = fmt.Sprintf("%s is held by token %s, %s", key, shownToken(h.Token), remainingText(h.Remaining))
		}
	}
	if *jsonOut {
		b, _ := json.Marshal(out)
		fmt.Fprintln(stdout, string(b))
	} else {
		fmt.Fprintln(stdout, text)
	}
	return nil
}

// readPermits reads the permits of a semaphore of n on key (redlock lock
// -n), all at once, into out; it returns the text to print, or the error
// of the first permit whose read could not tell.
func readPermits(ctx context.Context, e *engine.Engine, key string, n int, out map[string]any) (string, error) {
	hs := make([]engine.Holding, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { hs[i], errs[i] = e.Holder(ctx, permitKey(key, i)) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return "", fmt.Errorf("%s: %w", permitKey(key, i), err)
		}
	}
	var held []map[string]any
	var lines []string
	for i, h := range hs {
		switch {
		case h.Readers > 0: // an RWLock's on the permit's key: held all the same
			held = append(held, map[string]any{"permit_key": permitKey(key, i), "readers": h.Readers, "remaining_ms": remainingMs(h.Remaining)})
			lines = append(lines, fmt.Sprintf("\n  %s for reading by %s, %s", permitKey(key, i), plural(h.Readers, "reader"), remainingText(h.Remaining)))
		case h.Token != "":
			held = append(held, map[string]any{"permit_key": permitKey(key, i), "token": h.Token, "remaining_ms": remainingMs(h.Remaining)})
			lines = append(lines, fmt.Sprintf("\n  %s by token %s, %s", permitKey(key, i), shownToken(h.Token), remainingText(h.Remaining)))
		}
	}
	out["permits"], out["held"], out["held_permits"], out["holders"] = n, len(held) > 0, len(held), held
	if held == nil {
		out["holders"] = []map[string]any{}
	}
	return fmt.Sprintf("%s: %d of %d permits held", key, len(held), n) + strings.Join(lines, ""), nil
}

// permitKey is permit i's key of a semaphore on key (engine.Semaphore).
func permitKey(key string, i int) string { return key + ":permit:" + strconv.Itoa(i) }

// exitNotALock: holder's KEY holds another type on the masters (sysexits
// EX_DATAERR).
const exitNotALock = 65

// readExit is the exit of a quorum read that could not tell.
func readExit(err error) error {
	if errors.Is(err, engine.ErrMisconfigured) {
		return exitError{exitConfig, cleanError(err)}
	}
	if qe := (*engine.QuorumError)(nil); errors.As(err, &qe) {
		// Not unavailable when a quorum answered with a value no lock
		// writes there (a Redisson lock taken straight on Redis is a
		// hash; through the proxy it is a string holder reads).
		wrong := 0
		for _, me := range qe.Masters {
			if strings.Contains(me.Error(), "WRONGTYPE") {
				wrong++
			}
		}
		if wrong >= qe.Quorum {
			return exitError{exitNotALock, "not a lock's key: the masters hold another type there (WRONGTYPE; a Redisson lock taken directly on Redis is a hash): " + cleanError(err)}
		}
	}
	return exitError{exitUnavailable, cleanError(err)}
}

// shownToken is a token as holder prints it: as it is when printable
// ASCII without spaces (the engine's, a library's), else quoted — any
// client of the masters writes the value, and a newline or an escape
// sequence in it would forge lines or drive the terminal (found by the
// review of issue #46).
func shownToken(tok string) string {
	for i := 0; i < len(tok); i++ {
		if tok[i] <= ' ' || tok[i] > '~' {
			return strconv.Quote(tok)
		}
	}
	return tok
}

// remainingMs is a read's remaining time in JSON: milliseconds, -1 for a
// token held without a TTL (as PTTL).
func remainingMs(d time.Duration) int64 {
	if d == engine.NoExpiry {
		return -1
	}
	return d.Milliseconds()
}

// remainingText is a read's remaining time in text.
func remainingText(d time.Duration) string {
	if d == engine.NoExpiry {
		return "no TTL (held until deleted)"
	}
	return d.Round(time.Millisecond).String() + " left"
}
