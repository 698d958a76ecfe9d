//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/members"
)

// Exit codes of `redlock lock` other than the command's own status.
const (
	// exitUnavailable: too few masters (or the proxy) answered to take the
	// lock (sysexits EX_UNAVAILABLE).
	exitUnavailable = 69
	// exitNotAcquired: the key is held and --wait ran out (or was 0)
	// (sysexits EX_TEMPFAIL: try again later).
	exitNotAcquired = 75
	// exitLost: the lock was lost while the command ran (an extension
	// failed or the validity ran out); the command was terminated. Or it
	// ended before the command started, which was then not run.
	exitLost = 76
	// exitConfig: the masters (or the proxy) refused the credentials, or
	// a command, key or channel the lock needs (engine.ErrMisconfigured):
	// retrying cannot help until the configuration changes (sysexits
	// EX_CONFIG).
	exitConfig = 78
	// exitInterrupted: SIGINT before the command started (SIGTERM: 143,
	// 128 + the signal, as a shell reports it).
	exitInterrupted = 130
)

// interrupted is the exit of a redlock lock that a signal (ctx's cause)
// ended before the command started: 128 + the signal, what a shell
// reports for a process the signal killed.
func interrupted(ctx context.Context, when string) exitError {
	code := exitInterrupted
	if sc, ok := context.Cause(ctx).(signalCause); ok {
		code = 128 + int(sc.sig)
	}
	return exitError{code, "interrupted " + when}
}

// waitInterrupted is the message of a wait for the lock cut short by a
// signal.
const waitInterrupted = "while waiting for the lock"

// forwardedSignals are passed on to the command while it runs.
var forwardedSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

const lockHelp = `redlock lock: run a command while holding a Redlock lock.

usage: redlock lock [flags] KEY -- COMMAND [ARG...]

Takes KEY over the masters (--masters or $REDLOCK_MASTERS) or through a
redlock proxy (--proxy), runs COMMAND with REDLOCK_KEY, REDLOCK_TOKEN and
REDLOCK_FENCING_TOKEN in its environment, extends the lock while the command
runs, releases it when the command exits, and exits with the command's
status (128+N when a signal N ended it). Signals sent to redlock lock
(INT, TERM, HUP, QUIT, USR1, USR2) are passed on to the command — to its
whole process group when redlock lock has no terminal (cron, systemd,
scripts), so that what the command started gets them too; on a terminal,
Ctrl-C and Ctrl-\ already reach the command and are not sent twice. The
command does not inherit $REDLOCK_PASSWORD, $REDLOCK_MASTER_PASSWORD or
$REDLOCK_PROXY_PASSWORD, and gets SIGTERM if redlock lock itself dies.
A guard process (redlock lock-guard, Linux) SIGKILLs the command when the
lock's validity ends even if redlock lock is stopped or dead meanwhile.

Exit codes of its own:
  69  unavailable: too few masters answered to take the lock (also when
      --wait ran out while too few answered)
  75  not acquired: KEY is held and --wait ran out (the default --wait 0
      tries once)
  76  lost: the lock was lost while the command ran, or its extensions
      went unanswered until less than --grace (at most a quarter of the
      validity a grant gives) was left; the command got SIGTERM, and
      SIGKILL after --grace or when the validity ended, whichever came
      first
  78  configuration: the masters (or the proxy) refused the credentials,
      or a command, key or channel the lock needs (the masters' ACL user:
      docs/operations.md#security); --wait does not wait for it
   2  bad usage
 130  interrupted by SIGINT before the command started (143: by SIGTERM)
 126/127  the command could not be run / was not found;  1  other errors

REDLOCK_FENCING_TOKEN strictly increases from one holder of KEY to the
next: pass it to the storage the command writes, which refuses lower ones
(docs/safety.md).

With --leader, KEY is an election (engine.Election, as etcd's): redlock
lock campaigns until it is leader (with no bound unless --wait), proclaims
--value (default host:pid) and runs the command while it leads, with
REDLOCK_TERM (= REDLOCK_FENCING_TOKEN) strictly increasing from one
leader to the next; the leadership ends — and the command gets SIGTERM —
as a lock's does. Engine.Election's Leader and Observe read the leader.

With -n N (2 to 64), up to N commands hold KEY at once (as consul lock
-n): each takes one of N permits, KEY:permit:0 to KEY:permit:N-1, a lock
of its own (REDLOCK_PERMIT_KEY names it); exit 75 when all N are held. A
try walks the permits in turn. Every process that shares KEY must give
the same -n: a plain redlock lock KEY (N = 1) locks KEY itself and does
not exclude -n holders, nor do holders of different N exclude each other
beyond their shared permits. REDLOCK_FENCING_TOKEN then increases from
one holder of the same permit to the next: storage keeps the highest per
REDLOCK_PERMIT_KEY (holders of different permits run at once).

Examples:
  redlock lock --masters 10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379 \
    nightly-report -- ./report.sh
  REDLOCK_MASTERS=... redlock lock --wait 5m --ttl 30s deploy -- make deploy
  redlock lock --proxy 127.0.0.1:7380 orders:42 -- \
    sh -c 'echo "token $REDLOCK_FENCING_TOKEN"'
  redlock lock --shell backup -- 'pg_dump db | gzip > /backups/db.gz'
  redlock lock -n 3 --wait 1m reindex -- ./reindex-one-shard
  redlock lock --leader --value "$(hostname):8080" scheduler -- ./scheduler
`

