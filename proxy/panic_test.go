package proxy

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/redlock-dev/redlock/internal/test/proctest"
)

// TestPanicContained: a panic while serving one connection — in the reader
// or in a command running on its own goroutine — is logged with the remote
// address, counted, and closes that connection only.
func TestPanicContained(t *testing.T) {
	var logs proctest.Buffer
	hook := func(where string, args [][]byte) {
		switch {
		case where == "dispatch" && len(args) == 2 && string(args[1]) == "boom":
			panic("test panic in the reader")
		case where == "async" && strings.Contains(logs.String(), "reader"):
			panic("test panic in a command")
		}
	}
	testHook.Store(&hook)
	defer testHook.Store(nil)
	e := startEnv(t, 3, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	bystander := dialRaw(t, e.addr)
	if got := bystander.cmd("SET", "pc:1", "tok", "NX", "PX", "10000"); got != "+OK\r\n" {
		t.Fatalf("before: %q", got)
	}

	a := dialRaw(t, e.addr)
	if got := a.cmd("ECHO", "boom"); !strings.HasPrefix(got, "-ERR redlock proxy internal error") {
		t.Fatalf("panicking command: %q", got)
	}
	if got := a.read(); got != "" {
		t.Fatalf("the panicking connection stays open: %q", got)
	}
	if !strings.Contains(logs.String(), a.nc.LocalAddr().String()) {
		t.Fatalf("the log does not name the client %s:\n%s", a.nc.LocalAddr(), logs.String())
	}
	// Now every asynchronous command panics.
	b := dialRaw(t, e.addr)
	if got := b.cmd("GET", "pc:1"); !strings.HasPrefix(got, "-ERR redlock proxy internal error") {
		t.Fatalf("panicking async command: %q\n%s", got, logs.String())
	}
	if got := b.read(); got != "" {
		t.Fatalf("the connection of the panicking command stays open: %q", got)
	}
	testHook.Store(nil)
	if got := bystander.cmd("PING"); got != "+PONG\r\n" {
		t.Fatalf("another client after the panics: %q", got)
	}
	if got := bystander.cmd("SET", "pc:2", "tok", "NX", "PX", "10000"); got != "+OK\r\n" {
		t.Fatalf("another client's lock after the panics: %q", got)
	}
	if got := bystander.cmd("INFO", "proxy"); !strings.Contains(got, "panics_recovered:2\r\n") {
		t.Fatalf("INFO: %q", got)
	}
}
