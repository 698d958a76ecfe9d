package proxy

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/localmaster"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/internal/test/relay"
	"github.com/redlock-dev/redlock/proxy/internal/respserver"
	"github.com/redlock-dev/redlock/resp"
)

// env is a proxy in front of real local masters, plus direct clients to
// each master for checking what they hold.
type env struct {
	set     *localmaster.Set
	srv     *Server
	addr    string
	masters []*redis.Client
}

func startEnv(t *testing.T, n int, mod func(*Config)) *env {
	t.Helper()
	return startEnvOn(t, mastertest.Start(t, n), mod)
}

// startEnvOn starts a proxy over the masters of set.
func startEnvOn(t *testing.T, set *localmaster.Set, mod func(*Config)) *env {
	t.Helper()
	// Generous per-master timeouts: -race on 2 noisy cores.
	cfg := Config{EngineConfig: engine.Config{FreshMasters: true, Addrs: set.Addrs(), MasterTimeout: 300 * time.Millisecond}}
	if mod != nil {
		mod(&cfg)
	}
	if cfg.EventLoops > 0 && !respserver.LoopsSupported {
		t.Skip("no event loop here (epoll: Linux)")
	}
	srv, addr := serve(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Every master connected (and no server listed twice), so that a
	// test can expect a grant on every master.
	if _, err := srv.Engine().WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Engine().WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	e := &env{set: set, srv: srv, addr: addr}
	for _, a := range set.Addrs() {
		c := redis.NewClient(&redis.Options{Addr: a, Protocol: 2, DisableIndentity: true, MaxRetries: -1})
		e.masters = append(e.masters, c)
	}
	t.Cleanup(func() {
		for _, c := range e.masters {
			c.Close()
		}
	})
	return e
}

// serve starts a proxy with cfg on a loopback port, closed (and its Serve
// checked) when t ends, and returns it and its address.
func serve(t *testing.T, cfg Config) (*Server, string) {
	t.Helper()
	srv, err := New(cfg)
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
		if err := <-served; err != ErrServerClosed {
			t.Errorf("Serve: %v", err)
		}
	})
	return srv, ln.Addr().String()
}

// client returns a go-redis client with its default handshake (HELLO 3
// first, then RESP2 fallback).
func (e *env) client(t *testing.T) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: e.addr, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	return c
}

// holding counts the masters whose key holds value.
func (e *env) holding(t *testing.T, key, value string) int {
	t.Helper()
	n := 0
	for _, m := range e.masters {
		v, err := m.Get(context.Background(), key).Result()
		if err == nil && v == value {
			// -1: no TTL (a bug); -2: gone since the GET (expired, released).
			if pttl, _ := m.PTTL(context.Background(), key).Result(); pttl == -1 {
				t.Errorf("master %s: %s held without TTL", m.Options().Addr, key)
			}
			n++
		}
	}
	return n
}

// waitHolding waits up to 5 s until n masters hold key with value:
// an operation answers at a quorum, the other masters follow.
func (e *env) waitHolding(t *testing.T, key, value string, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for got := e.holding(t, key, value); got != n; got = e.holding(t, key, value) {
		if time.Now().After(deadline) {
			t.Fatalf("%d masters hold %s=%s, want %d", got, key, value, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (e *env) quorum() int { return len(e.masters)/2 + 1 }

// requirePeer skips (or fails with REDLOCK_REQUIRE_PEERS=1) when a peer
// tool is missing.
func requirePeer(t *testing.T, what string, ok bool) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv("REDLOCK_REQUIRE_PEERS") == "1" {
		t.Fatalf("%s is missing (REDLOCK_REQUIRE_PEERS=1; run make deps)", what)
	}
	t.Skipf("%s is missing (run make deps)", what)
}

func haveCmd(name string) bool {
	_, err := exec.LookPath(name)
	return err == nil
}

// startRelays starts a relay (internal/test/relay) in front of each
// address, closed when t ends; it returns them and their addresses.
func startRelays(t *testing.T, targets []string) ([]*relay.Relay, []string) {
	t.Helper()
	var relays []*relay.Relay
	var addrs []string
	for _, a := range targets {
		r, err := relay.Start(a)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		relays, addrs = append(relays, r), append(addrs, r.Addr())
	}
	return relays, addrs
}

// loopModes are the two paths a scenario of the event loop's tests runs
// on: the loop (EventLoops: 1) and the goroutine path (EventLoops: -1),
// the reference behaviour.
var loopModes = []struct {
	name  string
	loops int
}{{"loop", 1}, {"goroutines", -1}}

// waitClosedRaw reads from nc until it is closed (true) or d passes (false).
func waitClosedRaw(nc net.Conn, d time.Duration) (closed bool, extra int) {
	nc.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 4096)
	for {
		n, err := nc.Read(buf)
		extra += n
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return false, extra
			}
			return true, extra
		}
	}
}

// echoRequests returns n pipelined ECHOs of 8000 bytes. Built before the
// client dials: building 9.6 MB under the race detector on a busy machine
// took longer than a test's IdleTimeout, and the proxy rightly closed the
// client as idle before it sent anything.
func echoRequests(n int) []byte {
	arg := strings.Repeat("x", 8000)
	var req []byte
	for range n {
		req = append(req, "*2\r\n$4\r\nECHO\r\n$8000\r\n"...)
		req = append(req, arg...)
		req = append(req, "\r\n"...)
	}
	return req
}

// sendEchos writes req (echoRequests) to nc (their replies fill a small
// receive buffer: the proxy's writes block), the write bounded by d.
func sendEchos(nc net.Conn, req []byte, d time.Duration) {
	// Written here until the proxy stops reading (its output backed up:
	// the write blocks), the rest from a goroutine: when sendEchos
	// returns, the proxy holds replies it cannot write, however late that
	// goroutine runs on a busy machine (a client whose requests arrive
	// later than IdleTimeout after it connected is idle).
	nc.SetWriteDeadline(time.Now().Add(300 * time.Millisecond))
	w, err := nc.Write(req)
	if err == nil {
		return
	}
	go func() {
		nc.SetWriteDeadline(time.Now().Add(d))
		nc.Write(req[w:])
	}()
}

// dialSmallRcv dials addr with a small receive buffer (set before the
// connection, so the window stays small).
func dialSmallRcv(t *testing.T, addr string, size int) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		rc.Control(func(fd uintptr) {
			syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, size)
		})
		return nil
	}}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return nc
}

// readAllReplies reads RESP replies from a until it is closed or d passes.
func readAllReplies(a *rawConn, d time.Duration) (got []string, closed bool) {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		a.nc.SetReadDeadline(end)
		r, err := a.rd.ReadReply()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return got, false
			}
			return got, true
		}
		got = append(got, string(resp.AppendReply(nil, r)))
	}
	return got, false
}

// slowAsync makes every asynchronous command take d more (a stand-in for
// a slow master); it is undone when t ends.
func slowAsync(t *testing.T, d time.Duration) {
	hook := func(where string, _ [][]byte) {
		if where == "async" {
			time.Sleep(d)
		}
	}
	respserver.SetTestHook(hook)
	t.Cleanup(func() { respserver.SetTestHook(nil) })
}

// sha1Hex is the SHA1 of src in hex: how clients name a script.
func sha1Hex(src []byte) string {
	sum := sha1.Sum(src)
	return hex.EncodeToString(sum[:])
}