// lockOpts are the parsed flags of `redlock lock`.
type lockOpts struct {
	key                 string
	argv                []string
	ttl, wait, maxHold  time.Duration
	grace               time.Duration
	proxyAddr, proxyPwd string
	proxyTLSCA          string
	proxyTLSCert        string
	proxyTLSKey         string
	verbose             bool
	driftFactor         float64 // --drift-factor, for the validity of a lock taken through a proxy
	holders             int     // -n: up to this many holders of key at once (a semaphore's permits)
	leader              bool    // --leader: campaign in the election KEY
	value               string  // --value: the leader's value
}

// maxHolders bounds -n: a try walks the permits one after another, each
// up to the per-master timeout when masters stall.
const maxHolders = 64

// heldLock is a lock taken for the command: an engine Lock, or one held
// through a proxy.
type heldLock interface {
	Token() string
	FencingToken() int64
	// Until is when the lock's validity ends as known now (it moves with
	// each extension).
	Until() time.Time
	Done() <-chan struct{}
	Err() error
	Unlock(ctx context.Context) error
}

// lockCmd runs `redlock lock`. Its outcome other than success is an
// exitError carrying the exit code.
func lockCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("lock")
	var mf masterFlags
	mf.register(fs, "the Redis masters")
	var o lockOpts
	var ec engine.Config
	durationVar(fs, &o.ttl, "ttl", 10*time.Second, "lock TTL: how long the lock outlives a redlock lock that dies (it is extended every third of it)")
	durationVar(fs, &o.wait, "wait", 0, "how long to wait for KEY while it is held (0: try once)")
	durationVar(fs, &o.maxHold, "max-hold", 0, "stop extending this long after the acquisition: the lock is then lost and the command terminated (0: no bound)")
	durationVar(fs, &o.grace, "grace", 10*time.Second, "how long the command has between SIGTERM and SIGKILL (never past the lock's validity)")
	fs.StringVar(&o.proxyAddr, "proxy", "", "take the lock through the redlock proxy at `host:port` instead of --masters")
	fs.StringVar(&o.proxyPwd, "proxy-password", "", "`password` for the proxy's AUTH (or $"+envProxyPassword+")")
	fs.StringVar(&o.proxyTLSCA, "proxy-tls-ca", "", "connect to the proxy over TLS, trusting the CA certificates in this PEM `file`")
	fs.StringVar(&o.proxyTLSCert, "proxy-tls-cert", "", "PEM `file` of a client certificate for a proxy that requires one (with --proxy-tls-key)")
	fs.StringVar(&o.proxyTLSKey, "proxy-tls-key", "", "PEM `file` of the client certificate's private key")
	durationVar(fs, &ec.MasterTimeout, "master-timeout", 0, "per-master timeout of each operation (0: max(5ms, min(50ms, ttl/100)))")
	durationVar(fs, &ec.MaxTTL, "max-ttl", engine.DefaultMaxTTL, "longest TTL any client of these masters uses: a master that started less than this ago does not vote (restart quarantine, docs/safety.md)")
	durationVar(fs, &ec.QuarantineFor, "quarantine-for", 0, "restart quarantine period when longer than --max-ttl")
	fs.BoolVar(&ec.FreshMasters, "fresh-masters", false, "the masters were just started empty and serve no other client: their first sessions vote at once (tests; never for shared masters)")
	fs.StringVar(&ec.KeyPrefix, "key-prefix", "", "`prefix` added to KEY on the masters (tenants sharing masters)")
	fs.StringVar(&ec.ReleaseChannel, "release-channel", "", "publish the release on channel `name` of each master, and wake at once when a holder that uses it releases KEY (--wait; the same channel as the other clients' and proxies')")
	fs.Float64Var(&ec.DriftFactor, "drift-factor", engine.DefaultDriftFactor, "`fraction` of the TTL allowed for clock drift (with --proxy: the proxy's, read from its INFO, when larger; give the proxy's for a proxy that does not report it)")
	fs.BoolVar(&o.verbose, "v", false, "log the lock's life (acquired, released) on stderr, not only problems")
	fs.IntVar(&o.holders, "n", 1, "up to `count` holders of KEY at once (2 to 64), as consul lock -n: a semaphore of that many permits (KEY:permit:0 … KEY:permit:count-1), each a lock of its own; every process sharing KEY must give the same count (1: a plain lock on KEY itself)")
	fs.BoolVar(&o.leader, "leader", false, "campaign in the election KEY (a leader lock, as etcd's election): wait until leader — with no bound unless --wait — and run the command while leader, with its term in REDLOCK_TERM")
	fs.StringVar(&o.value, "value", "", "with --leader: the `text` the leader proclaims (what readers of the election's leader see; default: host:pid)")
	shell := fs.Bool("shell", false, "run the command through sh -c: its words joined with spaces are one shell command line (pipes, $REDLOCK_FENCING_TOKEN, &&)")
	flagArgs, argv, dash := cutDash(args)
	if err := parseFlagsArgs(fs, flagArgs, []string{"KEY"}, stdout, lockHelp, "ttl", "grace"); err != nil {
		if extra := extraArgsError(nil); !dash && errors.As(err, &extra) {
			return usageError{fmt.Errorf("%q after KEY: the command goes after \"--\": redlock lock [flags] KEY -- COMMAND [ARG...]", []string(extra))}
		}
		return err
	}
	if !dash || len(argv) == 0 {
		return usageError{errors.New("want KEY -- COMMAND [ARG...]")}
	}
	if *shell {
		argv = []string{"/bin/sh", "-c", strings.Join(argv, " ")}
	}
	o.key, o.argv = fs.Arg(0), argv
	if o.key == "" {
		return usageError{errors.New("KEY must not be empty")}
	}
	if ec.DriftFactor < 0 || ec.DriftFactor >= 1 {
		return usageError{errors.New("--drift-factor must be in [0, 1)")}
	}
	if o.holders < 1 || o.holders > maxHolders {
		return usageError{fmt.Errorf("-n %d: want 1 to %d holders", o.holders, maxHolders)}
	}
	if o.holders > 1 && o.proxyAddr != "" {
		return usageError{errors.New("-n with --proxy: the proxy serves plain locks (SET NX PX); take a semaphore over --masters")}
	}
	if o.holders > 1 && ec.ReleaseChannel != "" {
		return usageError{errors.New("-n with --release-channel: a semaphore's waiters poll its permits; the channel wakes waiters of plain locks")}
	}
	if o.leader && (o.proxyAddr != "" || o.holders > 1 || o.maxHold != 0) {
		return usageError{errors.New("--leader with --proxy, -n or --max-hold: an election is campaigned over --masters, has one leader, and is held until its command exits")}
	}
	if o.value != "" && !o.leader {
		return usageError{errors.New("--value is the leader's value: give it with --leader")}
	}
	if o.leader && o.value == "" {
		host, _ := os.Hostname()
		o.value = host + ":" + strconv.Itoa(os.Getpid())
	}
	o.driftFactor = ec.DriftFactor
	level := slog.LevelWarn
	if o.verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	var h heldLock
	var closeFn func()
	var err error
	if o.proxyAddr != "" {
		if mf.addrs != "" {
			return usageError{errors.New("--masters and --proxy are exclusive")}
		}
		if ec.KeyPrefix != "" || ec.QuarantineFor != 0 || ec.MasterTimeout != 0 || ec.ReleaseChannel != "" || ec.FreshMasters || ec.MaxTTL != engine.DefaultMaxTTL {
			return usageError{errors.New("--key-prefix, --max-ttl, --quarantine-for, --fresh-masters, --master-timeout and --release-channel are the proxy's settings, not --proxy clients'")}
		}
		h, closeFn, err = proxyAcquire(ctx, o, log)
	} else {
		if o.ttl > ec.MaxTTL {
			return usageError{fmt.Errorf("--ttl %v is longer than --max-ttl %v: raise --max-ttl, on every process that locks on these masters; a master that restarted then waits that much longer before it votes (restart quarantine)", o.ttl, ec.MaxTTL)}
		}
		h, closeFn, err = engineAcquire(ctx, o, &mf, ec, log)
	}
	if err != nil {
		return err
	}
	defer closeFn()
	log.Info("lock acquired", "key", o.key, "fencing_token", h.FencingToken())
	return runHolding(ctx, h, o, log, stdout, stderr)
}

