package proxy

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/redcon"

	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/resp"
)

// commandTable is what COMMAND and COMMAND COUNT report: name, arity
// (negative: at least), first key, last key, key step.
var commandTable = []struct {
	name                  string
	arity, first, last, s int
	flags                 []string
}{
	{"set", -3, 1, 1, 1, []string{"write"}},
	{"get", 2, 1, 1, 1, []string{"readonly"}},
	{"exists", -2, 1, -1, 1, []string{"readonly"}},
	{"pttl", 2, 1, 1, 1, []string{"readonly"}},
	{"pexpire", -3, 1, 1, 1, []string{"write"}},
	{"del", -2, 1, -1, 1, []string{"write"}},
	{"eval", -3, 0, 0, 0, []string{"noscript", "movablekeys"}},
	{"evalsha", -3, 0, 0, 0, []string{"noscript", "movablekeys"}},
	{"script", -2, 0, 0, 0, []string{"noscript"}},
	{"ping", -1, 0, 0, 0, []string{"fast"}},
	{"echo", 2, 0, 0, 0, []string{"fast"}},
	{"hello", -1, 0, 0, 0, []string{"noauth", "fast"}},
	{"auth", -2, 0, 0, 0, []string{"noauth", "fast"}},
	{"client", -2, 0, 0, 0, []string{"fast"}},
	{"select", 2, 0, 0, 0, []string{"fast"}},
	{"command", -1, 0, 0, 0, []string{"loading"}},
	{"info", -1, 0, 0, 0, []string{"loading"}},
	{"config", -2, 0, 0, 0, []string{"admin"}},
	{"quit", -1, 0, 0, 0, []string{"noauth", "fast"}},
	{"reset", 1, 0, 0, 0, []string{"noauth", "fast"}},
}

// lower returns the ASCII lower-case form of a command name.
func lower(b []byte) string {
	for _, ch := range b {
		if ch >= 'A' && ch <= 'Z' {
			return strings.ToLower(string(b))
		}
	}
	return string(b)
}

func reply(out []byte) *call { return &call{done: closedChan, out: out} }

func errCall(msg string) *call { return reply(redcon.AppendError(nil, msg)) }

func arityErr(name string) *call {
	return errCall("ERR wrong number of arguments for '" + name + "' command")
}

// async runs f on its own goroutine with the server's context. The writer
// waits for every call, so the goroutine is owned by the connection.
// Commands of one connection run concurrently, except that a command
// waits for the connection's earlier in-flight commands on the same keys
// (so a pipelined SET then release of one key keep their order).
func (c *client) async(keys [][]byte, f func(ctx context.Context) []byte) *call {
	cl := &call{done: make(chan struct{})}
	s := c.s
	var after []*call
	for _, k := range keys {
		if prev := c.lastByKey[string(k)]; prev != nil {
			select {
			case <-prev.done:
			default:
				after = append(after, prev)
			}
		}
	}
	if len(c.lastByKey) >= 4096 {
		for k, prev := range c.lastByKey {
			select {
			case <-prev.done:
				delete(c.lastByKey, k)
			default:
			}
		}
	}
	if c.lastByKey == nil {
		c.lastByKey = map[string]*call{}
	}
	for _, k := range keys {
		c.lastByKey[string(k)] = cl
	}
	go func() {
		for _, p := range after {
			<-p.done
		}
		defer func() {
			if p := recover(); p != nil {
				cl.out = redcon.AppendError(nil, fmt.Sprintf("ERR redlock proxy internal error: %v", p))
				debug.PrintStack()
			}
			close(cl.done)
		}()
		// Every engine operation ends by its per-master deadlines, so the
		// server's context (cancelled by Close) is the only one needed.
		cl.out = f(s.baseCtx)
	}()
	return cl
}

