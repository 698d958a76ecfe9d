package respserver_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/redcon"

	"github.com/redlock-dev/redlock/proxy/internal/respserver"
)

// kvHandler is a handler that knows nothing of locks: an in-memory map
// behind three commands. KV.SET and KV.GET run asynchronously (KV.SET
// after a random pause): ordered on their key, while the replies of other
// keys may complete out of order.
type kvHandler struct {
	mu sync.Mutex
	m  map[string]string
}

func (h *kvHandler) commands() []*respserver.Command {
	return []*respserver.Command{
		{Name: "kv.get", Arity: 2, First: 1, Last: 1, Step: 1, Flags: []string{"readonly"}, Run: h.get},
		{Name: "kv.set", Arity: 3, First: 1, Last: 1, Step: 1, Flags: []string{"write"}, Run: h.set},
		{Name: "kv.keyname", Arity: 2, First: 1, Last: 1, Step: 1, Run: func(_ *respserver.Conn, args [][]byte) *respserver.Call {
			return respserver.Reply(redcon.AppendBulk(nil, args[1])) // the key as the handler got it
		}},
	}
}

func (h *kvHandler) get(c *respserver.Conn, args [][]byte) *respserver.Call {
	k := string(args[1])
	// Asynchronous on its key, so that it follows the connection's
	// earlier SETs of it (a reply built at once would not wait for them).
	return c.Async(args[1:2], func(_ context.Context, dst []byte) []byte {
		h.mu.Lock()
		defer h.mu.Unlock()
		v, ok := h.m[k]
		if !ok {
			return redcon.AppendNull(dst)
		}
		return redcon.AppendBulkString(dst, v)
	})
}

func (h *kvHandler) set(c *respserver.Conn, args [][]byte) *respserver.Call {
	k, v := string(args[1]), string(args[2])
	return c.Async(args[1:2], func(_ context.Context, dst []byte) []byte {
		time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
		h.mu.Lock()
		h.m[k] = v
		h.mu.Unlock()
		return redcon.AppendBulkString(dst, v) // the value, to check the order
	})
}

// TestServesAnyHandler: the server room serves a handler that knows
// nothing of locks — its commands beside the server's own (COMMAND counts
// both), pipelined asynchronous replies in request order, the key prefix
// applied and CheckKey asked before a command runs, the handler's INFO
// lines in the server's section and its own section — on goroutines and
// on an event loop.
func TestServesAnyHandler(t *testing.T) {
	loops := []int{0}
	if respserver.LoopsSupported {
		loops = append(loops, 1)
	}
	for _, n := range loops {
		t.Run(fmt.Sprintf("loops=%d", n), func(t *testing.T) { testServesAnyHandler(t, n) })
	}
}

func testServesAnyHandler(t *testing.T, loops int) {
	h := &kvHandler{m: map[string]string{}}
	cfg := testConfig(loops, h.commands()...)
	cfg.KeyPrefix = "t:"
	cfg.CheckKey = func(k []byte) *respserver.Call {
		if strings.HasPrefix(string(k), "t:secret") {
			return respserver.ErrCall("ERR that key is kept")
		}
		return nil
	}
	cfg.InfoSections = []string{"kv"}
	cfg.Info = func(b []byte, section string) []byte {
		switch section {
		case "proxy":
			return append(b, "kv_handler:1\r\n"...)
		case "kv":
			return append(b, "# Kv\r\nkv_keys:0\r\n"...)
		}
		return b
	}
	srv, addr := serve(t, cfg)
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	rd := bufio.NewReader(nc)
	send := func(args ...string) {
		t.Helper()
		var b []byte
		b = redcon.AppendArray(b, len(args))
		for _, a := range args {
			b = redcon.AppendBulkString(b, a)
		}
		if _, err := nc.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	// reply reads one reply: a line, and a bulk string's payload.
	reply := func() string {
		t.Helper()
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if line[0] != '$' || line == "$-1\r\n" {
			return line
		}
		n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
		body := make([]byte, n+2)
		if _, err := io.ReadFull(rd, body); err != nil {
			t.Fatal(err)
		}
		return string(body[:n])
	}
	cmd := func(args ...string) string { t.Helper(); send(args...); return reply() }

	if got := cmd("PING"); got != "+PONG\r\n" {
		t.Errorf("PING: %q", got)
	}
	want := fmt.Sprintf(":%d\r\n", len(h.commands())+len(respserver.ServerCommands()))
	if got := cmd("COMMAND", "COUNT"); got != want {
		t.Errorf("COMMAND COUNT: %q, want %q (the handler's and the server's)", got, want)
	}
	if got := cmd("kv.keyname", "k"); got != "t:k" {
		t.Errorf("the handler got the key %q, want the prefixed t:k", got)
	}
	if got := cmd("KV.GET", "secret1"); got != "-ERR that key is kept\r\n" {
		t.Errorf("a key CheckKey refuses: %q", got)
	}
	if got := cmd("kv.get", "a", "b"); !strings.HasPrefix(got, "-ERR wrong number of arguments for 'kv.get'") {
		t.Errorf("wrong arity: %q", got)
	}
	// Pipelined: 200 asynchronous SETs over 8 keys, completing after
	// random pauses (out of order across keys), then a GET of each key:
	// the replies come in request order and each GET sees its key's last
	// SET.
	const n, keys = 200, 8
	var batch []byte
	for i := range n {
		batch = redcon.AppendArray(batch, 3)
		batch = redcon.AppendBulkString(batch, "KV.SET")
		batch = redcon.AppendBulkString(batch, "k"+strconv.Itoa(i%keys))
		batch = redcon.AppendBulkString(batch, strconv.Itoa(i))
	}
	for k := range keys {
		batch = redcon.AppendArray(batch, 2)
		batch = redcon.AppendBulkString(batch, "kv.get")
		batch = redcon.AppendBulkString(batch, "k"+strconv.Itoa(k))
	}
	if _, err := nc.Write(batch); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if got := reply(); got != strconv.Itoa(i) {
			t.Fatalf("pipelined reply %d: %q, want %d (request order)", i, got, i)
		}
	}
	for k := range keys {
		if got, want := reply(), strconv.Itoa(n-keys+k); got != want {
			t.Errorf("GET k%d after the pipelined SETs: %q, want %s", k, got, want)
		}
	}
	info := cmd("INFO")
	for _, w := range []string{"# Proxy\r\n", "kv_handler:1\r\n", "# Kv\r\nkv_keys:0\r\n", "connected_clients:1\r\n"} {
		if !strings.Contains(info, w) {
			t.Errorf("INFO lacks %q:\n%s", w, info)
		}
	}
	if st := srv.Stats(); st.Commands < n+keys+5 || st.ConnectedClients != 1 {
		t.Errorf("Stats: %+v", st)
	}
}