// cutDash splits args at the first "--": the flags and KEY before, the
// command after.
func cutDash(args []string) (before, after []string, found bool) {
	for i, a := range args {
		if a == "--" {
			return args[:i], args[i+1:], true
		}
	}
	return args, nil, false
}

// engineAcquire takes the lock over the masters with an engine of its own:
// fenced, extended by the engine's watchdog.
func engineAcquire(ctx context.Context, o lockOpts, mf *masterFlags, ec engine.Config, log *slog.Logger) (heldLock, func(), error) {
	list := mf.list()
	if len(list) == 0 {
		return nil, nil, usageError{errors.New("--masters (or $" + envMasters + ") is required, or --proxy")}
	}
	if err := checkAddrs("masters", list); err != nil {
		return nil, nil, err
	}
	ec.Addrs, ec.Clusters, _ = members.Parse(list) // checked by checkAddrs
	if err := mf.apply(&ec.Conn); err != nil {
		return nil, nil, err
	}
	ec.Logger, ec.Names = log, flagNames
	e, err := engine.New(ec)
	if err != nil {
		return nil, nil, usageError{err}
	}
	// Wait for the first connects, so that a lock is not refused because
	// a master's TLS handshake took longer than one per-master timeout.
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = e.WaitReady(pctx)
	cancel()
	if err != nil && !errors.Is(err, engine.ErrUnavailable) {
		e.Close()
		if errors.Is(err, engine.ErrDuplicateMaster) {
			return nil, nil, usageError{err}
		}
		return nil, nil, acquireExit(ctx, err, o)
	}
	if w := topologyWarning(len(e.Masters())); w != "" {
		log.Warn(w)
	}
	logQuarantine(log, e)
	if o.wait > 0 && e.Voting() != nil {
		// Restart quarantine keeps a quorum from voting past the whole
		// wait: say so now, not when the wait has run out.
		if at, hint := e.QuarantineOutlook(); !at.IsZero() && time.Until(at) > o.wait {
			e.Close()
			msg := fmt.Sprintf("a quorum of masters votes only from %s (in %v, restart quarantine), after --wait %v ends: the wait cannot succeed",
				at.Format(time.TimeOnly), time.Until(at).Round(time.Second), o.wait)
			if hint != "" {
				msg += "; " + hint
			}
			return nil, nil, exitError{exitUnavailable, msg}
		}
	}
	opts := []engine.Option{engine.WithFencing(), engine.WithAutoExtend(o.maxHold)}
	var l *engine.Lock
	if o.leader {
		el, err := e.NewElection(o.key, o.ttl)
		if err != nil {
			e.Close()
			return nil, nil, usageError{err}
		}
		cctx := ctx
		if o.wait > 0 {
			var cancel context.CancelFunc
			cctx, cancel = context.WithTimeout(ctx, o.wait)
			defer cancel()
		}
		ld, err := el.Campaign(cctx, o.value)
		if err != nil {
			e.Close()
			return nil, nil, acquireExit(ctx, err, o)
		}
		return leaderLock{ld}, func() { e.Close() }, nil
	}
	take := func(ctx context.Context) (*engine.Lock, error) {
		if o.holders > 1 {
			s, err := e.NewSemaphore(o.key, o.holders)
			if err != nil {
				return nil, usageError{err}
			}
			if o.wait > 0 {
				return s.Acquire(ctx, o.ttl, opts...)
			}
			return s.TryAcquire(ctx, o.ttl, opts...)
		}
		if o.wait > 0 {
			return e.Lock(ctx, o.key, o.ttl, opts...)
		}
		return e.TryLock(ctx, o.key, o.ttl, opts...)
	}
	if o.wait > 0 {
		wctx, cancel := context.WithTimeout(ctx, o.wait)
		l, err = take(wctx)
		cancel()
	} else {
		l, err = take(ctx)
	}
	if err != nil {
		e.Close()
		if ue := (usageError{}); errors.As(err, &ue) {
			return nil, nil, err
		}
		return nil, nil, acquireExit(ctx, err, o)
	}
	return l, func() { e.Close() }, nil
}

