package proxy

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/redlock-dev/redlock/internal/scripts"
)

// RESP3: a client that says HELLO 3 gets RESP3 replies (a map for HELLO,
// "_" for nulls, pushes for pub/sub); the others keep RESP2 (issue #44).

// TestRESP3Wire checks the RESP3 encodings on the wire, and that RESET and
// HELLO 2 return the connection to RESP2.
func TestRESP3Wire(t *testing.T) {
	e := startEnv(t, 3, nil)
	c := dialRaw(t, e.addr)
	for _, tc := range []struct {
		name string
		args []string
		want string // exact, or a prefix ending in "*"
	}{
		{"null before HELLO 3", []string{"GET", "r3:none"}, "$-1\r\n"},
		{"hello 3", []string{"HELLO", "3", "SETNAME", "r3"}, "%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n*"},
		{"acquire", []string{"SET", "r3:k", "tok-0123456789abcdef", "NX", "PX", "5000"}, "+OK\r\n"},
		{"held: null", []string{"SET", "r3:k", "other-0123456789abcde", "NX", "PX", "5000"}, "_\r\n"},
		{"get null", []string{"GET", "r3:none"}, "_\r\n"},
		{"getname", []string{"CLIENT", "GETNAME"}, "$2\r\nr3\r\n"},
		{"config get is a map", []string{"CONFIG", "GET", "maxmemory"}, "%0\r\n"},
		{"command docs is a map", []string{"COMMAND", "DOCS"}, "%0\r\n"},
		{"tracking optin", []string{"CLIENT", "TRACKING", "ON", "OPTIN"}, "+OK\r\n"},
		{"tracking every read", []string{"CLIENT", "TRACKING", "ON"}, "-ERR redlock proxy: client-side caching is not served*"},
		{"tracking bcast", []string{"CLIENT", "TRACKING", "ON", "BCAST"}, "-ERR redlock proxy: client-side caching is not served*"},
		{"caching", []string{"CLIENT", "CACHING", "YES"}, "-ERR redlock proxy: client-side caching is not served*"},
		{"tracking off", []string{"CLIENT", "TRACKING", "OFF"}, "+OK\r\n"},
		{"hello 4", []string{"HELLO", "4"}, "-NOPROTO*"},
		{"still RESP3", []string{"GET", "r3:none"}, "_\r\n"},
		{"reset", []string{"RESET"}, "+RESET\r\n"},
		{"RESP2 after RESET", []string{"GET", "r3:none"}, "$-1\r\n"},
		{"hello 3 again", []string{"HELLO", "3"}, "%7\r\n*"},
		{"hello 2", []string{"HELLO", "2"}, "*14\r\n*"},
		{"RESP2 after HELLO 2", []string{"GET", "r3:none"}, "$-1\r\n"},
	} {
		checkReply(t, c.cmd(tc.args...), tc.want)
		if t.Failed() {
			t.Fatalf("at %q", tc.name)
		}
	}
}

// TestRESP3HelloAuth: AUTH inside HELLO 3 on a password-protected proxy.
func TestRESP3HelloAuth(t *testing.T) {
	e := startEnv(t, 3, func(c *Config) { c.RequirePass = "s3cret-pass" })
	c := dialRaw(t, e.addr)
	checkReply(t, c.cmd("HELLO", "3", "AUTH", "default", "wrong"), "-WRONGPASS*")
	checkReply(t, c.cmd("GET", "k"), "-NOAUTH*")
	checkReply(t, c.cmd("HELLO", "3", "AUTH", "default", "s3cret-pass"), "%7\r\n*")
	checkReply(t, c.cmd("GET", "r3:none"), "_\r\n")
}

// TestRESP3PubSub: a RESP3 subscriber gets its subscription replies and
// the wake-up messages as pushes.
func TestRESP3PubSub(t *testing.T) {
	e := startEnv(t, 3, nil)
	sub := dialRaw(t, e.addr)
	checkReply(t, sub.cmd("HELLO", "3"), "%7\r\n*")
	ch := "redisson_lock__channel:{r3lock}"
	checkReply(t, sub.cmd("SUBSCRIBE", ch), ">3\r\n$9\r\nsubscribe\r\n$"+strconv.Itoa(len(ch))+"\r\n"+ch+"\r\n:1\r\n")
	checkReply(t, sub.cmd("PING"), "+PONG\r\n")
	e.srv.lc.Redisson().Wake(ch)
	checkReply(t, sub.read(), ">3\r\n$7\r\nmessage\r\n*")
	checkReply(t, sub.cmd("UNSUBSCRIBE"), ">3\r\n$11\r\nunsubscribe\r\n*")
}

