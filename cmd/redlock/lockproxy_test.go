//go:build unix

package main

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/redcon"
)

// fakeProxy answers what redlock lock --proxy sends, as a proxy would,
// with the answers a test chooses: the first lockHeld REDLOCK.LOCKs are
// refused (held), the rest granted.
type fakeProxy struct {
	lockHeld int

	mu     sync.Mutex
	tokens []string // the token of each REDLOCK.LOCK, in order
}

func (f *fakeProxy) start(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go redcon.Serve(ln, f.handle, nil, nil)
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

func (f *fakeProxy) handle(c redcon.Conn, cmd redcon.Command) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch strings.ToUpper(string(cmd.Args[0])) {
	case "HELLO":
		c.WriteError("ERR unknown command 'HELLO'")
	case "INFO":
		c.WriteBulkString("# Proxy\r\ndrift_factor:0.01\r\ndrift_min_us:2000\r\n")
	case "REDLOCK.LOCK":
		f.tokens = append(f.tokens, string(cmd.Args[2]))
		if len(f.tokens) <= f.lockHeld {
			c.WriteNull()
			return
		}
		c.WriteInt(7)
	case "PTTL":
		c.WriteInt(1)
	case "EVAL": // extend, release
		c.WriteInt(1)
	default:
		c.WriteString("OK")
	}
}

// TestProxyLockFreshTokenPerAttempt: each REDLOCK.LOCK attempt carries a
// new token. The release of an attempt that went unanswered may still run
// after a later attempt's grant; with one token for every attempt it
// deleted that grant (review of issue #22).
func TestProxyLockFreshTokenPerAttempt(t *testing.T) {
	f := &fakeProxy{lockHeld: 2}
	addr := f.start(t)
	ctx := context.Background()
	l, halt, err := proxyAcquire(ctx, lockOpts{key: "k", ttl: 5 * time.Second, wait: 5 * time.Second, proxyAddr: addr, driftFactor: 0.01},
		slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer halt()
	f.mu.Lock()
	tokens := append([]string(nil), f.tokens...)
	f.mu.Unlock()
	if len(tokens) != 3 {
		t.Fatalf("%d REDLOCK.LOCK attempts, want 3 (2 refused, 1 granted)", len(tokens))
	}
	seen := map[string]bool{}
	for _, tok := range tokens {
		if seen[tok] {
			t.Fatalf("token %s sent by two attempts: %v", tok, tokens)
		}
		seen[tok] = true
	}
	if l.Token() != tokens[2] {
		t.Fatalf("lock token %s, granted attempt's %s", l.Token(), tokens[2])
	}
}
