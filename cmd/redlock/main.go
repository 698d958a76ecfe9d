//go:build unix

// Command redlock runs the redlock tools: `redlock lock` runs a command
// under a lock, `redlock proxy` serves Redis clients, `redlock inspect`
// finds broken locks, and `redlock bench` measures lock
// throughput and latency over N Redis masters.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"
)

const usage = `redlock: distributed locks over N independent Redis masters (Redlock).

usage: redlock <command> [flags]

commands:
  bench     run a lock load benchmark (on 5 local masters unless --masters)
  proxy     serve Redis clients, turning their locks into Redlock quorum
            locks (--masters required)
  lock      run a command while holding a lock:
            redlock lock KEY -- COMMAND [ARG...]
  inspect   find leaked (no TTL), minority and mismatched lock keys
  holder    who holds a lock, or leads an election (--leader), now
  version   print the version (also --version)

Run 'redlock <command> -h' for the command's flags.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one command and returns the process exit code: 0 on
// success, 1 on failure, 2 on bad usage.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	ctx, stop := signalContext()
	defer stop()
	var err error
	switch args[0] {
	case "bench":
		err = benchCmd(ctx, args[1:], stdout, stderr)
	case "proxy":
		err = proxyCmd(ctx, args[1:], stdout, stderr)
	case "lock":
		err = lockCmd(ctx, args[1:], stdout, stderr)
	case "inspect":
		err = inspectCmd(ctx, args[1:], stdout, stderr)
	case "holder":
		err = holderCmd(ctx, args[1:], stdout)
	case lockGuardCommand: // hidden: redlock lock's own guard (guard.go)
		err = lockGuardCmd(args[1:], stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, version())
		return 0
	default:
		fmt.Fprintf(stderr, "redlock: unknown command %q\n%s", args[0], usage)
		return 2
	}
	var ue usageError
	var xe exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &xe):
		if xe.msg != "" {
			fmt.Fprintf(stderr, "redlock %s: %s\n", args[0], xe.msg)
		}
		return xe.code
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "redlock %s: %s\nRun 'redlock %s -h' for the flags.\n", args[0], cleanError(err), args[0])
		return 2
	default:
		fmt.Fprintf(stderr, "redlock %s: %s\n", args[0], cleanError(err))
		return 1
	}
}

// usageError marks errors caused by bad flags (exit code 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// splitList splits a comma-separated flag value, dropping blanks
// ("a, b,,c" → [a b c]).
func splitList(v string) []string {
	var out []string
	for _, m := range strings.Split(v, ",") {
		if m = strings.TrimSpace(m); m != "" {
			out = append(out, m)
		}
	}
	return out
}

// version describes this build: module version, VCS revision and commit
// time, Go version. `go build` stamps the revision into the binary; `go
// run` stamps none, so then the revision is read from the source tree's
// git, when there is one, and marked as such.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "redlock (unknown version)"
	}
	v := "redlock " + bi.Main.Version
	var rev, at, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	from := ""
	if rev == "" {
		rev, at, dirty = sourceRevision()
		from = " (read from the source tree: this build carries no VCS stamp)"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev == "" {
		return v + " " + bi.GoVersion
	}
	v += " " + rev + dirty
	if at != "" {
		v += " " + at
	}
	return v + from + " " + bi.GoVersion
}

// sourceRevision reads the revision, commit time and dirtiness of the git
// tree this file was compiled from (a `go run` build): "" when that tree
// or git is not there.
func sourceRevision() (rev, at, dirty string) {
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return "", "", ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	git := func(args ...string) string {
		out, err := exec.CommandContext(ctx, "git", append([]string{"-C", filepath.Dir(file)}, args...)...).Output()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(out))
	}
	line := git("log", "-1", "--format=%H %cI")
	rev, at, _ = strings.Cut(line, " ")
	if rev == "" {
		return "", "", ""
	}
	if t, err := time.Parse(time.RFC3339, at); err == nil {
		at = t.UTC().Format(time.RFC3339)
	}
	if git("status", "--porcelain", "--untracked-files=no") != "" {
		dirty = "+dirty"
	}
	return rev, at, dirty
}

// signalCause is the cause of run's context when SIGINT or SIGTERM ended
// it (context.Cause).
type signalCause struct{ sig syscall.Signal }

func (c signalCause) Error() string { return "interrupted by " + c.sig.String() }

// signalContext is signal.NotifyContext for SIGINT and SIGTERM, with the
// signal kept as the context's cause (exit codes say which one came).
func signalContext() (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			cancel(signalCause{s.(syscall.Signal)})
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel(nil)
	}
}
