package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/internal/test/proctest"
	"github.com/redlock-dev/redlock/proxy/internal/lockcmds"
	"github.com/redlock-dev/redlock/proxy/internal/respserver"
	"github.com/redlock-dev/redlock/resp"
)

// rawConn is a client that writes bytes and reads RESP replies.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	rd *resp.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc, rd: resp.NewReader(nc)}
}

func (c *rawConn) send(s string) {
	c.t.Helper()
	if _, err := c.nc.Write([]byte(s)); err != nil {
		c.t.Fatal(err)
	}
}

func (c *rawConn) cmd(args ...string) string {
	c.t.Helper()
	c.send(string(resp.AppendCommandStrings(nil, args...)))
	return c.read()
}

// read returns the next reply in RESP encoding ("" on a closed connection).
func (c *rawConn) read() string {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	r, err := c.rd.ReadReply()
	if err != nil {
		return ""
	}
	return string(resp.AppendReply(nil, r))
}

func manyKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprint("many:", i)
	}
	return keys
}

// checkReply compares a reply with want: exact, or a prefix when want ends
// in "*".
func checkReply(t *testing.T, got, want string) {
	t.Helper()
	if p, ok := strings.CutSuffix(want, "*"); ok {
		if !strings.HasPrefix(got, p) {
			t.Fatalf("got %q, want prefix %q", got, p)
		}
	} else if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestCommands(t *testing.T) {
	e := startEnv(t, 3, func(c *Config) { c.AllowTokenlessWrites = true })
	c := dialRaw(t, e.addr)
	long := strings.Repeat("v", 600)
	cases := []struct {
		name string
		args []string
		want string // exact reply, or a prefix ending in "*"
	}{
		{"ping", []string{"PING"}, "+PONG\r\n"},
		{"ping msg", []string{"ping", "hi"}, "$2\r\nhi\r\n"},
		{"echo", []string{"ECHO", "x y"}, "$3\r\nx y\r\n"},
		{"hello 4", []string{"HELLO", "4"}, "-NOPROTO*"},
		{"hello 2", []string{"HELLO", "2", "SETNAME", "me"}, "*14\r\n*"},
		{"client getname", []string{"CLIENT", "GETNAME"}, "$2\r\nme\r\n"},
		{"client setinfo", []string{"CLIENT", "SETINFO", "LIB-NAME", "x"}, "+OK\r\n"},
		{"client id", []string{"CLIENT", "ID"}, ":*"},
		{"client list", []string{"CLIENT", "LIST"}, "-ERR unknown or unsupported command 'CLIENT LIST'\r\n"},
		{"select 0", []string{"SELECT", "0"}, "+OK\r\n"},
		{"select 1", []string{"SELECT", "1"}, "-ERR DB index is out of range*"},
		{"command count", []string{"COMMAND", "COUNT"}, fmt.Sprintf(":%d\r\n", len((&lockcmds.Commands{}).Table())+len(respserver.ServerCommands()))},
		{"command docs", []string{"COMMAND", "DOCS"}, "*0\r\n"},
		{"command", []string{"COMMAND"}, fmt.Sprintf("*%d\r\n*", len((&lockcmds.Commands{}).Table())+len(respserver.ServerCommands()))},
		{"info", []string{"INFO"}, "$*"},
		{"auth without pass", []string{"AUTH", "x"}, "-ERR AUTH <password> called without*"},
		{"unknown", []string{"FLUSHALL"}, "-ERR unknown or unsupported command 'FLUSHALL'\r\n"},
		{"set nx px", []string{"SET", "c:1", "t1", "NX", "PX", "10000"}, "+OK\r\n"},
		{"set held", []string{"SET", "c:1", "t2", "NX", "PX", "10000"}, "$-1\r\n"},
		{"set px nx lower", []string{"set", "c:2", "t1", "px", "10000", "nx"}, "+OK\r\n"},
		{"set ex", []string{"SET", "c:3", "t1", "Ex", "10", "nX"}, "+OK\r\n"},
		{"set plain", []string{"SET", "c:4", "v"}, "-ERR redlock proxy: only SET*"},
		{"set nx only", []string{"SET", "c:4", "v", "NX"}, "-ERR redlock proxy: SET NX without PX or EX: a lock without a TTL would never be released if its holder died*"},
		{"set xx", []string{"SET", "c:4", "v", "XX", "PX", "100"}, "-ERR redlock proxy: only SET*"},
		{"set keepttl", []string{"SET", "c:4", "v", "NX", "KEEPTTL"}, "-ERR redlock proxy: only SET*"},
		{"set px twice", []string{"SET", "c:4", "v", "NX", "PX", "100", "EX", "1"}, "-ERR syntax error\r\n"},
		{"set px missing", []string{"SET", "c:4", "v", "NX", "PX"}, "-ERR syntax error\r\n"},
		{"set px text", []string{"SET", "c:4", "v", "NX", "PX", "abc"}, "-ERR value is not an integer or out of range\r\n"},
		{"set px zero", []string{"SET", "c:4", "v", "NX", "PX", "0"}, "-ERR invalid expire time in 'set' command\r\n"},
		{"set ex negative", []string{"SET", "c:4", "v", "NX", "EX", "-5"}, "-ERR invalid expire time in 'set' command\r\n"},
		{"set empty value", []string{"SET", "c:4", "", "NX", "PX", "100"}, "-ERR redlock proxy: the lock value*"},
		{"set long token", []string{"SET", "c:4", long, "NX", "PX", "100"}, "-ERR*"},
		{"set arity", []string{"SET", "c:4"}, "-ERR wrong number of arguments for 'set' command\r\n"},
		{"set binary", []string{"SET", "b:\x00\r\n\xff", "t\x00\r\n", "NX", "PX", "10000"}, "+OK\r\n"},
		{"get binary", []string{"GET", "b:\x00\r\n\xff"}, "$4\r\nt\x00\r\n\r\n"},
		{"del a key named twice", []string{"DEL", "dup:x", "dup:x"}, ":0\r\n"},
		{"exists a key named twice", []string{"EXISTS", "c:1", "c:1"}, ":2\r\n"},
		{"get arity", []string{"GET"}, "-ERR wrong number of arguments for 'get' command\r\n"},
		{"pexpire zero", []string{"PEXPIRE", "c:1", "0"}, "-ERR invalid expire time*"},
		{"pttl missing", []string{"PTTL", "nope"}, ":-2\r\n"},
		{"evalsha unknown", []string{"EVALSHA", strings.Repeat("a", 40), "0"}, "-ERR redlock proxy: not a recognised lock script; other scripts are disabled (start the proxy with --allow-scripts*"},
		{"eval numkeys", []string{"EVAL", "return 1", "5", "a"}, "-ERR Number of keys can't be greater than number of args\r\n"},
		{"eval numkeys leading zero", []string{"EVAL", "return 1", "01", "a"}, "-ERR value is not an integer or out of range\r\n"},
		{"eval refused", []string{"EVAL", "redis.call('set', 'script:x', 'y') return 7", "0"}, "-ERR redlock proxy: not a recognised lock script; other scripts are disabled (start the proxy with --allow-scripts*"},
		{"eval flushall refused", []string{"EVAL", "return redis.call('flushall')", "0"}, "-ERR redlock proxy: not a recognised lock script*"},
		{"lib script in a foreign shape refused", []string{"EVAL", lockcmds.LibTable[0].Source, "0", "tok"}, "-ERR redlock proxy: plain compare-and-delete (engine) called in a shape its library never sends (or with more than 64 keys, or a value over 512 bytes); other scripts are disabled (start the proxy with --allow-scripts*"},
		{"lib script with a value over 512 bytes refused", append([]string{"EVAL", scripts.Lib("node-redlock5-acquire"), "1", "big:1"}, strings.Repeat("v", 513), "10000"), "-ERR redlock proxy: node-redlock v5 acquire called in a shape*"},
		{"lib script with 65 keys refused", append(append([]string{"EVAL", scripts.Lib("node-redlock5-acquire"), "65"}, manyKeys(65)...), "tok", "10000"), "-ERR redlock proxy: node-redlock v5 acquire called in a shape*"},
		{"fcall refused", []string{"FCALL", "f", "0"}, "-ERR redlock proxy: functions are not lock scripts; other scripts are disabled (start the proxy with --allow-scripts*"},
		{"script load refused", []string{"SCRIPT", "LOAD", "return 8"}, "-ERR redlock proxy: not a recognised lock script*"},
		{"script load library", []string{"SCRIPT", "LOAD", lockcmds.LibTable[0].Source}, "$40\r\n" + lockcmds.LibTable[0].SHA + "\r\n"},
		{"script exists", []string{"SCRIPT", "EXISTS", sha1Hex([]byte("return 8")), lockcmds.LibTable[0].SHA, "nope"}, "*3\r\n:0\r\n:1\r\n:0\r\n"},
		{"script flush", []string{"SCRIPT", "FLUSH"}, "+OK\r\n"},
		{"set px leading zero", []string{"SET", "c:5", "t", "NX", "PX", "05"}, "-ERR value is not an integer or out of range\r\n"},
		{"set px plus", []string{"SET", "c:5", "t", "NX", "PX", "+5"}, "-ERR value is not an integer or out of range\r\n"},
		{"release wrong token", []string{"EVAL", lockcmds.LibTable[0].Source, "1", "c:1", "t2"}, ":0\r\n"},
		{"release", []string{"EVALSHA", lockcmds.LibTable[0].SHA, "1", "c:1", "t1"}, ":1\r\n"},
		{"config get", []string{"CONFIG", "GET", "save"}, "*0\r\n"},
		{"reset", []string{"RESET"}, "+RESET\r\n"},
		{"quit", []string{"QUIT"}, "+OK\r\n"},
		{"closed after quit", []string{"PING"}, ""},
	}
	defer func() {
		// Nothing a refused script would have written reached a master.
		for _, m := range e.masters {
			if n, err := m.Exists(context.Background(), "script:x").Result(); err != nil || n != 0 {
				t.Errorf("%s: refused script wrote script:x (%d, %v)", m.Options().Addr, n, err)
			}
			if n, _ := m.DBSize(context.Background()).Result(); n == 0 {
				t.Errorf("%s: empty after the test: a refused FLUSHALL ran", m.Options().Addr)
			}
		}
	}()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkReply(t, c.cmd(tc.args...), tc.want)
		})
	}
}