// leaderLock is a leadership as the lock the command runs under: its
// fencing token is its term.
type leaderLock struct{ *engine.Leadership }

func (l leaderLock) Token() string                    { return l.Lock().Token() }
func (l leaderLock) FencingToken() int64              { return l.Term() }
func (l leaderLock) Until() time.Time                 { return l.Lock().Until() }
func (l leaderLock) Unlock(ctx context.Context) error { return l.Resign(ctx) }

// acquireExit turns a failed acquisition into its exit code.
func acquireExit(ctx context.Context, err error, o lockOpts) error {
	switch {
	case ctx.Err() != nil:
		return interrupted(ctx, waitInterrupted)
	case errors.Is(err, conn.ErrAuth):
		return exitError{exitConfig, fmt.Sprintf("the masters refused the credentials: %s (%s)", cleanError(err), credentialsHint)}
	case errors.Is(err, engine.ErrMisconfigured):
		return exitError{exitConfig, cleanError(err)}
	case errors.Is(err, engine.ErrUnavailable) && errors.Is(err, context.DeadlineExceeded) && o.wait > 0:
		// --wait ran out while too few masters could vote: the last try
		// says why (down, quarantined until when), not the deadline.
		var qe *engine.QuorumError
		if errors.As(err, &qe) {
			err = qe
		}
		return exitError{exitUnavailable, fmt.Sprintf("not acquired within --wait %v: %s", o.wait, cleanError(err))}
	case errors.Is(err, engine.ErrUnavailable):
		return exitError{exitUnavailable, cleanError(err)}
	case errors.Is(err, engine.ErrNotAcquired), errors.Is(err, context.DeadlineExceeded):
		what := o.key + " is held"
		if o.holders > 1 {
			what = fmt.Sprintf("all %d permits of %s are held", o.holders, o.key)
		}
		if o.wait > 0 {
			return exitError{exitNotAcquired, fmt.Sprintf("%s: not acquired within --wait %v", what, o.wait)}
		}
		return exitError{exitNotAcquired, what + " (--wait to wait for it)"}
	}
	return err
}

