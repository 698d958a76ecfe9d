//go:build unix

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strings"

	"github.com/redlock-dev/redlock/bench"
	"github.com/redlock-dev/redlock/engine"
)

// benchHelp is the help of `redlock bench`; its note on the failed and
// errors columns is the one under the table (bench.CountsNote).
var benchHelp = `redlock bench: measure lock throughput and latency over N Redis masters.

usage: redlock bench [flags]

Starts 5 local masters (redis-server, or embedded ones when it is missing)
unless --masters is given, runs acquire+release cycles for --duration and
prints a table that fits 80 columns (--wide: every column). In the table,
` + strings.Join(wrapWords(bench.CountsNote+".", 75), "\n") + `

Examples:
  redlock bench
  redlock bench --masters 10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379 \
    --duration 30s
  redlock bench --compare redsync --ceiling --rounds 5 --json
`

// benchOptions is `redlock bench`'s configuration, read from its flags by
// [parseBenchFlags] and run by [runBench].
type benchOptions struct {
	// Config is what bench.Run gets; runBench sets Progress and Notice.
	bench.Config
	json  bool    // --json: a JSON line after the table
	quiet bool    // --quiet: no progress lines
	wide  bool    // --wide: every column
	plan  float64 // --plan: cores for this many cycles/s, from the run's costs
}

// benchCmd parses the bench flags and runs bench.Run. Errors from bad
// flags or values are usageErrors (exit code 2).
func benchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseBenchFlags(args, stdout)
	if err != nil {
		return err
	}
	return runBench(ctx, o, stdout, stderr)
}

