//go:build unix

package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/members"
	"github.com/redlock-dev/redlock/internal/pprofsrv"
	"github.com/redlock-dev/redlock/metrics"
	"github.com/redlock-dev/redlock/proxy"
)

// envProxyPassword is the password clients AUTH with to `redlock proxy`
// (--requirepass), read by the proxy and by `redlock lock --proxy`.
const envProxyPassword = "REDLOCK_PROXY_PASSWORD"

const proxyHelp = `redlock proxy: serve Redis clients, turning their locks into Redlock
quorum locks.

usage: redlock proxy --masters host:port,... [flags]

Unmodified clients send SET key value NX PX ms (or their lock library's
scripts) and get a quorum-backed answer. Passwords may come from
$REDLOCK_PROXY_PASSWORD and $REDLOCK_PASSWORD, the masters from
$REDLOCK_MASTERS, instead of flags.

Example:
  REDLOCK_PROXY_PASSWORD=secret redlock proxy --listen 127.0.0.1:7380 \
    --masters redis1:6379,redis2:6379,redis3:6379,redis4:6379,redis5:6379
`

// proxyOptions is `redlock proxy`'s configuration, read from its flags
// and the environment by [parseProxyFlags] and run by [runProxy].
type proxyOptions struct {
	// Config has the masters (with their AUTH and TLS) and the clients'
	// password resolved; Logger and Engine.Logger/Observer are set by
	// runProxy.
	proxy.Config
	tls             *tls.Config // clients' TLS (--tls-*), nil for plain TCP
	metricsAddr     string      // --metrics-addr, "" for none
	pprofAddr       string      // --pprof-addr, "" for none
	checkTimeout    time.Duration
	waitMasters     bool
	shutdownTimeout time.Duration
}

// proxyCmd runs `redlock proxy`: a RESP server mapping client lock commands
// to Redlock quorum operations, until SIGINT/SIGTERM (graceful shutdown).
func proxyCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseProxyFlags(args, stdout)
	if err != nil {
		return err
	}
	return runProxy(ctx, o, stdout, stderr)
}