// dispatch parses one command. Commands that touch the masters run
// asynchronously; connection plumbing runs here, in request order.
func (c *client) dispatch(args [][]byte) *call {
	s := c.s
	name := lower(args[0])
	if !c.authed {
		switch name {
		case "auth", "hello", "quit", "reset":
		default:
			return errCall(msgNoAuth)
		}
	}
	switch name {
	case "set":
		return c.cmdSet(args)
	case "eval", "evalsha":
		return c.cmdEval(name, args)
	case "get", "pttl":
		if len(args) != 2 {
			return arityErr(name)
		}
		key := args[1]
		if name == "get" {
			return c.async(args[1:2], func(ctx context.Context) []byte { return s.get(ctx, key) })
		}
		return c.async(args[1:2], func(ctx context.Context) []byte { return s.pttl(ctx, key) })
	case "exists", "del":
		if len(args) < 2 {
			return arityErr(name)
		}
		keys := args[1:]
		return c.async(keys, func(ctx context.Context) []byte { return s.countKeys(ctx, name, keys) })
	case "pexpire":
		if len(args) != 3 {
			return arityErr(name)
		}
		ms, err := strconv.ParseInt(string(args[2]), 10, 64)
		if err != nil {
			return errCall(msgNotInteger)
		}
		if ms <= 0 {
			return errCall("ERR invalid expire time in 'pexpire' command (the proxy accepts positive values only)")
		}
		key := args[1]
		return c.async(args[1:2], func(ctx context.Context) []byte { return s.pexpire(ctx, key, ms) })
	case "script":
		return c.cmdScript(args)
	case "ping":
		switch len(args) {
		case 1:
			return reply([]byte("+PONG\r\n"))
		case 2:
			return reply(redcon.AppendBulk(nil, args[1]))
		}
		return arityErr(name)
	case "echo":
		if len(args) != 2 {
			return arityErr(name)
		}
		return reply(redcon.AppendBulk(nil, args[1]))
	case "hello":
		return c.cmdHello(args)
	case "auth":
		return c.cmdAuth(args)
	case "client":
		return c.cmdClient(args)
	case "select":
		if len(args) != 2 {
			return arityErr(name)
		}
		n, err := strconv.Atoi(string(args[1]))
		if err != nil {
			return errCall(msgNotInteger)
		}
		if n != 0 {
			return errCall("ERR DB index is out of range (the redlock proxy has only DB 0)")
		}
		return reply(redcon.AppendOK(nil))
	case "command":
		return c.cmdCommand(args)
	case "info":
		return reply(redcon.AppendBulkString(nil, s.info(c)))
	case "config":
		// CONFIG GET answers an empty list (benchmarks and clients probe
		// it); everything else is unsupported.
		if len(args) >= 3 && lower(args[1]) == "get" {
			return reply([]byte("*0\r\n"))
		}
		return errCall("ERR unknown or unsupported command 'CONFIG " + sub(args) + "'")
	case "quit":
		return &call{done: closedChan, out: redcon.AppendOK(nil), closeAfter: true}
	case "reset":
		c.name, c.lib = "", ""
		c.authed = s.cfg.RequirePass == ""
		return reply([]byte("+RESET\r\n"))
	}
	return errCall("ERR unknown or unsupported command '" + printable(args[0]) + "'")
}

func sub(args [][]byte) string {
	if len(args) < 2 {
		return ""
	}
	return printable(args[1])
}

// printable shortens a client-supplied name for an error message.
func printable(b []byte) string {
	if len(b) > 64 {
		b = b[:64]
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, string(b))
}

func (c *client) cmdAuth(args [][]byte) *call {
	var user, pass string
	switch len(args) {
	case 2:
		user, pass = "default", string(args[1])
	case 3:
		user, pass = string(args[1]), string(args[2])
	default:
		return arityErr("auth")
	}
	if c.s.cfg.RequirePass == "" {
		return errCall(msgNoPassword)
	}
	if user != "default" || pass != c.s.cfg.RequirePass {
		return errCall(msgWrongPass)
	}
	c.authed = true
	return reply(redcon.AppendOK(nil))
}

