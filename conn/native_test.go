package conn_test

import (
	"context"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/internal/test/nativemaster"
	"github.com/redlock-dev/redlock/internal/test/netgate"
	"github.com/redlock-dev/redlock/resp"
)

// nativeConn starts one real master, a nativemaster front of version v
// for it, and a Conn to the front (Scripts loaded, as the engine does).
func nativeConn(t *testing.T, v nativemaster.Version, cfg conn.Config) (*conn.Conn, *nativemaster.Master) {
	t.Helper()
	set := mastertest.Start(t, 1)
	mastertest.RequireReal(t, set)
	front := nativemaster.Start(t, set.Addrs()[0], v)
	cfg.Scripts = []*conn.Script{scripts.Release, scripts.Extend, scripts.ReleaseMulti}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, err := conn.Dial(ctx, front.Addr(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, front
}

func releaseCmd(key, token string) []byte {
	b := scripts.Release.AppendEvalSha(nil, 1, 1)
	b = resp.AppendBulkString(b, key)
	return resp.AppendBulkString(b, token)
}

func extendCmd(key, token string, ms int64) []byte {
	b := scripts.Extend.AppendEvalSha(nil, 1, 2)
	b = resp.AppendBulkString(b, key)
	b = resp.AppendBulkString(b, token)
	return resp.AppendBulkInt(b, ms)
}

// do sends one request and returns its outcome.
func do(t *testing.T, c *conn.Conn, req conn.Request) resp.Reply {
	t.Helper()
	rec := newRecorder()
	req.Callback, req.Deadline, req.Stable = rec, time.Now().Add(5*time.Second), true
	if err := c.Do(req); err != nil {
		t.Fatal(err)
	}
	o := rec.wait(t, 1, 10*time.Second)[0]
	if o.err != nil {
		t.Fatalf("%q: %v", req.Cmd, o.err)
	}
	return o.rep
}

// TestNativeDetect: the Conn learns at connect which native commands its
// server has (COMMAND INFO, COMMAND DOCS SET), for each server version
// the test front reproduces, for Debian's Redis 7.0 (none) and when
// DisableNative is set (none, and nothing asked).
func TestNativeDetect(t *testing.T) {
	for _, tc := range []struct {
		name    string
		v       nativemaster.Version
		disable bool
		del     string
		set     bool
	}{
		{"redis 8.4", nativemaster.Redis84, false, "DELEX", true},
		{"valkey 9.0", nativemaster.Valkey90, false, "DELIFEQ", true},
		{"valkey 8.1", nativemaster.Valkey81, false, "", true},
		{"redis 7.0", nativemaster.Plain, false, "", false},
		{"redis 8.4, DisableNative", nativemaster.Redis84, true, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, front := nativeConn(t, tc.v, conn.Config{DisableNative: tc.disable})
			info := c.Info()
			if info.DeleteIfEqual != tc.del || info.SetIfEqual != tc.set {
				t.Fatalf("detected DeleteIfEqual %q SetIfEqual %v, want %q %v", info.DeleteIfEqual, info.SetIfEqual, tc.del, tc.set)
			}
			if asked := front.Count("COMMAND") > 0; asked == tc.disable {
				t.Fatalf("COMMAND sent %d times with DisableNative %v", front.Count("COMMAND"), tc.disable)
			}
			if info.RunID == "" {
				t.Fatal("no run_id: the INFO after the probe was not read")
			}
		})
	}
}

// TestNativeReleaseExtend: a release or extension sent as the script's
// EVALSHA goes out as the server's native command where it has one, with
// the script's replies (1 done, 0 not held; a key of another type is an
// error, as the script's GET makes it), and as EVALSHA where it has not.
func TestNativeReleaseExtend(t *testing.T) {
	for _, tc := range []struct {
		name        string
		v           nativemaster.Version
		del, setCmd string // the commands the front must see
	}{
		{"redis 8.4", nativemaster.Redis84, "DELEX", "SET"},
		{"valkey 9.0", nativemaster.Valkey90, "DELIFEQ", "SET"},
		{"valkey 8.1", nativemaster.Valkey81, "EVALSHA", "SET"},
		{"redis 7.0", nativemaster.Plain, "EVALSHA", "EVALSHA"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, front := nativeConn(t, tc.v, conn.Config{})
			script := func() int { return front.Count("EVALSHA") + front.Count("EVAL") }
			exec(t, c, "SET", "k", "tok", "PX", "60000")
			exec(t, c, "SET", "other", "tok", "PX", "60000")
			exec(t, c, "RPUSH", "list", "x")
			sent := func() int { // the extensions and releases the front saw
				if tc.del == tc.setCmd {
					return front.Count(tc.del)
				}
				return front.Count(tc.del) + front.Count(tc.setCmd)
			}
			before := sent()

			if r := do(t, c, conn.Request{Cmd: extendCmd("k", "tok", 90000), Script: scripts.Extend}); r.Type != resp.TypeInteger || r.Int != 1 {
				t.Fatalf("extend held: %v, want 1", r)
			}
			if ttl := exec(t, c, "PTTL", "k").Int; ttl <= 60000 || ttl > 90000 {
				t.Fatalf("PTTL after extend %d, want in (60000, 90000]", ttl)
			}
			if r := do(t, c, conn.Request{Cmd: extendCmd("k", "nope", 1000), Script: scripts.Extend}); r.Type != resp.TypeInteger || r.Int != 0 {
				t.Fatalf("extend with another token: %v, want 0", r)
			}
			if r := do(t, c, conn.Request{Cmd: extendCmd("missing", "tok", 1000), Script: scripts.Extend}); r.Type != resp.TypeInteger || r.Int != 0 {
				t.Fatalf("extend missing key: %v, want 0", r)
			}
			if exec(t, c, "EXISTS", "missing").Int != 0 {
				t.Fatal("extend created a missing key")
			}
			if r := do(t, c, conn.Request{Cmd: releaseCmd("k", "nope"), Script: scripts.Release}); r.Type != resp.TypeInteger || r.Int != 0 {
				t.Fatalf("release with another token: %v, want 0", r)
			}
			if string(exec(t, c, "GET", "k").Str) != "tok" {
				t.Fatal("a release with another token deleted the key")
			}
			if r := do(t, c, conn.Request{Cmd: releaseCmd("k", "tok"), Script: scripts.Release}); r.Type != resp.TypeInteger || r.Int != 1 {
				t.Fatalf("release held: %v, want 1", r)
			}
			if r := do(t, c, conn.Request{Cmd: releaseCmd("k", "tok"), Script: scripts.Release}); r.Type != resp.TypeInteger || r.Int != 0 {
				t.Fatalf("second release: %v, want 0", r)
			}
			if r := do(t, c, conn.Request{Cmd: releaseCmd("list", "x"), Script: scripts.Release}); !r.HasErrorPrefix("WRONGTYPE") {
				t.Fatalf("release of a list: %v, want WRONGTYPE", r)
			}
			if r := do(t, c, conn.Request{Cmd: extendCmd("list", "x", 1000), Script: scripts.Extend}); !r.HasErrorPrefix("WRONGTYPE") {
				t.Fatalf("extend of a list: %v, want WRONGTYPE", r)
			}
			if got := front.Count(tc.del); tc.del != "EVALSHA" && got != 4 {
				t.Fatalf("%s sent %d times, want 4 (the releases)", tc.del, got)
			}
			if tc.del != "EVALSHA" && tc.setCmd != "EVALSHA" && script() != 0 {
				t.Fatalf("%d script calls on a server with both native commands", script())
			}
			if got := sent() - before; got != 8 {
				t.Fatalf("%d extensions and releases counted, want 8", got)
			}
		})
	}
}