func TestRequirePass(t *testing.T) {
	e := startEnv(t, 3, func(c *Config) { c.RequirePass = "s3cret" })
	c := dialRaw(t, e.addr)
	for _, step := range []struct{ args, want string }{
		{"PING", "-NOAUTH Authentication required.\r\n"},
		{"AUTH wrong", "-WRONGPASS invalid username-password pair or user is disabled.\r\n"},
		{"HELLO 2 AUTH default s3cret", "*14\r\n"},
		{"PING", "+PONG\r\n"},
		{"RESET", "+RESET\r\n"},
		{"PING", "-NOAUTH Authentication required.\r\n"},
		{"AUTH s3cret", "+OK\r\n"},
	} {
		got := c.cmd(strings.Fields(step.args)...)
		if !strings.HasPrefix(got, step.want) {
			t.Fatalf("%s: got %q, want %q", step.args, got, step.want)
		}
	}
	// go-redis's default handshake with a password.
	gc := redis.NewClient(&redis.Options{Addr: e.addr, Password: "s3cret"})
	defer gc.Close()
	if err := gc.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
}

func TestBadInput(t *testing.T) {
	e := startEnv(t, 3, func(c *Config) { c.MaxRequestBytes = 64 << 10 })
	cases := []struct {
		name, in string
		want     string // prefix of the first reply; "" = closed without reply
	}{
		{"bad multibulk", "*x\r\n", "-ERR Protocol error"},
		{"bad bulk", "*1\r\n$abc\r\n", "-ERR Protocol error"},
		{"not a bulk", "*1\r\n:1\r\n", "-ERR Protocol error"},
		{"bulk over limit", "*2\r\n$3\r\nGET\r\n$999999999\r\n" + strings.Repeat("x", 70<<10), "-ERR Protocol error: invalid bulk length"},
		{"inline", "PING\r\n", "+PONG"},
		{"inline unbalanced", "SET \"a\r\n", "-ERR Protocol error"},
		{"inline long", strings.Repeat("a", 70<<10), "-ERR Protocol error: too big inline request"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, e.addr)
			c.nc.Write([]byte(tc.in))
			if got := c.read(); !strings.HasPrefix(got, tc.want) {
				t.Fatalf("got %q, want prefix %q", got, tc.want)
			}
		})
	}
	t.Run("disconnect mid-pipeline", func(t *testing.T) {
		for i := range 20 {
			nc, err := net.Dial("tcp", e.addr)
			if err != nil {
				t.Fatal(err)
			}
			var b []byte
			for j := range 50 {
				b = resp.AppendCommandStrings(b, "SET", fmt.Sprintf("dm:%d:%d", i, j), "tok", "NX", "PX", "5000")
			}
			nc.Write(b[:len(b)-7]) // the last command is cut
			nc.Close()
		}
	})
	t.Run("still serving", func(t *testing.T) {
		c := dialRaw(t, e.addr)
		if got := c.cmd("PING"); got != "+PONG\r\n" {
			t.Fatal(got)
		}
		time.Sleep(100 * time.Millisecond)
		// Every lock the cut pipelines took has a TTL on every master.
		for _, m := range e.masters {
			keys, _ := m.Keys(context.Background(), "dm:*").Result()
			for _, k := range keys {
				if d, _ := m.PTTL(context.Background(), k).Result(); d <= 0 {
					t.Errorf("%s: %s without TTL", m.Options().Addr, k)
				}
			}
		}
	})
}