// cmdHello answers HELLO [2 [AUTH user pass] [SETNAME name]] in RESP2;
// HELLO 3 gets NOPROTO so clients (go-redis) fall back to RESP2.
func (c *client) cmdHello(args [][]byte) *call {
	if len(args) >= 2 {
		v, err := strconv.Atoi(string(args[1]))
		if err != nil {
			return errCall("ERR Protocol version is not an integer or out of range")
		}
		if v != 2 {
			return errCall(msgNoProto)
		}
	}
	name, setName := "", false
	for i := 2; i < len(args); i++ {
		switch lower(args[i]) {
		case "auth":
			if i+2 >= len(args) {
				return errCall(msgSyntax)
			}
			if r := c.cmdAuth([][]byte{args[0], args[i+1], args[i+2]}); r.out[0] == '-' {
				return r
			}
			i += 2
		case "setname":
			if i+1 >= len(args) {
				return errCall(msgSyntax)
			}
			name, setName = string(args[i+1]), true
			i++
		default:
			return errCall(msgSyntax)
		}
	}
	if !c.authed {
		return errCall(msgNoAuth)
	}
	if setName {
		c.name = name
	}
	out := redcon.AppendArray(nil, 14)
	out = redcon.AppendBulkString(out, "server")
	out = redcon.AppendBulkString(out, "redis")
	out = redcon.AppendBulkString(out, "version")
	out = redcon.AppendBulkString(out, serverVersion)
	out = redcon.AppendBulkString(out, "proto")
	out = redcon.AppendInt(out, 2)
	out = redcon.AppendBulkString(out, "id")
	out = redcon.AppendInt(out, c.id)
	out = redcon.AppendBulkString(out, "mode")
	out = redcon.AppendBulkString(out, "standalone")
	out = redcon.AppendBulkString(out, "role")
	out = redcon.AppendBulkString(out, "master")
	out = redcon.AppendBulkString(out, "modules")
	out = redcon.AppendArray(out, 0)
	return reply(out)
}

// serverVersion is what HELLO and INFO report: a Redis version whose
// command set the clients expect, tagged as the proxy.
const serverVersion = "7.0.0"

func (c *client) cmdClient(args [][]byte) *call {
	if len(args) < 2 {
		return arityErr("client")
	}
	switch lower(args[1]) {
	case "setname":
		if len(args) != 3 {
			return arityErr("client|setname")
		}
		for _, ch := range args[2] {
			if ch <= ' ' || ch > '~' {
				return errCall("ERR Client names cannot contain spaces, newlines or special characters.")
			}
		}
		c.name = string(args[2])
		return reply(redcon.AppendOK(nil))
	case "getname":
		if c.name == "" {
			return reply(redcon.AppendNull(nil))
		}
		return reply(redcon.AppendBulkString(nil, c.name))
	case "setinfo":
		if len(args) != 4 {
			return arityErr("client|setinfo")
		}
		switch lower(args[2]) {
		case "lib-name":
			c.lib = printable(args[3])
		case "lib-ver":
		default:
			return errCall("ERR Unrecognized option '" + printable(args[2]) + "'")
		}
		return reply(redcon.AppendOK(nil))
	case "id":
		return reply(redcon.AppendInt(nil, c.id))
	}
	return errCall("ERR unknown or unsupported command 'CLIENT " + sub(args) + "'")
}

