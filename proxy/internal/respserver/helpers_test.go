package respserver_test

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/tidwall/redcon"

	"github.com/redlock-dev/redlock/proxy/internal/respserver"
)

// testConfig is a small server's limits, with its client paths (loops: 0
// goroutines, n event loops) and commands.
func testConfig(loops int, cmds ...*respserver.Command) respserver.Config {
	return respserver.Config{
		MaxClients: 10, MaxRequestBytes: 1 << 20, MaxArgs: 64, MaxPipeline: 1024, MaxInFlight: 64,
		MaxClientMemory: 8 << 20, QueueTimeout: time.Second, AuthTimeout: time.Second, RequestTimeout: time.Second,
		EventLoops:    loops,
		Commands:      cmds,
		LatencyTarget: 50 * time.Millisecond,
		ClosedReply:   func(err error) []byte { return redcon.AppendError(nil, "ERR closed: "+err.Error()) },
		CloseWait:     time.Second,
	}
}

// serve starts a server with cfg on a loopback port, closed (and its
// Serve checked) when t ends; it returns the server and its address.
func serve(t *testing.T, cfg respserver.Config) (*respserver.Server, string) {
	t.Helper()
	srv, err := respserver.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-served; !errors.Is(err, respserver.ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	})
	return srv, ln.Addr().String()
}
