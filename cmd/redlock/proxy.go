package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/proxy"
)

// Environment variables `redlock proxy` reads, so that secrets need not
// appear in the process list.
const (
	envProxyPassword  = "REDLOCK_PROXY_PASSWORD"
	envMasterPassword = "REDLOCK_MASTER_PASSWORD"
)

// proxyCmd runs `redlock proxy`: a RESP server mapping client lock commands
// to Redlock quorum operations, until SIGINT/SIGTERM (graceful shutdown).
func proxyCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("proxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg proxy.Config
	ec := &cfg.Engine
	masters := fs.String("masters", "", "comma-separated host:port of the Redis masters (required)")
	fs.StringVar(&cfg.Listen, "listen", proxy.DefaultListen, "address to listen on")
	fs.StringVar(&cfg.RequirePass, "requirepass", "", "password clients must AUTH with (or $"+envProxyPassword+")")
	fs.StringVar(&ec.Conn.Password, "master-password", "", "password sent to the masters (or $"+envMasterPassword+")")
	fs.IntVar(&cfg.MaxClients, "max-clients", proxy.DefaultMaxClients, "maximum concurrent client connections")
	fs.IntVar(&cfg.MaxRequestBytes, "max-request-bytes", proxy.DefaultMaxRequestBytes, "maximum bytes of one request's arguments")
	fs.IntVar(&cfg.MaxArgs, "max-args", proxy.DefaultMaxArgs, "maximum arguments of one request")
	fs.IntVar(&cfg.MaxPipeline, "max-pipeline", proxy.DefaultMaxPipeline, "unanswered commands per connection before the proxy stops reading it")
	fs.IntVar(&cfg.MaxInFlight, "max-in-flight", proxy.DefaultMaxInFlight, "commands running on the masters, all clients together")
	fs.IntVar(&cfg.MaxClientMemory, "max-client-memory", proxy.DefaultMaxClientMemory, "bytes of requests and replies held for all clients")
	fs.IntVar(&cfg.MaxAuthFailures, "max-auth-failures", proxy.DefaultMaxAuthFailures, "wrong passwords before a connection is closed")
	fs.DurationVar(&cfg.IdleTimeout, "idle-timeout", 0, "close client connections idle this long (0: never)")
	fs.BoolVar(&cfg.AllowScripts, "allow-scripts", false, "run scripts that are not recognised lock scripts on every master: gives every client full write access to every master")
	fs.DurationVar(&cfg.ScriptTimeout, "script-timeout", 0, "per-master timeout of --allow-scripts scripts (0: the per-master timeout for reads)")
	fs.DurationVar(&ec.MasterTimeout, "master-timeout", 0, "per-master timeout of each operation (0: max(5ms, min(50ms, ttl/100)))")
	fs.Float64Var(&ec.DriftFactor, "drift-factor", engine.DefaultDriftFactor, "share of the TTL allowed for clock drift")
	fs.IntVar(&ec.ConnsPerMaster, "conns-per-master", 1, "pipelined connections per master")
	fs.DurationVar(&ec.Conn.DialTimeout, "dial-timeout", conn.DefaultDialTimeout, "timeout of one connect to a master (dial and handshake)")
	fs.DurationVar(&ec.Conn.ReconnectMax, "reconnect-max", conn.DefaultReconnectMax, "longest wait between reconnect attempts to a master")
	checkTimeout := fs.Duration("check-timeout", 3*time.Second, "how long start-up waits for every master's first connect attempt")
	waitMasters := fs.Bool("wait-masters", false, "start even when fewer than a quorum of masters are reachable (lock commands answer an error until they are)")
	shutdownTimeout := fs.Duration("shutdown-timeout", 10*time.Second, "how long a graceful shutdown waits for in-flight commands")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected arguments: %q", fs.Args())}
	}
	ec.Addrs = splitList(*masters)
	if len(ec.Addrs) == 0 {
		return usageError{errors.New("--masters is required")}
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"max-clients", cfg.MaxClients}, {"max-request-bytes", cfg.MaxRequestBytes}, {"max-args", cfg.MaxArgs},
		{"max-pipeline", cfg.MaxPipeline}, {"max-in-flight", cfg.MaxInFlight}, {"max-client-memory", cfg.MaxClientMemory},
		{"max-auth-failures", cfg.MaxAuthFailures}, {"conns-per-master", ec.ConnsPerMaster}} {
		if f.v <= 0 {
			return usageError{fmt.Errorf("--%s must be positive, got %d", f.name, f.v)}
		}
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"idle-timeout", cfg.IdleTimeout}, {"script-timeout", cfg.ScriptTimeout}, {"master-timeout", ec.MasterTimeout},
		{"dial-timeout", ec.Conn.DialTimeout}, {"reconnect-max", ec.Conn.ReconnectMax}, {"check-timeout", *checkTimeout},
		{"shutdown-timeout", *shutdownTimeout}} {
		if f.v < 0 {
			return usageError{fmt.Errorf("--%s must not be negative, got %v", f.name, f.v)}
		}
	}
	if cfg.RequirePass == "" {
		cfg.RequirePass = os.Getenv(envProxyPassword)
	}
	if ec.Conn.Password == "" {
		ec.Conn.Password = os.Getenv(envMasterPassword)
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	cfg.Logger, ec.Logger = log, log
	srv, err := proxy.New(cfg)
	if errors.Is(err, proxy.ErrBadConfig) {
		return usageError{err}
	}
	if err != nil {
		return err
	}
	defer srv.Close()
	cctx, cancel := context.WithTimeout(ctx, *checkTimeout)
	st, err := srv.CheckMasters(cctx)
	cancel()
	switch {
	case errors.Is(err, engine.ErrDuplicateMaster):
		return usageError{err}
	case errors.Is(err, engine.ErrUnavailable) && *waitMasters:
		log.Warn("starting without a quorum of masters (--wait-masters)", "err", err)
	case errors.Is(err, engine.ErrUnavailable):
		return fmt.Errorf("%w (start anyway with --wait-masters)", err)
	case err != nil:
		return err
	}
	for _, m := range st {
		if !m.Up {
			log.Warn("master unreachable at start", "master", m.Index, "addr", m.Addr, "err", m.Err)
		}
	}
	warnTopology(log, len(ec.Addrs))
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "redlock proxy listening on %s, masters %s (quorum %d)\n",
		ln.Addr(), strings.Join(ec.Addrs, ","), len(ec.Addrs)/2+1)
	if cfg.AllowScripts {
		log.Warn("--allow-scripts: every client may run any script on every master")
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	fmt.Fprintln(stderr, "redlock proxy: shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), *shutdownTimeout)
	defer cancel()
	err = srv.Shutdown(sctx)
	if serr := <-served; serr != nil && !errors.Is(serr, proxy.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

// warnTopology warns about master counts that make a weak lock group.
func warnTopology(log *slog.Logger, n int) {
	q := n/2 + 1
	switch {
	case q == 1:
		log.Warn("one master: quorum 1, no fault tolerance (use 5 independent masters, or at least 3)", "masters", n)
	case n < 3:
		log.Warn("fewer than 3 masters: no master may fail (use 5, or at least 3)", "masters", n, "quorum", q)
	case n%2 == 0:
		log.Warn("an even number of masters tolerates no more failures than one fewer", "masters", n, "quorum", q, "tolerates", n-q)
	}
}