func (c *client) cmdCommand(args [][]byte) *call {
	if len(args) == 1 {
		out := redcon.AppendArray(nil, len(commandTable))
		for _, ct := range commandTable {
			out = redcon.AppendArray(out, 6)
			out = redcon.AppendBulkString(out, ct.name)
			out = redcon.AppendInt(out, int64(ct.arity))
			out = redcon.AppendArray(out, len(ct.flags))
			for _, f := range ct.flags {
				out = redcon.AppendString(out, f)
			}
			out = redcon.AppendInt(out, int64(ct.first))
			out = redcon.AppendInt(out, int64(ct.last))
			out = redcon.AppendInt(out, int64(ct.s))
		}
		return reply(out)
	}
	switch lower(args[1]) {
	case "count":
		return reply(redcon.AppendInt(nil, int64(len(commandTable))))
	case "docs", "info":
		// No documentation is served: an empty reply lets redis-cli and
		// clients proceed without hints.
		return reply([]byte("*0\r\n"))
	}
	return errCall("ERR unknown or unsupported command 'COMMAND " + sub(args) + "'")
}

// cmdSet accepts SET key value NX PX ms | NX EX s (any order, any case).
func (c *client) cmdSet(args [][]byte) *call {
	if len(args) < 3 {
		return arityErr("set")
	}
	var nx bool
	var ttl time.Duration
	for i := 3; i < len(args); i++ {
		switch lower(args[i]) {
		case "nx":
			if nx {
				return errCall(msgSyntax)
			}
			nx = true
		case "px", "ex":
			if ttl != 0 || i+1 >= len(args) {
				return errCall(msgSyntax)
			}
			n, err := strconv.ParseInt(string(args[i+1]), 10, 64)
			if err != nil {
				return errCall(msgNotInteger)
			}
			if n <= 0 {
				return errCall(msgBadExpire)
			}
			unit := time.Millisecond
			if lower(args[i]) == "ex" {
				unit = time.Second
			}
			if n > int64(1<<62)/int64(unit) {
				return errCall(msgBadExpire)
			}
			ttl = time.Duration(n) * unit
			i++
		default:
			return errCall(msgSetForm)
		}
	}
	if !nx || ttl == 0 {
		return errCall(msgSetForm)
	}
	if len(args[2]) == 0 {
		return errCall("ERR redlock proxy: the lock value (token) must not be empty")
	}
	key, token := string(args[1]), string(args[2])
	s := c.s
	return c.async(args[1:2], func(ctx context.Context) []byte {
		_, err := s.eng.TryLock(ctx, key, ttl, engine.WithToken(token))
		switch {
		case err == nil:
			return redcon.AppendOK(nil)
		case errors.Is(err, engine.ErrNotAcquired):
			return redcon.AppendNull(nil)
		}
		return engineErr(err)
	})
}

// engineErr turns an engine error other than the expected outcomes into an
// error reply.
func engineErr(err error) []byte {
	switch {
	case errors.Is(err, engine.ErrClosed), errors.Is(err, context.Canceled):
		return redcon.AppendError(nil, msgShuttingDown)
	case errors.Is(err, context.DeadlineExceeded):
		return redcon.AppendError(nil, "ERR redlock proxy: command timed out")
	case errors.Is(err, engine.ErrBadArgument):
		return redcon.AppendError(nil, "ERR "+strings.TrimPrefix(err.Error(), "engine: "))
	}
	return redcon.AppendError(nil, "ERR redlock proxy: "+err.Error())
}

// cmdEval handles EVAL script numkeys ... and EVALSHA sha numkeys ... .
func (c *client) cmdEval(name string, args [][]byte) *call {
	if len(args) < 3 {
		return arityErr(name)
	}
	nkeys, err := strconv.Atoi(string(args[2]))
	if err != nil {
		return errCall(msgNotInteger)
	}
	if nkeys < 0 {
		return errCall("ERR Number of keys can't be negative")
	}
	if nkeys > len(args)-3 {
		return errCall("ERR Number of keys can't be greater than number of args")
	}
	keys, argv := args[3:3+nkeys], args[3+nkeys:]
	s := c.s
	var sha string
	if name == "eval" {
		sha = sha1Hex(args[1])
	} else {
		sha = strings.ToLower(string(args[1]))
	}
	if ls := libBySHA[sha]; ls != nil {
		return c.async(keys, func(ctx context.Context) []byte { return s.runLib(ctx, ls, keys, argv) })
	}
	sc := s.scripts.get(sha)
	if sc == nil {
		if name == "evalsha" {
			return errCall(msgNoScript)
		}
		sc = s.scripts.put(args[1])
	}
	return c.async(keys, func(ctx context.Context) []byte { return s.runGeneric(ctx, sc, keys, argv) })
}