// runHolding runs the command while h is held, and releases h when it
// exits. It returns the command's status as an exitError (nil for 0), or
// exitLost when h was lost meanwhile.
func runHolding(ctx context.Context, h heldLock, o lockOpts, log *slog.Logger, stdout, stderr io.Writer) error {
	release := func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := h.Unlock(uctx); err != nil {
			log.Warn("release failed: the lock expires at the end of its TTL", "key", o.key, "err", err)
			return
		}
		log.Info("lock released", "key", o.key)
	}
	cmd := exec.Command(o.argv[0], o.argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	// Without a terminal (cron, systemd, scripts) the command gets a
	// process group of its own: signals and a loss reach everything it
	// started. On a terminal it stays in the foreground group, where the
	// terminal's Ctrl-C and Ctrl-\ already reach it (they are then not
	// forwarded a second time).
	interactive := isTerminal(os.Stdin)
	cmd.SysProcAttr = childAttr(!interactive)
	cmd.Env = append(childEnv(),
		"REDLOCK_KEY="+o.key,
		"REDLOCK_TOKEN="+h.Token(),
		"REDLOCK_FENCING_TOKEN="+strconv.FormatInt(h.FencingToken(), 10))
	if o.leader {
		cmd.Env = append(cmd.Env, "REDLOCK_TERM="+strconv.FormatInt(h.FencingToken(), 10))
	}
	if o.holders > 1 {
		if k, ok := h.(interface{ Key() string }); ok {
			cmd.Env = append(cmd.Env, "REDLOCK_PERMIT_KEY="+k.Key())
		}
	}
	// A command that exits while a child of its own keeps its stdout open
	// must not keep us (and the lock) waiting.
	cmd.WaitDelay = time.Second
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwardedSignals...)
	defer signal.Stop(sigs)
	if ctx.Err() != nil { // SIGINT/SIGTERM between the acquisition and Notify
		release()
		return interrupted(ctx, "before the command started")
	}
	if err := h.Err(); err != nil || !time.Now().Before(h.Until()) {
		// The lock ended between its grant and here (this process was
		// paused, stopped, or blocked on a write to its stderr): the
		// command is not started under a lock no longer held (the grant
		// rule's (c), checked last; found by the review of issue #46).
		release()
		if err == nil {
			err = engine.ErrExpired
		}
		return exitError{exitLost, fmt.Sprintf("lock on %s ended before the command started (%v); the command was not run", o.key, err)}
	}
	if err := cmd.Start(); err != nil {
		release()
		code := 126 // found but could not be run, as a shell says
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = 127
		}
		return exitError{code, err.Error()}
	}
	pid := cmd.Process.Pid
	// The guard kills the command when the validity ends even if this
	// process is stopped meanwhile (guard.go). Started before the command
	// can be reaped: its pid and group are still the command's.
	guard, err := startGuard(pid, !interactive, h.Until(), stderr)
	if err != nil {
		log.Warn("no lock guard: the command is killed when the validity ends only while redlock lock runs", "err", err)
	}
	defer guard.stop()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	signalCommand := func(s syscall.Signal) {
		if interactive {
			_ = cmd.Process.Signal(s)
		} else {
			_ = syscall.Kill(-pid, s) // its process group
		}
	}
	done := h.Done()
	var kill <-chan time.Time
	var lost error
	// The command must be gone when the validity ends: another runner can
	// get the lock then. Extensions keep at least half the validity a
	// grant gives ahead (the watchdog: two thirds; through a proxy with a
	// large drift allowance: a half); when they go unanswered the validity
	// left shrinks, and once it is below the grace (at most a quarter of
	// a grant's validity) the command is sent SIGTERM, and SIGKILL when
	// the validity ends — even if an extension lands meanwhile, the
	// command was told to stop.
	early := min(o.grace, time.Until(h.Until())/4)
	watch := time.NewTicker(max(min(o.ttl/20, 100*time.Millisecond), time.Millisecond))
	defer watch.Stop()
	terminated, killed := false, false
	// killNow SIGKILLs the command when the validity has ended under it:
	// redlock lock was stopped (or starved) past it, and the command must
	// not run a moment longer.
	killNow := func() {
		terminated, killed, kill = true, true, nil
		log.Error("the lock's validity ended while the command ran (redlock lock stopped?): SIGKILL", "key", o.key, "pid", pid)
		signalCommand(syscall.SIGKILL)
	}
	terminate := func(why string) {
		if time.Until(h.Until()) <= 0 {
			killNow()
			return
		}
		if !terminated {
			terminated = true
			log.Error(why+": terminating the command", "key", o.key, "pid", pid, "grace", o.grace, "valid_for", time.Until(h.Until()).Round(time.Millisecond))
			signalCommand(syscall.SIGTERM)
		}
		// SIGKILL after the grace, and by the end of the validity at the latest.
		kill = time.After(max(min(o.grace, time.Until(h.Until())), 0))
	}
	for {
		select {
		case <-watch.C:
			guard.update(h.Until())
			if left := time.Until(h.Until()); left <= 0 && !killed {
				killNow()
			} else if !terminated && done != nil && left < early {
				terminate("lock extensions unanswered, validity ending")
			}
		case err := <-exited:
			guard.stop() // before the release: nothing of the command's is killed after it
			if lost == nil {
				if lost = h.Err(); lost == nil && !terminated { // not lost while it ran
					// The clock is read again after the release (property
					// h, as Engine.Do): a release that outlasts the
					// validity — a stalled proxy, stopped masters, the
					// leader's two broadcasts — returns after the lock
					// ended, and the command's status would report work
					// done under a lock that was not held by then.
					until := h.Until()
					release()
					if u := h.Until(); u.Before(until) {
						until = u // an extension sent meanwhile (--max-hold's last) ended it sooner
					}
					if !time.Now().Before(until) {
						return exitError{exitLost, fmt.Sprintf("lock on %s: the command ended (%s) while the lock was valid, but its validity ended before the release returned", o.key, cmd.ProcessState)}
					}
					return commandStatus(cmd, err)
				}
			}
			if lost == nil { // terminated while its extensions went unanswered
				release()
				return exitError{exitLost, fmt.Sprintf("lock on %s ending while the command ran: too few masters answered its extensions; the command was terminated before the validity ended", o.key)}
			}
			if !interactive {
				_ = syscall.Kill(-pid, syscall.SIGKILL) // what the command left running
			}
			code := exitLost
			if errors.Is(lost, engine.ErrMisconfigured) {
				code = exitConfig // the masters refused its extensions: named with the fix
			}
			return exitError{code, fmt.Sprintf("lock on %s lost while the command ran (%s): %s", o.key, lossReason(lost), cleanError(lost))}
		case s := <-sigs:
			if interactive && (s == syscall.SIGINT || s == syscall.SIGQUIT) {
				continue // the terminal sent it to the command too
			}
			signalCommand(s.(syscall.Signal))
		case <-done:
			done, lost = nil, h.Err()
			log.Error("lock lost", "key", o.key, "why", lossReason(lost), "err", lost)
			if !killed && (!terminated || kill == nil) {
				terminate("lock lost")
			}
		case <-kill:
			kill, killed = nil, true
			log.Error("the command outlived --grace or the lock's validity after SIGTERM: SIGKILL", "pid", pid)
			signalCommand(syscall.SIGKILL)
		}
	}
}