// TestRueidisDefaultOptions (issue #44): rueidis with its default options
// (RESP3, client-side caching's CLIENT TRACKING ON OPTIN) connects and
// takes and releases a lock through the proxy.
func TestRueidisDefaultOptions(t *testing.T) {
	e := startEnv(t, 3, nil)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{e.addr}, DisableRetry: true})
	if err != nil {
		t.Fatalf("rueidis with default options: %v", err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const key, tok = "r3:rueidis", "rueidis-token-0123456789"
	if err := c.Do(ctx, c.B().Set().Key(key).Value(tok).Nx().Px(5*time.Second).Build()).Error(); err != nil {
		t.Fatalf("SET NX PX: %v", err)
	}
	if err := c.Do(ctx, c.B().Set().Key(key).Value("other-token-0123456789").Nx().Px(5*time.Second).Build()).Error(); !rueidis.IsRedisNil(err) {
		t.Fatalf("SET NX PX of a held key: %v; want a RESP3 null (rueidis.Nil)", err)
	}
	n, err := c.Do(ctx, c.B().Eval().Script(scripts.Release.Source()).Numkeys(1).Key(key).Arg(tok).Build()).AsInt64()
	if err != nil || n != 1 {
		t.Fatalf("release: %d, %v; want 1", n, err)
	}
	if err := c.Do(ctx, c.B().Set().Key(key).Value("other-token-0123456789").Nx().Px(5*time.Second).Build()).Error(); err != nil {
		t.Fatalf("SET NX PX after the release: %v", err)
	}
}

// TestGoRedisRESP3: go-redis v9 with its default protocol (3) takes,
// finds held and releases a lock through the proxy.
func TestGoRedisRESP3(t *testing.T) {
	e := startEnv(t, 3, nil)
	c := redis.NewClient(&redis.Options{Addr: e.addr, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const key, tok = "r3:goredis", "goredis-token-012345678"
	if ok, err := c.SetNX(ctx, key, tok, 5*time.Second).Result(); !ok || err != nil {
		t.Fatalf("SetNX: %v %v", ok, err)
	}
	if ok, err := c.SetNX(ctx, key, "other-token-0123456789", 5*time.Second).Result(); ok || err != nil {
		t.Fatalf("SetNX of a held key: %v %v; want false", ok, err)
	}
	if n, err := c.Eval(ctx, scripts.Release.Source(), []string{key}, tok).Int64(); n != 1 || err != nil {
		t.Fatalf("release: %d %v", n, err)
	}
	if v, err := c.Do(ctx, "HELLO").Result(); err != nil || !strings.Contains(strings.ToLower(fmtAny(v)), "proto:3") {
		t.Fatalf("HELLO on go-redis's connection: %v %v; want proto 3", v, err)
	}
}

// fmtAny renders a go-redis RESP3 map reply as "key:value" pairs.
func fmtAny(v any) string {
	m, ok := v.(map[any]any)
	if !ok {
		return ""
	}
	var b strings.Builder
	for k, x := range m {
		b.WriteString(strings.ToLower(strings.TrimSpace(strings.Trim(strings.ReplaceAll(strings.ToLower(toString(k))+":"+toString(x), " ", ""), "\n"))))
		b.WriteByte(' ')
	}
	return b.String()
}

func toString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	}
	return ""
}

// TestRedisCliRESP3: redis-cli -3 takes a lock through the proxy.
func TestRedisCliRESP3(t *testing.T) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Skip("no redis-cli (Debian: redis-tools)")
	}
	e := startEnv(t, 3, nil)
	host, port, _ := strings.Cut(e.addr, ":")
	run := func(args ...string) string {
		out, err := exec.Command(cli, append([]string{"-3", "-h", host, "-p", port}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli -3 %q: %v %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := run("SET", "r3:cli", "cli-token-0123456789ab", "NX", "PX", "5000"); got != "OK" {
		t.Fatalf("redis-cli -3 SET NX PX: %q", got)
	}
	if got := run("SET", "r3:cli", "other-token-0123456789", "NX", "PX", "5000"); got != "(nil)" && got != "" {
		t.Fatalf("redis-cli -3 SET NX PX of a held key: %q; want (nil)", got)
	}
	if got := run("HELLO", "3"); !strings.Contains(got, "proto") || !strings.Contains(got, "3") {
		t.Fatalf("redis-cli -3 HELLO 3: %q", got)
	}
}

// TestGoRedis903 (issue #44): go-redis v9.0.3 — the release bsm/redislock
// v0.9.4 pins, which falls back to RESP2 only on "unknown command" — with
// its default options takes and releases a lock through the proxy. It is a
// module of its own (internal/test/goredis903): one go.mod cannot hold it
// beside the main module's go-redis.
func TestGoRedis903(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module of its own")
	}
	e := startEnv(t, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "run", ".", "-addr", e.addr)
	cmd.Dir = "../internal/test/goredis903"
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("go-redis v9.0.3 through the proxy: %v\n%s", err, out)
	}
}
