package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/redlock-dev/redlock/bench"
)

func benchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg bench.Config
	masters := fs.String("masters", "", "comma-separated host:port of existing masters (default: start local ones)")
	fs.IntVar(&cfg.N, "n", bench.DefaultMasters, "number of local masters to start")
	fs.DurationVar(&cfg.Duration, "duration", bench.DefaultDuration, "duration of each measured phase")
	fs.IntVar(&cfg.Concurrency, "concurrency", bench.DefaultConcurrency, "closed-loop workers")
	fs.IntVar(&cfg.Keys, "keys", bench.DefaultKeys, "key space size (small = contention)")
	fs.DurationVar(&cfg.TTL, "ttl", bench.DefaultTTL, "lock TTL")
	fs.DurationVar(&cfg.Hold, "hold", 0, "time each lock is held before release")
	fs.IntVar(&cfg.ConnsPerMaster, "conns", 1, "engine connections per master")
	compare := fs.String("compare", "", "peers to measure in the same run: redsync")
	fs.BoolVar(&cfg.Ceiling, "ceiling", false, "also measure the masters' pipelined ceiling")
	fs.BoolVar(&cfg.Embedded, "embedded", false, "use embedded in-process masters even if redis-server exists")
	jsonOut := fs.Bool("json", false, "print one JSON object as the last stdout line")
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected arguments: %q", fs.Args())}
	}
	if *masters != "" {
		for _, m := range strings.Split(*masters, ",") {
			if m = strings.TrimSpace(m); m != "" {
				cfg.Masters = append(cfg.Masters, m)
			}
		}
	}
	if *compare != "" {
		cfg.Compare = strings.Split(*compare, ",")
	}
	if !*quiet {
		cfg.Progress = stderr
	}
	cfg.Notice = stderr
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	res, err := bench.Run(ctx, cfg)
	if errors.Is(err, bench.ErrBadConfig) {
		return usageError{err}
	}
	if err != nil {
		return err
	}
	if err := res.WriteTable(stdout); err != nil {
		return err
	}
	if *jsonOut {
		b, err := json.Marshal(res)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, string(b))
	}
	return nil
}