// parseBenchFlags reads `redlock bench`'s flags into benchOptions (the
// environment is not read). It starts nothing and connects nowhere (it
// resolves the host names of --masters and --proxy); bench.Run validates
// the rest of the Config. Bad flags give a usageError; -h prints the help
// to stdout and gives flag.ErrHelp.
func parseBenchFlags(args []string, stdout io.Writer) (benchOptions, error) {
	fs := newFlagSet("bench")
	var o benchOptions
	cfg := &o.Config
	masters := fs.String("masters", "", "existing masters: comma-separated `host:port,...` (default: start local ones; $REDLOCK_MASTERS is not read, so a benchmark never loads a deployment by accident)")
	mf := masterFlags{flagsOnly: true}
	mf.registerAccess(fs)
	fs.IntVar(&cfg.N, "n", bench.DefaultMasters, "number of local masters to start")
	fs.StringVar(&cfg.Target, "target", bench.TargetEngine, "the `target` to measure: engine (embedded) or proxy (needs --proxy)")
	fs.StringVar(&cfg.ProxyAddr, "proxy", "", "the proxy's `host:port` for --target proxy")
	proxyPwd := fs.String("proxy-password", "", "`password` for the proxy's AUTH (or $"+envProxyPassword+", or --proxy-password-file)")
	proxyPwdFile := fs.String("proxy-password-file", "", "read the proxy's password from this `file` (trailing newline dropped)")
	proxyCA := fs.String("proxy-tls-ca", "", "connect to the proxy over TLS, trusting the CA certificates in this PEM `file`")
	durationVar(fs, &cfg.MaxTTL, "max-ttl", 0, "the engine's maximum TTL, and so the restart quarantine of masters younger than it (0: the larger of --ttl and 60s)")
	fs.StringVar(&cfg.Workload, "workload", bench.WorkloadCycle, "the `workload`: cycle (acquire+hold+release), acquire (acquire only, unique keys), contended (cycle on few keys); lock kinds, compared with --compare plain: reentrant (acquire, nested re-acquire, two unlocks), rw (read locks), semaphore (4 permits per key)")
	durationVar(fs, &cfg.Duration, "duration", bench.DefaultDuration, "duration of each measured phase")
	durationVar(fs, &cfg.Warmup, "warmup", 0, "load before each measured phase, not measured (0: none)")
	fs.IntVar(&cfg.Rounds, "rounds", 1, "split --duration into this many slices per target, run alternately with the --compare peers (evens out a drifting host)")
	fs.IntVar(&cfg.Concurrency, "concurrency", bench.DefaultConcurrency, "closed-loop workers; with --rate, the cap on operations in flight")
	fs.Float64Var(&cfg.Rate, "rate", 0, "open loop: start operations at this fixed rate, in `ops/s` (0: closed loop)")
	fs.IntVar(&cfg.Keys, "keys", 0, fmt.Sprintf("key space size, small = contention (when not given: %d; %d for --workload contended)", bench.DefaultKeys, bench.DefaultContendedKeys))
	durationVar(fs, &cfg.TTL, "ttl", bench.DefaultTTL, "lock TTL")
	durationVar(fs, &cfg.Hold, "hold", 0, "time each lock is held before release (0: release at once)")
	fs.IntVar(&cfg.MergeMax, "merge-max", 0, "releases/extensions per master merged into one script call when queued together (0: engine default 32; -1: never)")
	durationVar(fs, &cfg.MasterTimeout, "master-timeout", 0, "engine per-master timeout (0: max(5ms, min(50ms, ttl/100)); 1s with embedded masters)")
	fs.IntVar(&cfg.ConnsPerMaster, "conns", 1, "engine connections per master (proxy target: connections to the proxy)")
	fs.BoolVar(&cfg.DisableClockCheck, "no-clock-check", false, "turn the engine's clock check off (no TIME per write batch): to measure its cost")
	fs.BoolVar(&cfg.FreshMasters, "fresh-masters", false, "--masters were just started empty and serve no other client: they vote from their first session (otherwise a master younger than the restart quarantine, 60s, does not)")
	compare := fs.String("compare", "", "comma-separated `peers` to measure in the same run: redsync, rueidis (Redlock written on rueidis clients), fencing (the engine taking fencing tokens), nomerge (one script call per release: --merge-max -1, no native commands), engine with --target proxy, plain (the plain lock) with a lock-kind --workload")
	fs.BoolVar(&cfg.Ceiling, "ceiling", false, "also measure the masters' pipelined ceiling (SET NX PX + release EVALSHA)")
	sweep := fs.String("sweep", "", "repeat the run per value of `var=v1,v2,...`: concurrency=1,16,64, masters=3,5,7, or rate=20000,40000,80000 (open loop: the overload curve, offered load against goodput and p99)")
	fs.BoolVar(&cfg.Embedded, "embedded", false, "use embedded in-process masters even if redis-server exists")
	fs.StringVar(&cfg.CPUProfile, "cpuprofile", "", "write a CPU profile of the target's measured phase (not the warm-ups, --compare peers or --ceiling) to this `file` and print its top functions")
	fs.StringVar(&cfg.MemProfile, "memprofile", "", "write a heap profile at the end of the run to this `file`")
	fs.StringVar(&cfg.MutexProfile, "mutexprofile", "", "write a mutex contention profile to this `file`")
	fs.StringVar(&cfg.BlockProfile, "blockprofile", "", "write a goroutine blocking profile to this `file`")
	fs.StringVar(&cfg.MetricsAddr, "metrics-addr", "", "serve the engine's Prometheus metrics at http://`addr`/metrics during the run")
	fs.StringVar(&cfg.PprofAddr, "pprof-addr", "", "serve net/http/pprof at http://`addr`/debug/pprof/ during the run (e.g. localhost:6060)")
	fs.StringVar(&cfg.ReportDir, "report", "", "write index.html, result.json and the profiles into directory `dir`")
	fs.BoolVar(&o.json, "json", false, "print one JSON object as the last stdout line")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress lines on stderr")
	fs.BoolVar(&o.wide, "wide", false, "print every column (the default table fits 80 columns)")
	fs.Float64Var(&o.plan, "plan", 0, "after the run, print the client, master and proxy cores (and cluster shards) a `rate` of cycles/s needs, from the CPU per cycle measured (docs/operations.md, Sizing)")
	if err := parseFlags(fs, args, stdout, benchHelp, "n", "duration", "rounds", "concurrency", "keys", "ttl", "conns"); err != nil {
		return benchOptions{}, err
	}
	if o.plan < 0 || math.IsNaN(o.plan) || math.IsInf(o.plan, 0) {
		return benchOptions{}, usageError{fmt.Errorf("--plan: a rate in cycles/s, got %g", o.plan)}
	}
	if *masters != "" {
		cfg.Masters = splitList(*masters)
		if len(cfg.Masters) == 0 {
			return benchOptions{}, usageError{errors.New("--masters: no address given")}
		}
		if err := checkAddrs("masters", cfg.Masters); err != nil {
			return benchOptions{}, err
		}
	}
	if len(cfg.Masters) > 0 {
		if err := mf.apply(&cfg.MasterConn); err != nil {
			return benchOptions{}, err
		}
	} else {
		var set string
		fs.Visit(func(f *flag.Flag) {
			if strings.HasPrefix(f.Name, "master-") && f.Name != "master-timeout" {
				set = f.Name
			}
		})
		if set != "" {
			return benchOptions{}, usageError{fmt.Errorf("--%s applies to --masters; the local masters need none", set)}
		}
	}
	if cfg.ProxyAddr != "" {
		if err := checkAddrs("proxy", []string{cfg.ProxyAddr}); err != nil {
			return benchOptions{}, err
		}
		switch {
		case *proxyPwd != "" && *proxyPwdFile != "":
			return benchOptions{}, usageError{errors.New("--proxy-password and --proxy-password-file are exclusive")}
		case *proxyPwdFile != "":
			pw, err := readSecret(*proxyPwdFile)
			if err != nil {
				return benchOptions{}, usageError{fmt.Errorf("--proxy-password-file: %w", err)}
			}
			cfg.ProxyConn.Password = pw
		default:
			cfg.ProxyConn.Password = firstNonEmpty(*proxyPwd, os.Getenv(envProxyPassword))
		}
		if *proxyCA != "" {
			tc, err := clientTLS("proxy-tls-ca", *proxyCA, "", "")
			if err != nil {
				return benchOptions{}, err
			}
			cfg.ProxyConn.TLS = tc
		}
	} else if *proxyPwd != "" || *proxyPwdFile != "" || *proxyCA != "" {
		return benchOptions{}, usageError{errors.New("--proxy-password, --proxy-password-file and --proxy-tls-ca go with --proxy")}
	}
	if *compare != "" {
		for _, p := range strings.Split(*compare, ",") {
			cfg.Compare = append(cfg.Compare, strings.TrimSpace(p))
		}
	}
	if *sweep != "" {
		v, vals, err := bench.ParseSweep(*sweep)
		if err != nil {
			return benchOptions{}, usageError{err}
		}
		cfg.SweepVar, cfg.SweepValues = v, vals
	}
	cfg.Args = append([]string{"redlock", "bench"}, redactArgs(args, "master-password", "proxy-password")...)
	return o, nil
}

