//go:build unix

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/inspect"
	"github.com/redlock-dev/redlock/internal/members"
)

// Exit codes of `redlock inspect`.
const (
	// exitFindings: anomalies found (on what could be read).
	exitFindings = 3
	// exitIncomplete: no anomalies found, but not every master was read
	// whole (unreachable, a refused command or key, a timeout, a stop at
	// --max-keys): "no anomalies" would speak for keys nobody looked at.
	exitIncomplete = 4
)

const inspectHelp = `redlock inspect: find leaked and broken locks on the masters.

usage: redlock inspect [flags]

Scans every master with SCAN (never KEYS) and reports lock keys that
  - have no TTL (leaked: they never expire),
  - are held on fewer than a quorum of masters (the leftovers of a failed
    acquisition, or a lock that lost its quorum; a key expiring right now
    can look like this: the PTTLs are shown),
  - hold different tokens on different masters.
It only reads (SCAN, GETRANGE of a value's first 1 KiB, PTTL: the masters'
ACL user needs them, docs/operations.md#security). Exit status:
  0  every master read whole, nothing found
  3  anomalies found
  4  nothing found, but not every master was read whole: one could not
     be reached, timed out or refused a command or key, or --max-keys
     was reached (the cause is printed; --json: "fully_read" per master)
  2  bad usage;  1  other errors

Examples:
  redlock inspect --masters 10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379 \
    --match 'lock:*'
  REDLOCK_MASTERS=... redlock inspect --json | jq '.findings[].key'
`

// inspectCmd runs `redlock inspect`.
func inspectCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("inspect")
	var mf masterFlags
	mf.register(fs, "the Redis masters")
	var o inspect.Options
	fs.StringVar(&o.Match, "match", inspect.DefaultMatch, "SCAN MATCH `pattern` of the lock keys (e.g. 'lock:*')")
	fs.IntVar(&o.Count, "count", inspect.DefaultCount, "SCAN COUNT hint: keys per page")
	fs.IntVar(&o.MaxKeys, "max-keys", inspect.DefaultMaxKeys, "stop after looking up this many distinct keys")
	durationVar(fs, &o.Timeout, "timeout", inspect.DefaultTimeout, "per-master timeout of one request (a SCAN page, or one page's lookups)")
	fenceKey := fs.String("fence-key", engine.DefaultFenceKey, "the fencing counter `key` (no TTL by design: not reported)")
	exclude := fs.String("exclude", "", "comma-separated `keys` not to report")
	jsonOut := fs.Bool("json", false, "print the report as one JSON object")
	if err := parseFlags(fs, args, stdout, inspectHelp, "count", "max-keys", "timeout"); err != nil {
		return err
	}
	addrs := mf.list()
	if len(addrs) == 0 {
		return usageError{errors.New("--masters (or $" + envMasters + ") is required")}
	}
	if err := checkAddrs("masters", addrs); err != nil {
		return err
	}
	if members.HasCluster(addrs) {
		return usageError{errors.New("--masters: inspect does not scan Redis Cluster members yet")}
	}
	var cc conn.Config
	if err := mf.apply(&cc); err != nil {
		return err
	}
	cc.DialTimeout = 5 * time.Second
	o.Exclude = append(splitList(*exclude), *fenceKey)
	rep, err := inspect.Run(ctx, addrs, cc, o)
	if errors.Is(err, inspect.ErrBadOption) {
		return usageError{err}
	}
	if err != nil && (rep == nil || !errors.Is(err, inspect.ErrAllMastersFailed)) {
		return err
	}
	if *jsonOut {
		b, err := json.Marshal(rep)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, string(b))
	} else if err := rep.WriteText(stdout); err != nil {
		return err
	}
	switch {
	case len(rep.Findings) > 0:
		return exitError{exitFindings, ""}
	case !rep.Complete():
		return exitError{exitIncomplete, "incomplete: " + rep.Incomplete()}
	}
	return nil
}
