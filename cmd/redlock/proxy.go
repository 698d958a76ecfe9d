package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/redlock-dev/redlock/proxy"
)

// proxyCmd runs `redlock proxy`: a RESP server mapping client lock commands
// to Redlock quorum operations, until SIGINT/SIGTERM (graceful shutdown).
func proxyCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("proxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg proxy.Config
	masters := fs.String("masters", "", "comma-separated host:port of the Redis masters (required)")
	fs.StringVar(&cfg.Listen, "listen", proxy.DefaultListen, "address to listen on")
	fs.StringVar(&cfg.RequirePass, "requirepass", "", "password clients must AUTH with")
	fs.StringVar(&cfg.Conn.Password, "master-password", "", "password sent to the masters")
	fs.IntVar(&cfg.MaxClients, "max-clients", proxy.DefaultMaxClients, "maximum concurrent client connections")
	fs.IntVar(&cfg.MaxRequestBytes, "max-request-bytes", proxy.DefaultMaxRequestBytes, "maximum bytes of one request")
	fs.DurationVar(&cfg.IdleTimeout, "idle-timeout", 0, "close client connections idle this long (0: never)")
	fs.IntVar(&cfg.MaxPipeline, "max-pipeline", proxy.DefaultMaxPipeline, "commands in flight per connection")
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
	cfg.Addrs = splitList(*masters)
	if len(cfg.Addrs) == 0 {
		return usageError{errors.New("--masters is required")}
	}
	srv, err := proxy.New(cfg)
	if errors.Is(err, proxy.ErrBadConfig) {
		return usageError{err}
	}
	if err != nil {
		return err
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "redlock proxy listening on %s, masters %s (quorum %d)\n",
		ln.Addr(), strings.Join(cfg.Addrs, ","), len(cfg.Addrs)/2+1)
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