func (c *client) cmdScript(args [][]byte) *call {
	if len(args) < 2 {
		return arityErr("script")
	}
	s := c.s
	switch lower(args[1]) {
	case "load":
		if len(args) != 3 {
			return arityErr("script|load")
		}
		sha := sha1Hex(args[2])
		if libBySHA[sha] == nil {
			s.scripts.put(args[2])
		}
		return reply(redcon.AppendBulkString(nil, sha))
	case "exists":
		if len(args) < 3 {
			return arityErr("script|exists")
		}
		out := redcon.AppendArray(nil, len(args)-2)
		for _, a := range args[2:] {
			v := 0
			if s.scripts.exists(string(a)) {
				v = 1
			}
			out = redcon.AppendInt(out, int64(v))
		}
		return reply(out)
	case "flush":
		if len(args) > 3 || (len(args) == 3 && lower(args[2]) != "sync" && lower(args[2]) != "async") {
			return errCall(msgSyntax)
		}
		s.scripts.flush()
		return reply(redcon.AppendOK(nil))
	}
	return errCall("ERR unknown or unsupported command 'SCRIPT " + sub(args) + "'")
}

// info renders INFO: the proxy's state and every master's health.
func (s *Server) info(c *client) string {
	var b strings.Builder
	up := time.Since(s.start)
	fmt.Fprintf(&b, "# Server\r\nredis_version:%s\r\nredis_mode:standalone\r\nredlock_proxy:1\r\nprocess_id:0\r\nuptime_in_seconds:%d\r\nloading:0\r\n\r\n",
		serverVersion, int64(up.Seconds()))
	fmt.Fprintf(&b, "# Clients\r\nconnected_clients:%d\r\nmaxclients:%d\r\n\r\n", s.clients.Load(), s.cfg.MaxClients)
	st := s.eng.Stats()
	fmt.Fprintf(&b, "# Proxy\r\naccepted_connections:%d\r\nrejected_connections:%d\r\ncommands_processed:%d\r\nprotocol_errors:%d\r\n",
		s.accepted.Load(), s.rejected.Load(), s.commands.Load(), s.protoErrors.Load())
	fmt.Fprintf(&b, "locks_acquired:%d\r\nlocks_failed:%d\r\nlocks_released:%d\r\nlocks_lost:%d\r\nlocks_extended:%d\r\nlocks_extend_failed:%d\r\nquorum:%d\r\n\r\n",
		st.Acquired, st.Failed, st.Released, st.Lost, st.Extended, st.ExtendFailed, s.eng.Quorum())
	b.WriteString("# Masters\r\n")
	up2 := 0
	for i, addr := range s.eng.Masters() {
		cs := s.eng.Conns(i)
		state := "down"
		if cs[0].Connected() {
			state = "up"
			up2++
		}
		inf := cs[0].Info()
		fmt.Fprintf(&b, "master%d:addr=%s,state=%s,run_id=%s,version=%s,errors=%d\r\n", i, addr, state, inf.RunID, inf.Version, st.MasterErrors[i])
	}
	fmt.Fprintf(&b, "masters_up:%d\r\nmasters_total:%d\r\n", up2, len(s.eng.Masters()))
	return b.String()
}

// appendCmd encodes a command from a name and byte arguments.
func appendCmd(name string, args ...[]byte) []byte {
	dst := resp.AppendArrayHeader(nil, 1+len(args))
	dst = resp.AppendBulkString(dst, name)
	for _, a := range args {
		dst = resp.AppendBulk(dst, a)
	}
	return dst
}
