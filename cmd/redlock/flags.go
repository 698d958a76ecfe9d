//go:build unix

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/members"
)

// newFlagSet returns a FlagSet that prints nothing itself: run prints a
// parse error once, and -h prints the command's help to stdout.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parseFlags parses args into fs. With -h it prints help (a description
// with an example) and the flags to stdout and returns flag.ErrHelp. It
// refuses positional arguments, and zero or negative values of the flags
// named in positive when they are given.
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer, help string, positive ...string) error {
	return parseFlagsArgs(fs, args, nil, stdout, help, positive...)
}

// parseFlagsArgs is parseFlags for a command that takes exactly
// len(names) positional arguments after its flags (fs.Args()); names are
// as the help writes them ("KEY"), for the error that says which one is
// missing.
func parseFlagsArgs(fs *flag.FlagSet, args []string, names []string, stdout io.Writer, help string, positive ...string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, help)
			fmt.Fprintln(stdout, "\nFlags:")
			printFlags(stdout, fs)
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > len(names) {
		return usageError{extraArgsError(fs.Args()[len(names):])}
	}
	if fs.NArg() < len(names) {
		return usageError{fmt.Errorf("%s is missing", names[fs.NArg()])}
	}
	var bad error
	fs.Visit(func(f *flag.Flag) {
		for _, name := range positive {
			if f.Name != name || bad != nil {
				continue
			}
			switch v := f.Value.(type) {
			case *durationValue:
				if *v.p <= 0 {
					bad = fmt.Errorf("--%s must be a positive duration (like 30s or 250ms), got %v", name, *v.p)
				}
			default:
				if n, err := strconv.ParseFloat(f.Value.String(), 64); err == nil && n <= 0 {
					bad = fmt.Errorf("--%s must be positive, got %s", name, f.Value)
				}
			}
		}
	})
	if bad != nil {
		return usageError{bad}
	}
	return nil
}

// durationValue is a duration flag whose parse error says what it wants.
type durationValue struct{ p *time.Duration }

func (d *durationValue) String() string {
	if d.p == nil {
		return "0s"
	}
	return d.p.String()
}

func (d *durationValue) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration with a unit, like 30s, 250ms or 1m")
	}
	if v < 0 {
		return fmt.Errorf("must not be negative")
	}
	*d.p = v
	return nil
}

// durationVar defines a duration flag (see durationValue).
func durationVar(fs *flag.FlagSet, p *time.Duration, name string, def time.Duration, usage string) {
	*p = def
	fs.Var(&durationValue{p}, name, usage)
}

// helpWidth is the width that help fits: a terminal's 80 columns.
const helpWidth = 80

// usageIndent starts the lines of a flag's usage under its name.
const usageIndent = "        "

// printFlags writes fs's flags to w as flag.PrintDefaults does — a line
// "  -name arg", then the usage, then its default — but with the usage
// wrapped to helpWidth columns and indented with spaces (a tab's width
// depends on the terminal), and one note on the durations' units
// instead of one per duration flag.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	durations := false
	fs.VisitAll(func(f *flag.Flag) {
		arg, usage := flagArg(f)
		if _, ok := f.Value.(*durationValue); ok {
			durations = true
		}
		line := "  -" + f.Name
		if arg != "" {
			line += " " + arg
		}
		if def := defaultText(f); def != "" {
			usage += " (default " + def + ")"
		}
		fmt.Fprintln(w, line)
		for _, l := range wrapWords(usage, helpWidth-len(usageIndent)) {
			fmt.Fprintln(w, usageIndent+l)
		}
	})
	if durations {
		fmt.Fprintln(w, "\nA duration takes a unit: 250ms, 30s, 5m, 1h.")
	}
}

// flagArg returns the name of f's argument as help shows it ("" for a
// boolean flag) and its usage without the back quotes that name it
// (flag.UnquoteUsage; "duration" for a durationValue).
func flagArg(f *flag.Flag) (arg, usage string) {
	arg, usage = flag.UnquoteUsage(f)
	if _, ok := f.Value.(*durationValue); ok && !strings.Contains(f.Usage, "`") {
		arg = "duration"
	}
	return arg, usage
}

// defaultText is f's default as help shows it: "" for a zero value,
// quoted for a string.
func defaultText(f *flag.Flag) string {
	switch f.DefValue {
	case "", "0", "0s", "false":
		return ""
	}
	if g, ok := f.Value.(flag.Getter); ok {
		if _, ok := g.Get().(string); ok {
			return strconv.Quote(f.DefValue)
		}
	}
	return f.DefValue
}

