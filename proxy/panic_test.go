package proxy

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/redlock-dev/redlock/internal/test/proctest"
	"github.com/redlock-dev/redlock/proxy/internal/respserver"
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
	respserver.SetTestHook(hook)
	defer respserver.SetTestHook(nil)
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
	respserver.SetTestHook(nil)
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

// TestLoopPanicLosesEarlierReply: a panic while dispatching one
// command of a pipeline closes the connection, but the replies of the
// commands before it are still written first, in order.
//
// Found by the event loop's first review (a helper's adversarial read of
// commit 34f6669): it failed on the loop before its fix.
func TestLoopPanicLosesEarlierReply(t *testing.T) {
	hook := func(where string, args [][]byte) {
		if where == "dispatch" && len(args) == 2 && string(args[1]) == "boom" {
			panic("review: test panic in dispatch")
		}
	}
	respserver.SetTestHook(hook)
	defer respserver.SetTestHook(nil)
	for _, m := range loopModes {
		t.Run(m.name, func(t *testing.T) {
			e := startEnv(t, 1, func(c *Config) { c.EventLoops = m.loops })
			a := dialRaw(t, e.addr)
			if got := a.cmd("PING"); got != "+PONG\r\n" {
				t.Fatalf("PING: %q", got)
			}
			a.send("PING first\r\nECHO boom\r\n")
			var got []string
			for {
				r := a.read()
				if r == "" {
					break
				}
				got = append(got, r)
			}
			want := []string{"$5\r\nfirst\r\n", "-ERR redlock proxy internal error; closing the connection\r\n"}
			if strings.Join(got, "|") != strings.Join(want, "|") {
				t.Fatalf("replies %q, want %q", got, want)
			}
		})
	}
}
