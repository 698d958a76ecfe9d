package proxy

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/test/mastertest"
)

// grantPath is one way a client can get or keep a lock through the proxy.
type grantPath struct {
	name    string
	acquire bool                                 // takes a free key (else extends a held one)
	cmd     func(key, token, ms string) []string // the client's command
	// held is the value a master holds for the extending client's token
	// (nil: the token itself).
	held func(token string) string
}

// grantPaths lists every command the proxy maps to a grant or an
// extension: SET NX PX, REDLOCK.LOCK, PEXPIRE, each recognised library
// script of Op acquire or extend (redis-py's extend in both modes), and
// each Redisson acquisition script. A new script of those kinds is in the
// list by construction.
func grantPaths() []grantPath {
	paths := []grantPath{
		{name: "SET NX PX", acquire: true, cmd: func(k, tok, ms string) []string { return []string{"SET", k, tok, "NX", "PX", ms} }},
		{name: "REDLOCK.LOCK", acquire: true, cmd: func(k, tok, ms string) []string { return []string{"REDLOCK.LOCK", k, tok, ms} }},
		{name: "PEXPIRE", cmd: func(k, _, ms string) []string { return []string{"PEXPIRE", k, ms} }},
		{name: "SET IFEQ", cmd: func(k, tok, ms string) []string { return []string{"SET", k, tok, "IFEQ", tok, "PX", ms} }},
	}
	for i := range libTable {
		ls := &libTable[i]
		if ls.Op != opAcquire && ls.Op != opExtend {
			continue
		}
		modes := []string{""}
		if ls.AddOrReplace {
			modes = []string{"1", "0"} // replace, add
		}
		for _, mode := range modes {
			name := ls.Name
			if mode != "" {
				name += " mode " + mode
			}
			paths = append(paths, grantPath{name: name, acquire: ls.Op == opAcquire, cmd: func(k, tok, ms string) []string {
				argv := make([]string, max(ls.TokenArg, ls.TTLArg, ls.PrefixArg, 2)+1)
				argv[ls.TokenArg], argv[ls.TTLArg] = tok, ms
				if ls.PrefixArg > 0 {
					argv[ls.PrefixArg] = strconv.Itoa(len(tok))
				}
				if mode != "" {
					argv[2] = mode
				}
				for len(argv) > 0 && argv[len(argv)-1] == "" {
					argv = argv[:len(argv)-1]
				}
				return append([]string{"EVALSHA", ls.SHA, "1", k}, argv...)
			}})
		}
	}
	// Redisson's acquisitions (from zero, or a re-entry) and renewals:
	// holds on the masters (redisson_hold.go), each change through the
	// engine's grant rule.
	for i := range rTable {
		rs := &rTable[i]
		switch rs.Kind {
		case rTryLock, rFencedTryLock, rFencedTryLockToken:
			paths = append(paths, grantPath{name: rs.Name, acquire: true, cmd: func(k, tok, ms string) []string {
				keys := []string{k}
				if rs.Keys == 2 {
					keys = append(keys, rTokenPrefix+k)
				}
				return append(append([]string{"EVALSHA", rs.SHA, strconv.Itoa(len(keys))}, keys...), ms, tok)
			}})
		case rRenew:
			paths = append(paths, grantPath{name: rs.Name, cmd: func(k, tok, ms string) []string {
				return []string{"EVALSHA", rs.SHA, "1", k, ms, tok}
			}, held: func(tok string) string { return rHold{owner: tok, kind: 'R', count: 1, rand: "00"}.value() }})
		}
	}
	return paths
}

// isGrant reports whether a proxy reply says the lock was taken or kept.
func isGrant(r string) bool {
	return r == "+OK\r\n" || r == ":1\r\n" || (strings.HasPrefix(r, ":") && r != ":0\r\n" && !strings.HasPrefix(r, ":-"))
}