// wrapWords breaks s at spaces into lines of at most width runes; a word
// longer than width stays whole on a line of its own.
func wrapWords(s string, width int) []string {
	var lines []string
	var line string
	for _, word := range strings.Fields(s) {
		switch {
		case line == "":
			line = word
		case utf8.RuneCountInString(line)+1+utf8.RuneCountInString(word) > width:
			lines = append(lines, line)
			line = word
		default:
			line += " " + word
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// checkAddrs validates the host:port list of flag name: syntax, port
// range, and two entries that resolve to the same address (one server
// would vote twice). A Redis Cluster member (cluster:host:port+…) is
// checked seed by seed. Names are resolved with a short timeout.
func checkAddrs(name string, addrs []string) error {
	standalone, clusters, err := members.Parse(addrs)
	if err != nil {
		return usageError{fmt.Errorf("--%s: %w", name, err)}
	}
	flat := members.Nodes(standalone, clusters)
	seen := map[string]string{}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	for _, a := range flat {
		host, port, err := net.SplitHostPort(a)
		if err != nil || host == "" {
			return usageError{fmt.Errorf("--%s: %q is not host:port", name, a)}
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return usageError{fmt.Errorf("--%s: %q: port must be a number from 1 to 65535", name, a)}
		}
		ips, err := net.DefaultResolver.LookupHost(ctx, host)
		if err != nil {
			return usageError{fmt.Errorf("--%s: %q: cannot resolve %s: %v", name, a, host, err)}
		}
		for _, ip := range ips {
			key := net.JoinHostPort(ip, port)
			if prev, ok := seen[key]; ok {
				if prev == a {
					return usageError{fmt.Errorf("--%s: %s is listed twice", name, a)}
				}
				return usageError{fmt.Errorf("--%s: %s and %s are the same server (%s): it would vote twice", name, prev, a, key)}
			}
			seen[key] = a
		}
	}
	return nil
}

// credentialsHint is what to do when the masters refuse the credentials.
const credentialsHint = "set the masters' password with --master-password, --master-password-file or $" + envPassword +
	", and the user with --master-user for an ACL user"

// flagNames name the engine's settings in its errors by the flags that
// set them: a command's messages never name a library field.
var flagNames = engine.Names{MaxTTL: "--max-ttl", FreshMasters: "--fresh-masters", MasterTimeout: "--master-timeout"}

// logQuarantine warns, at start, when masters in restart quarantine keep a
// quorum from voting: when a quorum will, and what else can be done.
func logQuarantine(log *slog.Logger, e *engine.Engine) {
	at, hint := e.QuarantineOutlook()
	if at.IsZero() {
		return
	}
	attrs := []any{"votes_at", at.UTC().Format(time.RFC3339), "in", time.Until(at).Round(time.Second)}
	if hint != "" {
		attrs = append(attrs, "hint", hint)
	}
	log.Warn("masters in restart quarantine (they may have lost locks): locks are refused until a quorum of them votes", attrs...)
}

// extraArgsError reports positional arguments beyond those a command
// takes (a command can say more: redlock lock's missing "--").
type extraArgsError []string

func (e extraArgsError) Error() string {
	return fmt.Sprintf("unexpected arguments: %q (flags go before the arguments)", []string(e))
}

// topologyWarning says what is weak about a group of n masters ("" if
// nothing).
func topologyWarning(n int) string {
	q := n/2 + 1
	switch {
	case q == 1:
		return "one master: quorum 1, no fault tolerance (use 5 independent masters, or at least 3)"
	case n < 3:
		return fmt.Sprintf("%d masters: quorum %d, no master may fail (use 5, or at least 3)", n, q)
	case n%2 == 0:
		return fmt.Sprintf("%d masters tolerate %s, no more than %d would: the extra master adds a failure point, "+
			"not tolerance (use an odd number)", n, plural(n-q, "failed master"), n-1)
	}
	return ""
}

// plural writes n and word, with an s unless n is 1 ("1 failed master",
// "2 failed masters").
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// cleanError drops the package prefixes that wrapping repeats
// ("bench: engine: invalid argument: ..." → "invalid argument: ..."): the
// command's own prefix is the only one shown.
func cleanError(err error) string {
	msg := err.Error()
	for _, p := range []string{"bench: ", "proxy: ", "engine: ", "conn: ", "resp: "} {
		msg = strings.ReplaceAll(msg, ": "+p, ": ")
		msg = strings.ReplaceAll(msg, "\n"+p, "\n")
		for strings.HasPrefix(msg, p) {
			msg = strings.TrimPrefix(msg, p)
		}
	}
	return msg
}
