package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redlock-dev/redlock/engine"
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
	return parseFlagsArgs(fs, args, 0, stdout, help, positive...)
}

// parseFlagsArgs is parseFlags for a command that takes exactly nargs
// positional arguments after its flags (fs.Args()).
func parseFlagsArgs(fs *flag.FlagSet, args []string, nargs int, stdout io.Writer, help string, positive ...string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, help)
			fmt.Fprintln(stdout, "\nFlags:")
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > nargs {
		return usageError{fmt.Errorf("unexpected arguments: %q (flags go before the arguments)", fs.Args()[nargs:])}
	}
	if fs.NArg() < nargs {
		return usageError{fmt.Errorf("want %d argument(s) after the flags, got %d", nargs, fs.NArg())}
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
	fs.Var(&durationValue{p}, name, usage+" (a `duration` with a unit)")
}

// checkAddrs validates the host:port list of flag name: syntax, port
// range, and two entries that resolve to the same address (one server
// would vote twice). A Redis Cluster member (engine.ClusterPrefix) is
// checked seed by seed. Names are resolved with a short timeout.
func checkAddrs(name string, addrs []string) error {
	var flat []string
	for _, a := range addrs {
		rest, ok := strings.CutPrefix(a, engine.ClusterPrefix)
		if !ok {
			flat = append(flat, a)
			continue
		}
		seeds := strings.Split(rest, "+")
		for _, s := range seeds {
			if s == "" {
				return usageError{fmt.Errorf("--%s: %q: want %shost:port+host:port", name, a, engine.ClusterPrefix)}
			}
		}
		flat = append(flat, seeds...)
	}
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
		return fmt.Sprintf("%d masters tolerate %d failures, no more than %d would (use an odd number)", n, n-q, n-1)
	}
	return ""
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