// TestGrantRuleEveryPath: after three of five masters restart empty, a
// key still held by its first holder on the other two must not be granted
// or extended to anyone else by any path — SET NX PX, REDLOCK.LOCK, every
// library script, PEXPIRE, SET IFEQ: the restarted masters are in quarantine and
// their grants do not count, so only two masters can answer and the proxy
// answers the unavailable error. And no path accepts a TTL beyond MaxTTL
// (the quarantine period rests on it). Before the grant rule was shared,
// every broadcast library script (bsm's obtain, node-redlock's acquire,
// redsync's touch-with-setnx, redis-py's adding extend, …) and PEXPIRE
// answered success here: two holders.
func TestGrantRuleEveryPath(t *testing.T) {
	e := startEnv(t, 5, func(c *Config) {
		c.EngineConfig.MaxTTL = 10 * time.Second
		c.AllowTokenlessWrites = true // PEXPIRE is a path too
		c.EngineConfig.Conn.ReconnectMin, c.EngineConfig.Conn.ReconnectMax = time.Millisecond, 20*time.Millisecond
	})
	mastertest.RequireReal(t, e.set)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := dialRaw(t, e.addr)
	paths := grantPaths()
	key := func(p grantPath) string { return "g:{" + p.name + "}" }
	const holder = "holder-token-0123456789"
	const other = "other-token-0123456789ab"

	// TTLs beyond MaxTTL are refused by every path, before any master
	// is asked.
	for _, p := range paths {
		got := c.cmd(p.cmd(key(p)+":long", other, "10001")...)
		if !strings.HasPrefix(got, "-ERR") || !strings.Contains(got, "maximum TTL") {
			t.Errorf("%s with a TTL over MaxTTL: %q; want the maximum TTL refusal", p.name, got)
		}
	}

	for _, p := range paths {
		if got := c.cmd("SET", key(p), holder, "NX", "PX", "9000"); got != "+OK\r\n" {
			t.Fatalf("holder of %s: %q", key(p), got)
		}
	}
	restartEmpty(t, e, 0, 1, 2)
	for !strings.Contains(c.cmd("INFO", "masters"), "masters_quarantined:3") {
		if ctx.Err() != nil {
			t.Fatalf("the restarted masters are not quarantined: %q", c.cmd("INFO", "masters"))
		}
		time.Sleep(5 * time.Millisecond)
	}
	// What the restarted masters may have granted meanwhile: the
	// extending client's token (for the extension paths).
	for _, p := range paths {
		if !p.acquire {
			v := other
			if p.held != nil {
				v = p.held(other)
			}
			for _, m := range e.masters[:3] {
				// The first command on a pooled connection to a
				// restarted master may meet the old, closed socket.
				for err := m.Set(ctx, key(p), v, 9*time.Second).Err(); err != nil; err = m.Set(ctx, key(p), v, 9*time.Second).Err() {
					if ctx.Err() != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
	for _, p := range paths {
		got := c.cmd(p.cmd(key(p), other, "9000")...)
		if isGrant(got) || !strings.HasPrefix(got, "-ERR redlock proxy: unavailable") {
			t.Errorf("%s while the first holder's lock is valid and 3 of 5 masters are quarantined: %q; want the unavailable error", p.name, got)
		}
	}
	for _, p := range paths {
		if n := e.holding(t, key(p), holder); n != 2 {
			t.Errorf("%s: %d masters hold the first holder's token, want 2 (3 and 4)", p.name, n)
		}
	}
}

// restartEmpty kills masters idx of e (no persistence: they lose every
// key), starts them again on the same ports, and waits until the proxy
// is connected to every master.
func restartEmpty(t *testing.T, e *env, idx ...int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, i := range idx {
		m := e.set.Masters()[i]
		if err := m.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := m.Restart(ctx); err != nil {
			t.Fatal(err)
		}
	}
	c := dialRaw(t, e.addr)
	for !strings.Contains(c.cmd("INFO", "masters"), "masters_up:"+strconv.Itoa(len(e.masters))) {
		if ctx.Err() != nil {
			t.Fatal("masters did not reconnect")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestFirstContactQuarantine: a proxy that never met the masters before
// (a fresh process) does not trust masters younger than MaxTTL: they may
// have restarted and lost locks other processes hold. Before, a fresh
// process trusted them at once.
func TestFirstContactQuarantine(t *testing.T) {
	e := startEnv(t, 5, func(c *Config) {
		c.EngineConfig.FreshMasters = false
		c.EngineConfig.MaxTTL = 30 * time.Second
	})
	c := dialRaw(t, e.addr)
	if got := c.cmd("SET", "fc:key", "token", "NX", "PX", "5000"); !strings.HasPrefix(got, "-ERR redlock proxy: unavailable") || !strings.Contains(got, "in restart quarantine") {
		t.Fatalf("SET NX PX on five masters younger than MaxTTL: %q; want the unavailable error naming the quarantine", got)
	}
	if info := c.cmd("INFO", "masters"); !strings.Contains(info, "masters_quarantined:5") {
		t.Fatalf("INFO masters: %q", info)
	}
}