// parseProxyFlags reads `redlock proxy`'s flags, the environment and the
// files the flags name (passwords, certificates) into proxyOptions. It
// starts nothing and connects nowhere (it resolves the masters' host
// names). Bad flags give a usageError; -h prints the help to stdout and
// gives flag.ErrHelp.
func parseProxyFlags(args []string, stdout io.Writer) (proxyOptions, error) {
	fs := newFlagSet("proxy")
	var o proxyOptions
	cfg := &o.Config
	ec := &cfg.EngineConfig
	var mf masterFlags
	mf.register(fs, "the Redis masters (required)")
	fs.StringVar(&cfg.Listen, "listen", proxy.DefaultListen, "`host:port` to listen on")
	fs.StringVar(&cfg.RequirePass, "requirepass", "", "`password` clients must AUTH with (or $"+envProxyPassword+", or --requirepass-file)")
	requirePassFile := fs.String("requirepass-file", "", "read the clients' password from this `file`")
	tlsCert := fs.String("tls-cert", "", "serve clients over TLS with this PEM certificate `file` (with --tls-key)")
	tlsKey := fs.String("tls-key", "", "PEM `file` of the private key of --tls-cert")
	tlsClientCA := fs.String("tls-client-ca", "", "require client certificates signed by the CAs in this PEM `file` (with --tls-cert)")
	fs.StringVar(&o.metricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://`addr`/metrics (e.g. 127.0.0.1:9121)")
	fs.StringVar(&o.pprofAddr, "pprof-addr", "", "serve net/http/pprof at http://`addr`/debug/pprof/ (e.g. localhost:6060; keep it off public interfaces: profiles show memory)")
	fs.StringVar(&cfg.KeyPrefix, "key-prefix", "", "`prefix` added to every client key on the masters (tenants sharing masters through separate proxies)")
	fs.StringVar(&cfg.WakeChannel, "wake-channel", proxy.DefaultWakeChannel, "`channel` on the masters over which proxies on the same masters wake each other's Redisson waiters")
	fs.BoolVar(&cfg.LocalWakeups, "local-wakeups", false, "wake only this proxy's Redisson waiters (no --wake-channel traffic); waiters on other proxies retry at the lock's TTL")
	fs.IntVar(&cfg.MaxClients, "max-clients", proxy.DefaultMaxClients, "maximum concurrent client connections")
	fs.IntVar(&cfg.MaxRequestBytes, "max-request-bytes", proxy.DefaultMaxRequestBytes, "maximum `bytes` of one request's arguments")
	fs.IntVar(&cfg.MaxArgs, "max-args", proxy.DefaultMaxArgs, "maximum arguments of one request")
	fs.IntVar(&cfg.MaxPipeline, "max-pipeline", proxy.DefaultMaxPipeline, "unanswered commands per connection before the proxy stops reading it")
	fs.IntVar(&cfg.MaxInFlight, "max-in-flight", proxy.DefaultMaxInFlight, "commands running on the masters or waiting for them, all clients together")
	fs.IntVar(&cfg.EventLoops, "event-loops", 0, "epoll event loops serving plain-TCP clients (Linux), instead of two goroutines per client; 0: one per four CPUs, -1: none")
	durationVar(fs, &cfg.QueueTimeout, "queue-timeout", proxy.DefaultQueueTimeout, "longest wait of a pipelined command for its turn on the masters when the proxy is overloaded; beyond it the command is answered -BUSY at once")
	fs.IntVar(&cfg.MaxClientMemory, "max-client-memory", proxy.DefaultMaxClientMemory, "`bytes` of requests and replies held for all clients")
	fs.IntVar(&cfg.MaxAuthFailures, "max-auth-failures", proxy.DefaultMaxAuthFailures, "wrong passwords before a connection is closed")
	durationVar(fs, &cfg.IdleTimeout, "idle-timeout", 0, "close client connections idle this long (0: never)")
	durationVar(fs, &cfg.AuthTimeout, "auth-timeout", proxy.DefaultAuthTimeout, "with a password: close connections not authenticated this long after they connect")
	durationVar(fs, &cfg.RequestTimeout, "request-timeout", proxy.DefaultRequestTimeout, "close a connection whose request is not complete this long after its first byte")
	fs.BoolVar(&cfg.AllowTokenlessWrites, "allow-tokenless-writes", false, "serve DEL and PEXPIRE, which delete or shorten any lock without its token (for clients that release with DEL)")
	fs.BoolVar(&cfg.AllowScripts, "allow-scripts", false, "run scripts that are not recognised lock scripts on every master: gives every client full write access to every master")
	durationVar(fs, &cfg.ScriptTimeout, "script-timeout", 0, "per-master timeout of --allow-scripts scripts (0: the per-master timeout for reads)")
	durationVar(fs, &ec.MasterTimeout, "master-timeout", 0, "per-master timeout of each operation (0: max(5ms, min(50ms, ttl/100)))")
	fs.Float64Var(&ec.DriftFactor, "drift-factor", engine.DefaultDriftFactor, "`fraction` of the TTL allowed for clock drift")
	fs.StringVar(&ec.ReleaseChannel, "release-channel", "", "publish the keys released through the engine (SET NX PX and REDLOCK.LOCK locks released with a single-key compare-and-delete script) on channel `name` of each master, waking the engines and 'redlock lock --wait' runners that wait for them (theirs must be the same channel)")
	fs.IntVar(&ec.ConnsPerMaster, "conns-per-master", 1, "pipelined connections per master")
	durationVar(fs, &ec.Conn.DialTimeout, "dial-timeout", conn.DefaultDialTimeout, "timeout of one connect to a master (dial and handshake)")
	durationVar(fs, &ec.Conn.ReconnectMax, "reconnect-max", conn.DefaultReconnectMax, "longest wait between reconnect attempts to a master")
	durationVar(fs, &ec.MaxTTL, "max-ttl", engine.DefaultMaxTTL, "longest lock TTL accepted (SET PX, scripts, extends), and the restart quarantine: a master that started less than this ago does not vote; every client of these masters must stay within it (docs/safety.md)")
	durationVar(fs, &ec.QuarantineFor, "quarantine-for", 0, "restart quarantine period when longer than --max-ttl")
	fs.BoolVar(&ec.FreshMasters, "fresh-masters", false, "the masters were just started empty and serve no other client: their first sessions vote at once (tests; never for shared masters)")
	fs.BoolVar(&ec.DisableQuarantine, "no-quarantine", false, "turn restart quarantine off: a master restarted without its data votes at once, and two clients can then hold one key (docs/safety.md)")
	fs.BoolVar(&ec.DisableClockCheck, "no-clock-check", false, "turn the masters' clock check off (no TIME per write batch): a master whose clock jumps forward then votes, and two clients can hold one key (docs/safety.md)")
	durationVar(fs, &ec.Conn.StallTimeout, "stall-timeout", conn.DefaultStallTimeout, "drop a master connection whose oldest request is unanswered this long after its deadline")
	durationVar(fs, &o.checkTimeout, "check-timeout", 3*time.Second, "how long start-up waits for every master's first connect attempt")
	fs.BoolVar(&o.waitMasters, "wait-masters", false, "start even when fewer than a quorum of masters are reachable (lock commands answer an error until they are)")
	durationVar(fs, &o.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long a graceful shutdown waits for in-flight commands")
	if err := parseFlags(fs, args, stdout, proxyHelp, "max-clients", "max-request-bytes", "max-args", "max-pipeline",
		"max-in-flight", "max-client-memory", "max-auth-failures", "conns-per-master", "dial-timeout", "reconnect-max", "drift-factor",
		"auth-timeout", "request-timeout", "queue-timeout"); err != nil {
		return proxyOptions{}, err
	}
	list := mf.list()
	if len(list) == 0 {
		return proxyOptions{}, usageError{errors.New("--masters is required")}
	}
	if err := checkAddrs("masters", list); err != nil {
		return proxyOptions{}, err
	}
	ec.Addrs, ec.Clusters, _ = members.Parse(list) // checked by checkAddrs
	if err := mf.apply(&ec.Conn); err != nil {
		return proxyOptions{}, err
	}
	switch {
	case cfg.RequirePass != "" && *requirePassFile != "":
		return proxyOptions{}, usageError{errors.New("--requirepass and --requirepass-file are exclusive")}
	case *requirePassFile != "":
		pw, err := readSecret(*requirePassFile)
		if err != nil {
			return proxyOptions{}, usageError{fmt.Errorf("--requirepass-file: %w", err)}
		}
		cfg.RequirePass = pw
	case cfg.RequirePass == "":
		cfg.RequirePass = os.Getenv(envProxyPassword)
	}
	tc, err := listenerTLS(*tlsCert, *tlsKey, *tlsClientCA)
	if err != nil {
		return proxyOptions{}, err
	}
	o.tls = tc
	return o, nil
}

// runProxy serves clients as o says until ctx ends, then shuts down
// gracefully (o.shutdownTimeout).
func runProxy(ctx context.Context, o proxyOptions, stdout, stderr io.Writer) error {
	cfg := o.Config
	ec := &cfg.EngineConfig
	var err error
	log := slog.New(slog.NewTextHandler(stderr, nil))
	cfg.Logger, ec.Logger = log, log
	ec.Names = flagNames
	var m *metrics.Metrics
	var reg *prometheus.Registry
	if o.metricsAddr != "" {
		reg = metrics.NewRegistry()
		if m, err = metrics.New(reg); err != nil {
			return err
		}
		ec.Observer = m
	}
	srv, err := proxy.New(cfg)
	if errors.Is(err, proxy.ErrBadConfig) {
		return usageError{err}
	}
	if err != nil {
		return err
	}
	defer srv.Close()
	if m != nil {
		if err := m.Watch(srv.Engine()); err != nil {
			return err
		}
		if err := metrics.RegisterProxy(reg, func() metrics.ProxyStats { return metrics.ProxyStats(srv.Stats()) }); err != nil {
			return err
		}
		mctx, cancel := context.WithCancel(ctx)
		defer cancel()
		addr, err := metrics.ServeProbes(mctx, o.metricsAddr, reg, srv.Engine().Voting, srv.Engine().VoteMargin)
		if err != nil {
			return usageError{fmt.Errorf("--metrics-addr: %w", err)}
		}
		fmt.Fprintf(stdout, "redlock proxy metrics at http://%s/metrics (probes: /healthz, /readyz)\n", addr)
	}
	if o.pprofAddr != "" {
		ps, err := pprofsrv.Start(o.pprofAddr)
		if err != nil {
			return usageError{fmt.Errorf("--pprof-addr: %w", err)}
		}
		defer ps.Close()
		fmt.Fprintf(stdout, "redlock proxy pprof at http://%s/debug/pprof/\n", ps.Addr())
	}
	cctx, cancel := context.WithTimeout(ctx, o.checkTimeout)
	st, err := srv.Engine().WaitReady(cctx)
	cancel()
	switch {
	case errors.Is(err, engine.ErrDuplicateMaster):
		return usageError{err}
	case errors.Is(err, conn.ErrAuth) && !o.waitMasters:
		return usageError{fmt.Errorf("--masters: %w (%s)", err, credentialsHint)}
	case errors.Is(err, engine.ErrUnavailable) && o.waitMasters:
		log.Warn("starting without a quorum of masters (--wait-masters)", "err", err)
	case errors.Is(err, engine.ErrUnavailable):
		return usageError{fmt.Errorf("--masters: %w (start anyway with --wait-masters)", err)}
	case err != nil:
		return err
	}
	for _, m := range st {
		if !m.Up {
			log.Warn("master unreachable at start", "master", m.Index, "addr", m.Addr, "err", m.Err)
		}
	}
	names := srv.Engine().Masters()
	if w := topologyWarning(len(names)); w != "" {
		log.Warn(w)
	}
	logQuarantine(log, srv.Engine())
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	if w := openListenerWarning(ln.Addr(), cfg.RequirePass, o.tls); w != "" {
		log.Warn(w, "addr", ln.Addr())
	}
	scheme := ""
	if o.tls != nil {
		ln, scheme = tls.NewListener(ln, o.tls), " (TLS)"
	}
	fmt.Fprintf(stdout, "redlock proxy listening on %s%s, masters %s (quorum %d)\n",
		ln.Addr(), scheme, strings.Join(names, ","), len(names)/2+1)
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
	log.Info("redlock proxy: shutting down", "timeout", o.shutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
	defer cancel()
	err = srv.Shutdown(sctx)
	if serr := <-served; serr != nil && !errors.Is(serr, proxy.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

// openListenerWarning says why a proxy listening on addr is open to
// anyone who reaches it ("" if it is not): an address beyond loopback
// (0.0.0.0 and :: included) with neither a password nor client
// certificates required.
func openListenerWarning(addr net.Addr, requirePass string, tc *tls.Config) string {
	if requirePass != "" || (tc != nil && tc.ClientAuth == tls.RequireAndVerifyClientCert) {
		return ""
	}
	if ta, ok := addr.(*net.TCPAddr); ok && ta.IP.IsLoopback() {
		return ""
	}
	return "listening beyond loopback without a password: whoever reaches the port can take and release locks (set --requirepass or $" + envProxyPassword + ")"
}

// listenerTLS builds the proxy's server TLS config from --tls-cert,
// --tls-key and --tls-client-ca (nil without --tls-cert).
func listenerTLS(certFile, keyFile, clientCA string) (*tls.Config, error) {
	if certFile == "" && keyFile == "" {
		if clientCA != "" {
			return nil, usageError{errors.New("--tls-client-ca needs --tls-cert and --tls-key")}
		}
		return nil, nil
	}
	if certFile == "" || keyFile == "" {
		return nil, usageError{errors.New("--tls-cert and --tls-key go together")}
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, usageError{fmt.Errorf("--tls-cert/--tls-key: %w", err)}
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if clientCA != "" {
		pool, err := loadCAs("tls-client-ca", clientCA)
		if err != nil {
			return nil, err
		}
		tc.ClientCAs, tc.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return tc, nil
}