// TestNativeMergeMembers: releases that would be merged into one script
// call go out one native command each on a server that has it (no script
// at all), and merged on one that has not.
func TestNativeMergeMembers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		v      nativemaster.Version
		native bool
	}{{"redis 8.4", nativemaster.Redis84, true}, {"redis 7.0", nativemaster.Plain, false}} {
		t.Run(tc.name, func(t *testing.T) {
			set := mastertest.Start(t, 1)
			mastertest.RequireReal(t, set)
			front := nativemaster.Start(t, set.Addrs()[0], tc.v)
			c, g := gatedFront(t, front.Addr())
			m := conn.NewMerge(scripts.Release, scripts.ReleaseMulti, 1, 0)
			const n = 8
			for i := range n {
				exec(t, c, "SET", "m"+string(rune('a'+i)), "tok", "PX", "60000")
			}
			rec := newRecorder()
			release := busyWriter(t, c, g, rec)
			for i := range n {
				key := "m" + string(rune('a'+i))
				req := conn.Request{Cmd: releaseCmd(key, "tok"), Callback: rec, Tag: uint64(i), Stable: true, Merge: m, KeyHash: uint64(i + 1), Deadline: time.Now().Add(5 * time.Second)}
				if err := c.Do(req); err != nil {
					t.Fatal(err)
				}
			}
			release()
			for _, o := range rec.wait(t, n+1, 10*time.Second) {
				if o.tag == 100 {
					continue
				}
				if o.err != nil || o.rep.Type != resp.TypeInteger || o.rep.Int != 1 {
					t.Fatalf("member %d: %v %v, want 1", o.tag, o.rep, o.err)
				}
			}
			if tc.native && (front.Count("DELEX") != n || front.Count("EVALSHA") != 0) {
				t.Fatalf("DELEX %d EVALSHA %d, want %d and 0", front.Count("DELEX"), front.Count("EVALSHA"), n)
			}
			if !tc.native && (front.Count("EVALSHA") != 1 || front.Count("DELEX") != 0) {
				t.Fatalf("EVALSHA %d DELEX %d, want one merged call", front.Count("EVALSHA"), front.Count("DELEX"))
			}
		})
	}
}