// lossReason says why a held lock ended, for the exit message and the log:
// the masters refused it, or it could no longer be proven held before its
// validity ran out.
func lossReason(err error) string {
	switch {
	case errors.Is(err, engine.ErrMaxHold):
		return "held for --max-hold"
	case errors.Is(err, engine.ErrMisconfigured):
		return "the masters refused its extensions"
	case errors.Is(err, engine.ErrUnavailable):
		return "too few masters answered its extensions until its validity ran out"
	case errors.Is(err, engine.ErrGrantedTooLate):
		return "an extension was granted too late"
	}
	return "an extension was refused by a quorum of masters, or its validity ran out"
}

// commandStatus is the command's exit status as redlock lock's: nil for 0,
// else an exitError with the status (128+N for signal N, as a shell).
func commandStatus(cmd *exec.Cmd, waitErr error) error {
	st := cmd.ProcessState
	if st == nil {
		return waitErr
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitError{128 + int(ws.Signal()), ""}
	}
	if code := st.ExitCode(); code != 0 {
		return exitError{code, ""}
	}
	if waitErr != nil && !errors.Is(waitErr, exec.ErrWaitDelay) {
		return waitErr
	}
	return nil
}

// exitError ends a command with a given exit code; msg (if any) is printed
// on stderr first.
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string {
	if e.msg == "" {
		return "exit status " + strconv.Itoa(e.code)
	}
	return e.msg
}

// secretEnv are the variables that hold passwords: the command does not
// inherit them.
var secretEnv = []string{envPassword, envMasterPassword, envProxyPassword}

// childEnv is redlock lock's environment without the secrets.
func childEnv() []string {
	env := os.Environ()
	out := env[:0:0]
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(secretEnv, name) {
			out = append(out, kv)
		}
	}
	return out
}