// runBench runs the benchmark o describes and prints its table (and JSON
// line) to stdout; progress and notices go to stderr.
func runBench(ctx context.Context, o benchOptions, stdout, stderr io.Writer) error {
	cfg := o.Config
	n := cfg.N
	if len(cfg.Masters) > 0 {
		n = len(cfg.Masters)
	}
	if w := topologyWarning(n); w != "" && cfg.Target != bench.TargetProxy {
		fmt.Fprintf(stderr, "redlock bench: warning: %s\n", w)
	}
	if !o.quiet {
		cfg.Progress = stderr
	}
	cfg.Notice, cfg.Names = stderr, flagNames
	res, err := bench.Run(ctx, cfg)
	if errors.Is(err, bench.ErrBadConfig) {
		return usageError{err}
	}
	if errors.Is(err, engine.ErrUnavailable) && len(cfg.Masters) > 0 {
		return usageError{fmt.Errorf("--masters: %w", err)} // the given masters cannot be reached
	}
	if err != nil {
		return err
	}
	if res.Interrupted {
		fmt.Fprintln(stderr, "redlock bench: interrupted; results so far:")
	}
	write := res.WriteTable
	if o.wide {
		write = res.WriteWideTable
	}
	if err := write(stdout); err != nil {
		return err
	}
	if o.plan != 0 {
		pl, err := bench.PlanFor(o.plan, res.Phase, res.Masters, res.MasterNodes)
		if err != nil {
			return err
		}
		res.Plan = &pl
		if err := pl.Write(stdout); err != nil {
			return err
		}
	}
	if cfg.ReportDir != "" {
		fmt.Fprintf(stderr, "redlock bench: report written to %s/index.html\n", cfg.ReportDir)
	}
	if o.json {
		b, err := json.Marshal(res)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, string(b))
	}
	return nil
}