// gatedFront dials addr through a netgate.Gate.
func gatedFront(t *testing.T, addr string) (*conn.Conn, *netgate.Gate) {
	t.Helper()
	g := netgate.New()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, err := conn.Dial(ctx, addr, conn.Config{Dialer: g.Dialer(), Scripts: []*conn.Script{scripts.Release, scripts.ReleaseMulti}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, g
}

// TestNativeRefusedFallsBack: a native command the server refuses — it
// claimed a command it lacks (ERR), or SET under maxmemory where the
// script's PEXPIRE is allowed (OOM) — fails that one request, never as a
// yes, and the rest of the session uses the scripts.
func TestNativeRefusedFallsBack(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    nativemaster.Version
		oom  bool
	}{{"claimed, missing", nativemaster.Liar, false}, {"OOM", nativemaster.Redis84, true}} {
		t.Run(tc.name, func(t *testing.T) {
			c, front := nativeConn(t, tc.v, conn.Config{})
			if c.Info().DeleteIfEqual != "DELEX" || !c.Info().SetIfEqual {
				t.Fatalf("the front did not claim the commands: %+v", c.Info())
			}
			exec(t, c, "SET", "k", "tok", "PX", "60000")
			if tc.oom {
				exec(t, c, "CONFIG", "SET", "maxmemory", "1")
				t.Cleanup(func() { exec(t, c, "CONFIG", "SET", "maxmemory", "0") })
			}
			if r := do(t, c, conn.Request{Cmd: extendCmd("k", "tok", 90000), Script: scripts.Extend}); !r.IsError() {
				t.Fatalf("refused native extension: %v, want its error", r)
			}
			if r := do(t, c, conn.Request{Cmd: extendCmd("k", "tok", 90000), Script: scripts.Extend}); r.Type != resp.TypeInteger || r.Int != 1 {
				t.Fatalf("extension after the refusal: %v, want 1 from the script", r)
			}
			if r := do(t, c, conn.Request{Cmd: releaseCmd("k", "tok"), Script: scripts.Release}); r.Type != resp.TypeInteger || r.Int != 1 {
				t.Fatalf("release after the refusal: %v, want 1 from the script", r)
			}
			if n := front.Count("SET"); n != 2 { // the key's SET and the refused extension
				t.Fatalf("SET sent %d times, want 2", n)
			}
			if front.Count("DELEX") != 0 || front.Count("EVALSHA") != 2 {
				t.Fatalf("DELEX %d, EVALSHA %d: want the scripts after the refusal", front.Count("DELEX"), front.Count("EVALSHA"))
			}
		})
	}
}