func TestMaxClients(t *testing.T) {
	e := startEnv(t, 3, func(c *Config) { c.MaxClients = 2 })
	a, b := dialRaw(t, e.addr), dialRaw(t, e.addr)
	a.cmd("PING")
	b.cmd("PING")
	c := dialRaw(t, e.addr)
	if got := c.read(); !strings.HasPrefix(got, "-ERR max number of clients reached") {
		t.Fatalf("third client: %q", got)
	}
}

func TestIdleTimeout(t *testing.T) {
	e := startEnv(t, 3, func(c *Config) { c.IdleTimeout = 100 * time.Millisecond })
	c := dialRaw(t, e.addr)
	c.cmd("PING")
	time.Sleep(300 * time.Millisecond)
	if got := c.read(); got != "" {
		t.Fatalf("idle connection answered %q", got)
	}
}

// TestPipeline checks order and that a batch runs concurrently and comes
// back in one write.
func TestPipeline(t *testing.T) {
	e := startEnv(t, 5, nil)
	c := dialRaw(t, e.addr)
	var b []byte
	const n = 200
	for i := range n {
		b = resp.AppendCommandStrings(b, "SET", fmt.Sprintf("p:%d", i), "tok", "NX", "PX", "10000")
		b = resp.AppendCommandStrings(b, "ECHO", fmt.Sprint(i))
		b = resp.AppendCommandStrings(b, "GET", fmt.Sprintf("p:%d", i))
	}
	start := time.Now()
	c.send(string(b))
	for i := range n {
		if got := c.read(); got != "+OK\r\n" {
			t.Fatalf("SET %d: %q", i, got)
		}
		if got, want := c.read(), fmt.Sprintf("$%d\r\n%d\r\n", len(fmt.Sprint(i)), i); got != want {
			t.Fatalf("ECHO %d: %q", i, got)
		}
		if got := c.read(); got != "$3\r\ntok\r\n" {
			t.Fatalf("GET %d: %q", i, got)
		}
	}
	// 400 master round trips one after another would take far longer.
	t.Logf("%d pipelined commands in %v", 3*n, time.Since(start))
}

func TestContention(t *testing.T) {
	e := startEnv(t, 5, nil)
	contend(t, []string{e.addr})
}

// contend runs 24 workers taking and releasing 3 hot keys through the
// proxies at addrs (worker w uses addrs[w%len(addrs)]) with a real client
// library, and fails t on any overlap of two holders of one key.
func contend(t *testing.T, addrs []string) {
	t.Helper()
	const workers, keys, rounds = 24, 3, 40
	var inside [keys]atomic.Int32
	var overlaps, acquired atomic.Int64
	var wg sync.WaitGroup
	release := redis.NewScript(lockcmds.LibTable[0].Source)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := redis.NewClient(&redis.Options{Addr: addrs[w%len(addrs)], MaxRetries: -1})
			defer c.Close()
			ctx := context.Background()
			for r := range rounds {
				k := (w + r) % keys
				tok := fmt.Sprintf("w%d-r%d", w, r)
				ok, err := c.SetNX(ctx, fmt.Sprintf("ct:%d", k), tok, 2*time.Second).Result()
				if err != nil {
					t.Error(err)
					return
				}
				if !ok {
					continue
				}
				acquired.Add(1)
				if inside[k].Add(1) != 1 {
					overlaps.Add(1)
				}
				time.Sleep(time.Millisecond)
				inside[k].Add(-1)
				if n, err := release.Run(ctx, c, []string{fmt.Sprintf("ct:%d", k)}, tok).Int(); err != nil || n != 1 {
					t.Errorf("release: %v %v", n, err)
				}
			}
		}()
	}
	wg.Wait()
	if overlaps.Load() != 0 {
		t.Fatalf("%d overlapping critical sections", overlaps.Load())
	}
	if acquired.Load() == 0 {
		t.Fatal("nobody acquired")
	}
	t.Logf("%d acquisitions through %d proxies, 0 overlaps", acquired.Load(), len(addrs))
}

func TestMasterFailures(t *testing.T) {
	e := startEnv(t, 5, func(c *Config) { c.AllowTokenlessWrites = true })
	c := e.client(t)
	ctx := context.Background()
	ms := e.set.Masters()
	for i := range 2 {
		if err := ms[i].Kill(); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("2 of 5 down", func(t *testing.T) {
		ok, err := c.SetNX(ctx, "f:1", "tok", 10*time.Second).Result()
		if err != nil || !ok {
			t.Fatalf("SetNX: %v %v", ok, err)
		}
		if v, err := c.Get(ctx, "f:1").Result(); err != nil || v != "tok" {
			t.Fatalf("GET: %q %v", v, err)
		}
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	})
	if err := ms[2].Kill(); err != nil {
		t.Fatal(err)
	}
	t.Run("3 of 5 down", func(t *testing.T) {
		// "Cannot decide" is an error reply, never the nil of "held".
		start := time.Now()
		ok, err := c.SetNX(ctx, "f:2", "tok", 10*time.Second).Result()
		if err == nil || ok || !strings.HasPrefix(err.Error(), "ERR redlock proxy: unavailable: 2/5 masters answered") {
			t.Fatalf("SetNX: %v %v; want an unavailable error reply", ok, err)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("took %v", d)
		}
		// The masters that failed are named by index and kind; their
		// addresses are not shown to clients (the proxy's log has them).
		failed := "master 0: not connected; master 1: not connected; master 2: not connected"
		if !strings.Contains(err.Error(), failed) {
			t.Fatalf("SetNX: %v; want %q", err, failed)
		}
		// The same for a quorum read (a broadcast).
		_, gerr := c.Get(ctx, "f:2").Result()
		if gerr == nil || !strings.Contains(gerr.Error(), "unavailable: 2/5 masters answered, quorum 3 ("+failed+")") {
			t.Fatalf("GET: %v; want an unavailable error naming %q", gerr, failed)
		}
		// Every quorum read and write: an error, never a nil or a 0.
		for _, cmd := range [][]any{{"PTTL", "f:1"}, {"EXISTS", "f:1"}, {"DEL", "f:1"}, {"PEXPIRE", "f:1", 5000}} {
			if err := c.Do(ctx, cmd...).Err(); err == nil || !strings.Contains(err.Error(), "unavailable: 2/5 masters answered") {
				t.Fatalf("%v with 3 of 5 down: %v; want the unavailable error", cmd, err)
			}
		}
		for _, m := range ms {
			_, port, _ := net.SplitHostPort(m.Addr())
			for _, e := range []error{err, gerr} {
				if strings.Contains(e.Error(), port) || strings.Contains(e.Error(), "127.0.0.1") {
					t.Fatalf("a client's error reply shows a master's address: %v", e)
				}
			}
		}
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestRedisCLI(t *testing.T) {
	requirePeer(t, "redis-cli", haveCmd("redis-cli"))
	e := startEnv(t, 3, nil)
	_, port, _ := net.SplitHostPort(e.addr)
	cli := func(args ...string) string {
		out, err := exec.Command("redis-cli", append([]string{"-h", "127.0.0.1", "-p", port}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli %q: %v %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	steps := []struct {
		args []string
		want string
	}{
		{[]string{"PING"}, "PONG"},
		{[]string{"SET", "cli:k", "tok", "NX", "PX", "10000"}, "OK"},
		{[]string{"SET", "cli:k", "other", "NX", "PX", "10000"}, ""},
		{[]string{"GET", "cli:k"}, "tok"},
		{[]string{"EVAL", lockcmds.LibTable[1].Source, "1", "cli:k", "tok", "20000"}, "1"},
		{[]string{"EVAL", lockcmds.LibTable[0].Source, "1", "cli:k", "tok"}, "1"},
		{[]string{"EXISTS", "cli:k"}, "0"},
		{[]string{"FLUSHALL"}, "ERR unknown or unsupported command 'FLUSHALL'"},
	}
	for _, s := range steps {
		if got := cli(s.args...); got != s.want {
			t.Fatalf("redis-cli %q: got %q, want %q", s.args, got, s.want)
		}
	}
	// Interactive-style input through stdin (COMMAND DOCS first, like redis-cli 7).
	cmd := exec.Command("redis-cli", "-h", "127.0.0.1", "-p", port)
	cmd.Stdin = strings.NewReader("SET cli:i tok NX EX 10\nPTTL cli:i\n")
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.HasPrefix(out, []byte("OK\n")) {
		t.Fatalf("redis-cli stdin: %v %q", err, out)
	}
}

func TestShutdown(t *testing.T) {
	before := runtime.NumGoroutine()
	set := startEnv(t, 3, nil).set // only for the masters
	srv, err := New(Config{EngineConfig: engine.Config{FreshMasters: true, Addrs: set.Addrs()}})
	if err != nil {
		t.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Engine().WaitReady(ctx)
	c := dialRaw(t, ln.Addr().String())
	var b []byte
	for i := range 40 { // one write: all of them in flight once read
		b = resp.AppendCommandStrings(b, "SET", fmt.Sprintf("sd:%d", i), "tok", "NX", "PX", "10000")
	}
	cmdsBefore := srv.Stats().Commands
	c.send(string(b))
	if got := c.read(); got != "+OK\r\n" {
		t.Fatalf("first reply %q", got)
	}
	// Shutdown answers what the proxy has read: wait until it read all 40.
	for deadline := time.Now().Add(10 * time.Second); srv.Stats().Commands < cmdsBefore+40; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the proxy read %d of the 40 commands in 10 s", srv.Stats().Commands-cmdsBefore)
		}
	}
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 40; i++ {
		if got := c.read(); got != "+OK\r\n" {
			t.Fatalf("in-flight reply %d after Shutdown: %q", i, got)
		}
	}
	if got := c.read(); got != "" {
		t.Fatalf("connection open after Shutdown: %q", got)
	}
	if err := <-served; err != ErrServerClosed {
		t.Fatalf("Serve: %v", err)
	}
	if _, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		t.Fatal("still accepting")
	}
	srv.Close()
	c.nc.Close()
	// Locks clients hold are not released by Shutdown.
	n := 0
	for _, a := range set.Addrs() {
		m := redis.NewClient(&redis.Options{Addr: a})
		if v, _ := m.Get(context.Background(), "sd:5").Result(); v == "tok" {
			n++
		}
		m.Close()
	}
	if n < 2 {
		t.Fatalf("Shutdown released a held lock (%d masters hold it)", n)
	}
	deadline := time.Now().Add(3 * time.Second)
	for runtime.NumGoroutine() > before+20 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	// The env's own server and master clients are still running; what
	// matters is that this server's goroutines are gone.
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	if strings.Contains(stacks, "proxy.(*client)") {
		t.Fatalf("client goroutines left after Shutdown/Close:\n%s", stacks)
	}
}

// TestGarbage sends random bytes and RESP-shaped garbage: every connection
// gets replies or a clean close, and the server keeps serving.
func TestGarbage(t *testing.T) {
	e := startEnv(t, 3, func(c *Config) { c.MaxRequestBytes = 8 << 10 })
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"*", "$", "\r\n", "-1", "3", "SET", "EVAL", "NX", "PX", "0", "99999999999", " ", "\"", "\\", "\x00", "\xff", "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"}
	for i := range 150 {
		var b []byte
		for range rng.IntN(40) + 1 {
			if rng.IntN(3) == 0 {
				b = append(b, byte(rng.IntN(256)))
			} else {
				b = append(b, pieces[rng.IntN(len(pieces))]...)
			}
		}
		nc, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		nc.Write(b)
		nc.(*net.TCPConn).CloseWrite()
		nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadAll(nc); err != nil {
			t.Fatalf("input %q: %v (want replies then EOF)", b, err)
		}
		nc.Close()
	}
	c := dialRaw(t, e.addr)
	if got := c.cmd("PING"); got != "+PONG\r\n" {
		t.Fatalf("after garbage: %q", got)
	}
}

// TestSlowCommandsConcurrent: with one master stalled, each generic script
// waits for its timeout (300ms here); ten of them pipelined must overlap,
// not queue one after another.
func TestSlowCommandsConcurrent(t *testing.T) {
	e := startEnv(t, 5, func(c *Config) { c.AllowScripts = true })
	mastertest.RequireReal(t, e.set)
	m := e.set.Masters()[4]
	if err := m.Pause(); err != nil {
		t.Fatal(err)
	}
	defer m.Resume()
	c := dialRaw(t, e.addr)
	var b []byte
	for i := range 10 {
		b = resp.AppendCommandStrings(b, "EVAL", fmt.Sprintf("return %d", i), "0")
		b = resp.AppendCommandStrings(b, "SET", fmt.Sprintf("slow:%d", i), "tok", "NX", "PX", "10000")
	}
	start := time.Now()
	c.send(string(b))
	for i := range 10 {
		if got, want := c.read(), fmt.Sprintf(":%d\r\n", i); got != want {
			t.Fatalf("EVAL %d: %q", i, got)
		}
		if got := c.read(); got != "+OK\r\n" {
			t.Fatalf("SET %d: %q", i, got)
		}
	}
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Fatalf("10 slow commands took %v: they ran one after another", d)
	} else {
		t.Logf("10 commands of ~300ms each + 10 SETs: %v", d)
	}
}

// TestStalledMasters: 3 of 5 masters stalled (SIGSTOP) ⇒ SET NX PX
// answers an unavailable error once the per-master timeout (300ms here) and the cleanup
// bound (100ms) passed.
func TestStalledMasters(t *testing.T) {
	e := startEnv(t, 5, nil)
	mastertest.RequireReal(t, e.set)
	for _, m := range e.set.Masters()[:3] {
		if err := m.Pause(); err != nil {
			t.Fatal(err)
		}
		defer m.Resume()
	}
	c := e.client(t)
	start := time.Now()
	ok, err := c.SetNX(context.Background(), "st:1", "tok", 30*time.Second).Result()
	d := time.Since(start)
	if err == nil || ok || !strings.Contains(err.Error(), "unavailable") {
		t.Fatalf("SetNX with 3/5 stalled: %v %v; want an unavailable error reply", ok, err)
	}
	if d > time.Second {
		t.Fatalf("took %v", d)
	}
	t.Logf("nil after %v", d)
}

// TestMasterStateLog: a master that dies, and one that comes back empty
// (new run_id), are each logged once, as is losing and regaining the
// quorum — regained once a restarted master's quarantine (MaxTTL) ended.
func TestMasterStateLog(t *testing.T) {
	var logs proctest.Buffer
	e := startEnv(t, 3, func(c *Config) {
		c.EngineConfig.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		c.EngineConfig.MaxTTL = 2 * time.Second
		c.EngineConfig.Conn.ReconnectMin, c.EngineConfig.Conn.ReconnectMax = time.Millisecond, 10*time.Millisecond
	})
	mastertest.RequireReal(t, e.set)
	ms := e.set.Masters()
	waitLog := func(what string, n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for strings.Count(logs.String(), what) < n {
			if time.Now().After(deadline) {
				t.Fatalf("no %d× %q in the log:\n%s", n, what, logs.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitLog("engine: master up", 3)
	for _, m := range ms[:2] {
		if err := m.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	waitLog("engine: master down", 2)
	waitLog("engine: quorum lost", 1)
	time.Sleep(100 * time.Millisecond) // dozens of failed reconnects: not one more line
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, m := range ms[:2] {
		if err := m.Restart(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitLog("engine: master restarted", 2)
	waitLog("engine: master quarantine ended", 1)
	waitLog("engine: quorum regained", 1)
	out := logs.String()
	for what, n := range map[string]int{"engine: master down": 2, "engine: master up": 3, "engine: quorum lost": 1} {
		if got := strings.Count(out, what); got != n {
			t.Errorf("%q logged %d times, want %d:\n%s", what, got, n, out)
		}
	}
	if !strings.Contains(out, "addr="+ms[0].Addr()) {
		t.Errorf("the log does not name %s:\n%s", ms[0].Addr(), out)
	}
}

// TestQuarantineThroughProxy: the delayed-restart interleaving through the
// proxy: a client holds a key on {A,B,C} while D,E are down; A and B crash
// and come back empty, D and E come back empty; another client's SET NX PX
// on the key is refused (an error reply: too few masters may vote), and
// INFO shows the quarantined masters. Off, it would get +OK.
func TestQuarantineThroughProxy(t *testing.T) {
	for _, off := range []bool{false, true} {
		t.Run(map[bool]string{false: "on", true: "off"}[off], func(t *testing.T) {
			e := startEnv(t, 5, func(c *Config) {
				c.EngineConfig.DisableQuarantine = off
				c.EngineConfig.Conn.ReconnectMin, c.EngineConfig.Conn.ReconnectMax = time.Millisecond, 20*time.Millisecond
			})
			mastertest.RequireReal(t, e.set)
			ms := e.set.Masters()
			for _, i := range []int{3, 4} {
				if err := ms[i].Kill(); err != nil {
					t.Fatal(err)
				}
			}
			holder, other := dialRaw(t, e.addr), dialRaw(t, e.addr)
			if got := holder.cmd("SET", "q:key", "holder", "NX", "PX", "5000"); got != "+OK\r\n" {
				t.Fatalf("holder: %q", got)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			for _, i := range []int{0, 1} {
				if err := ms[i].Kill(); err != nil {
					t.Fatal(err)
				}
			}
			for _, i := range []int{0, 1, 3, 4} {
				if err := ms[i].Restart(ctx); err != nil {
					t.Fatal(err)
				}
			}
			for !strings.Contains(other.cmd("INFO", "masters"), "masters_up:5") {
				if ctx.Err() != nil {
					t.Fatal("masters did not reconnect")
				}
				time.Sleep(5 * time.Millisecond)
			}
			got := other.cmd("SET", "q:key", "other", "NX", "PX", "5000")
			if off {
				if got != "+OK\r\n" {
					t.Fatalf("quarantine off: %q; the unsafe grant did not happen", got)
				}
				return
			}
			if !strings.HasPrefix(got, "-ERR redlock proxy: unavailable") {
				t.Fatalf("second client during quarantine: %q; want the unavailable error", got)
			}
			if info := other.cmd("INFO", "masters"); !strings.Contains(info, "masters_quarantined:4") {
				t.Fatalf("INFO: %q", info)
			}
		})
	}
}

// TestFencingThroughProxy: REDLOCK.LOCK answers a fencing token that grows
// from holder to holder (masters restarted empty in between), nil while
// the key is held; the counter key itself is out of clients' reach.
func TestFencingThroughProxy(t *testing.T) {
	e := startEnv(t, 5, func(c *Config) {
		c.EngineConfig.QuarantineFor = 300 * time.Millisecond
		c.EngineConfig.Conn.ReconnectMin, c.EngineConfig.Conn.ReconnectMax = time.Millisecond, 20*time.Millisecond
	})
	mastertest.RequireReal(t, e.set)
	c := dialRaw(t, e.addr)
	release := func(value string) string {
		return c.cmd("EVAL", `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`, "1", "f:key", value)
	}
	token := func(r string) int64 {
		t.Helper()
		if !strings.HasPrefix(r, ":") {
			t.Fatalf("REDLOCK.LOCK: %q, want an integer", r)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(r[1:]), 10, 64)
		if err != nil || n <= 0 {
			t.Fatalf("REDLOCK.LOCK: %q", r)
		}
		return n
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lock := func(value string) int64 { // waits through reconnects and quarantines
		t.Helper()
		got := c.cmd("REDLOCK.LOCK", "f:key", value, "300")
		for ; strings.Contains(got, "unavailable"); got = c.cmd("REDLOCK.LOCK", "f:key", value, "300") {
			if ctx.Err() != nil {
				t.Fatalf("REDLOCK.LOCK: %q", got)
			}
			time.Sleep(10 * time.Millisecond)
		}
		return token(got)
	}
	prev := lock("v0")
	if got := c.cmd("REDLOCK.LOCK", "f:key", "other", "300"); got != "$-1\r\n" {
		t.Fatalf("REDLOCK.LOCK on a held key: %q, want nil", got)
	}
	if got := release("v0"); got != ":1\r\n" {
		t.Fatalf("release: %q", got)
	}
	for round := 1; round <= 4; round++ {
		for _, i := range []int{round % 5, (round + 2) % 5} { // two masters restart empty
			m := e.set.Masters()[i]
			if err := m.Kill(); err != nil {
				t.Fatal(err)
			}
			if err := m.Restart(ctx); err != nil {
				t.Fatal(err)
			}
		}
		value := fmt.Sprintf("v%d", round)
		if n := lock(value); n <= prev {
			t.Fatalf("round %d: token %d ≤ previous %d", round, n, prev)
		} else {
			prev = n
		}
		release(value)
	}
	for _, args := range [][]string{
		{"GET", "redlock:fence"}, {"DEL", "x", "redlock:fence"}, {"SET", "redlock:fence", "1", "NX", "PX", "100"},
		{"REDLOCK.LOCK", "redlock:fence", "v", "100"},
		{"EVAL", `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`, "1", "redlock:fence", "1"},
	} {
		if got := c.cmd(args...); !strings.Contains(got, "fencing counter") {
			t.Errorf("%q: %q, want the fencing-counter refusal", args, got)
		}
	}
	if got := c.cmd("REDLOCK.LOCK", "f:key", "v", "05"); !strings.HasPrefix(got, "-ERR value is not an integer") {
		t.Errorf("REDLOCK.LOCK with ttl 05: %q", got)
	}
}

// TestErrorRepliesAreNotAnswers: a master that answers with an error reply
// (here -NOREPLICAS: min-replicas-to-write without replicas) has not
// answered, as in the engine: with 3 of 5 such masters, a library acquire
// script, DEL and PEXPIRE get the unavailable error naming those masters'
// error codes, never a nil or a 0.
func TestErrorRepliesAreNotAnswers(t *testing.T) {
	var logs proctest.Buffer
	e := startEnv(t, 5, func(c *Config) {
		c.AllowTokenlessWrites = true
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	mastertest.RequireReal(t, e.set)
	ctx := context.Background()
	for _, m := range e.masters[:3] {
		if err := m.ConfigSet(ctx, "min-replicas-to-write", "1").Err(); err != nil {
			t.Fatal(err)
		}
		defer m.ConfigSet(ctx, "min-replicas-to-write", "0")
	}
	c := e.client(t)
	obtain := redis.NewScript(scripts.Lib("bsm-redislock-v0.10.0-obtain"))
	token := "tokentokentokentokent"
	want := "unavailable: 2/5 masters answered, quorum 3 (master 0: NOREPLICAS error reply; master 1: NOREPLICAS error reply; master 2: NOREPLICAS error reply)"
	if err := obtain.Run(ctx, c, []string{"er:1"}, token, len(token), "10000").Err(); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("obtain: %v; want %q", err, want)
	}
	for _, cmd := range [][]any{{"DEL", "er:1"}, {"PEXPIRE", "er:1", 5000}} {
		if err := c.Do(ctx, cmd...).Err(); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%v: %v; want %q", cmd, err, want)
		}
	}
	// The operator's log has what the replies leave out: addresses and the
	// masters' own messages.
	out := logs.String()
	if !strings.Contains(out, "too few masters answered") || !strings.Contains(out, e.set.Addrs()[0]) || !strings.Contains(out, "NOREPLICAS Not enough good replicas") {
		t.Fatalf("log lacks the failures with addresses and texts:\n%s", out)
	}
}
