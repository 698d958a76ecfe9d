package proxy

import (
	"bytes"
	"slices"
	"sync/atomic"

	"github.com/tidwall/redcon"

	"github.com/redlock-dev/redlock/resp"
)

// command is one entry of the proxy's command table: what COMMAND reports
// and how dispatch runs it.
type command struct {
	name string
	// arity follows Redis: n means exactly n arguments (name included),
	// -n at least n. dispatch checks it; handlers check subcommands only.
	arity             int
	first, last, step int      // key positions, for COMMAND
	flags             []string // for COMMAND
	noAuth            bool     // allowed before AUTH
	run               func(c *client, args [][]byte) *call
}

// commandTable is the one list of the commands the proxy serves.
var commandTable = []*command{
	// Lock commands (lockcmds.go).
	{name: "set", arity: -3, first: 1, last: 1, step: 1, flags: []string{"write"}, run: (*client).cmdSet},
	{name: "setnx", arity: 3, first: 1, last: 1, step: 1, flags: []string{"write"}, run: func(*client, [][]byte) *call { return errCall(msgSetNoTTL) }},
	{name: "get", arity: 2, first: 1, last: 1, step: 1, flags: []string{"readonly"}, run: (*client).cmdGet},
	{name: "pttl", arity: 2, first: 1, last: 1, step: 1, flags: []string{"readonly"}, run: (*client).cmdPTTL},
	{name: "ttl", arity: 2, first: 1, last: 1, step: 1, flags: []string{"readonly"}, run: (*client).cmdTTL},
	{name: "exists", arity: -2, first: 1, last: -1, step: 1, flags: []string{"readonly"}, run: (*client).cmdCountKeys},
	{name: "del", arity: -2, first: 1, last: -1, step: 1, flags: []string{"write"}, run: (*client).cmdCountKeys},
	{name: "delex", arity: -2, first: 1, last: 1, step: 1, flags: []string{"write", "fast"}, run: (*client).cmdDelIfEq},
	{name: "delifeq", arity: 3, first: 1, last: 1, step: 1, flags: []string{"write", "fast"}, run: (*client).cmdDelIfEq},
	{name: "hexists", arity: 3, first: 1, last: 1, step: 1, flags: []string{"readonly", "fast"}, run: (*client).cmdHExists},
	{name: "hget", arity: 3, first: 1, last: 1, step: 1, flags: []string{"readonly", "fast"}, run: (*client).cmdHGet},
	{name: "redlock.lock", arity: 4, first: 1, last: 1, step: 1, flags: []string{"write"}, run: (*client).cmdRedlockLock},
	{name: "pexpire", arity: 3, first: 1, last: 1, step: 1, flags: []string{"write"}, run: (*client).cmdPExpire},
	{name: "eval", arity: -3, flags: []string{"noscript", "movablekeys"}, run: (*client).cmdEval},
	{name: "evalsha", arity: -3, flags: []string{"noscript", "movablekeys"}, run: (*client).cmdEval},
	{name: "script", arity: -2, flags: []string{"noscript"}, run: (*client).cmdScript},
	// Opted-in passthrough only (passthrough.go).
	{name: "fcall", arity: -3, flags: []string{"noscript", "movablekeys"}, run: (*client).cmdFcall},
	{name: "fcall_ro", arity: -3, flags: []string{"noscript", "movablekeys"}, run: (*client).cmdFcall},
	// Lock wake-ups (pubsub.go).
	{name: "subscribe", arity: -2, flags: []string{"pubsub", "noscript", "loading", "stale"}, run: (*client).cmdSubscribe},
	{name: "ssubscribe", arity: -2, flags: []string{"pubsub", "noscript", "loading", "stale"}, run: (*client).cmdSubscribe},
	{name: "unsubscribe", arity: -1, flags: []string{"pubsub", "noscript", "loading", "stale"}, run: (*client).cmdUnsubscribe},
	{name: "sunsubscribe", arity: -1, flags: []string{"pubsub", "noscript", "loading", "stale"}, run: (*client).cmdUnsubscribe},
	// Connection plumbing (plumbing.go).
	{name: "ping", arity: -1, flags: []string{"fast"}, run: (*client).cmdPing},
	{name: "echo", arity: 2, flags: []string{"fast"}, run: (*client).cmdEcho},
	{name: "hello", arity: -1, flags: []string{"noauth", "fast"}, noAuth: true, run: (*client).cmdHello},
	{name: "auth", arity: -2, flags: []string{"noauth", "fast"}, noAuth: true, run: (*client).cmdAuth},
	{name: "client", arity: -2, flags: []string{"fast"}, run: (*client).cmdClient},
	{name: "select", arity: 2, flags: []string{"fast"}, run: (*client).cmdSelect},
	{name: "command", arity: -1, flags: []string{"loading"}, run: (*client).cmdCommand},
	{name: "wait", arity: 3, flags: []string{"noscript"}, run: (*client).cmdWait},
	{name: "waitaof", arity: 4, flags: []string{"noscript"}, run: (*client).cmdWaitAOF},
	{name: "info", arity: -1, flags: []string{"loading"}, run: (*client).cmdInfo},
	{name: "config", arity: -2, flags: []string{"admin"}, run: (*client).cmdConfig},
	{name: "quit", arity: -1, flags: []string{"noauth", "fast"}, noAuth: true, run: (*client).cmdQuit},
	{name: "reset", arity: 1, flags: []string{"noauth", "fast"}, noAuth: true, run: (*client).cmdReset},
}

// commandsByName indexes commandTable.
var commandsByName = func() map[string]*command {
	m := make(map[string]*command, len(commandTable))
	for _, c := range commandTable {
		m[c.name] = c
	}
	return m
}()

// testHook, when set by a test, runs at the start of every dispatch
// (where "dispatch", with the command) and of every asynchronous command
// (where "async"): it lets tests make the serving code panic.
var testHook atomic.Pointer[func(where string, args [][]byte)]

// dispatch runs one command. Commands that touch the masters run
// asynchronously; connection plumbing runs here, in request order. As in
// Redis: an unknown command or a wrong arity is reported before NOAUTH.
func (c *client) dispatch(args [][]byte) *call {
	if h := testHook.Load(); h != nil {
		(*h)("dispatch", args)
	}
	if c.subscribed() {
		// Subscribed mode: every reply goes behind the frames already
		// queued (messages, earlier replies), in request order.
		cl := c.dispatchOne(args)
		if cl.a != nil || len(cl.out) == 0 {
			cl.resp3 = c.resp3.Load()
			return cl
		}
		out := c.pushFrame(c.encode(cl.out))
		out.closeAfter = out.closeAfter || cl.closeAfter
		out.size = cl.size // what dispatch charged beyond the request
		return out
	}
	cl := c.dispatchOne(args)
	// Replies are built in RESP2; a RESP3 connection gets them rewritten
	// (its nulls), now or when an asynchronous one is done.
	if cl.a != nil {
		cl.resp3 = c.resp3.Load()
	} else {
		cl.out = c.encode(cl.out)
	}
	return cl
}

// encode returns out, built in RESP2, in the connection's protocol.
func (c *client) encode(out []byte) []byte {
	if !c.resp3.Load() {
		return out
	}
	return toRESP3(out)
}

// toRESP3 returns out in RESP3: out itself when it holds no RESP2 null,
// else a copy rewritten (out may be shared, as constant replies are; the
// copy is shorter, so what out was charged covers it).
func toRESP3(out []byte) []byte {
	if !bytes.Contains(out, []byte("-1\r\n")) {
		return out
	}
	out, _ = resp.AppendRESP3(nil, out)
	return out
}

func (c *client) dispatchOne(args [][]byte) *call {
	name := lower(args[0])
	cmd := commandsByName[name]
	if cmd == nil {
		return errCall("ERR unknown or unsupported command '" + printable(args[0]) + "'")
	}
	if n := len(args); (cmd.arity > 0 && n != cmd.arity) || (cmd.arity < 0 && n < -cmd.arity) {
		return arityErr(name)
	}
	if !c.authed && !cmd.noAuth {
		return errCall(msgNoAuth)
	}
	if c.sub != nil {
		switch {
		case c.subscribed() && !subscribedAllowed[name]:
			return c.pushFrame(redcon.AppendError(nil, "ERR Can't execute '"+name+"': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"))
		case c.subscribed() && name == "ping":
			return c.pingSubscribed(args)
		case !c.subscribed() && !c.framesWritten():
			return errReply(msgShuttingDown, true)
		}
	}
	var charged int64
	if p := c.s.cfg.KeyPrefix; p != "" {
		// The prefixed keys are copies: charged like the request itself,
		// and given back with it when the reply is written.
		first, last, step := keyRange(cmd, args)
		for i := first; i <= last; i += step {
			charged += int64(len(p) + len(args[i]))
		}
		if !c.hold(charged, true) {
			return errCall(msgMemory)
		}
		prefixKeys(args, p, first, last, step)
	}
	cl := c.runUnlessFence(cmd, args)
	cl.size = charged // whatever the reply, it gives the charge back
	return cl
}

// runUnlessFence refuses a command naming a fencing counter as a key, and
// runs any other.
// (Script calls check their KEYS in their handlers.)
func (c *client) runUnlessFence(cmd *command, args [][]byte) *call {
	if cmd.first > 0 {
		first, last, step := keyRange(cmd, args)
		for i := first; i <= last; i += step {
			if cl := c.s.reservedKey(args[i]); cl != nil {
				return cl
			}
		}
	}
	return cmd.run(c, args)
}

func arityErr(name string) *call {
	return errCall("ERR wrong number of arguments for '" + name + "' command")
}

func sub(args [][]byte) string {
	if len(args) < 2 {
		return ""
	}
	return printable(args[1])
}

// keyRange returns the positions of a command's key arguments: first to
// last (inclusive, last < first for none) by step — cmd's key positions,
// or the numkeys keys of a script call (EVAL, EVALSHA, FCALL; a bad
// numkeys gives none and is left for the command to refuse).
func keyRange(cmd *command, args [][]byte) (first, last, step int) {
	first, last = cmd.first, cmd.last
	step = max(cmd.step, 1)
	if first == 0 {
		if !slices.Contains(cmd.flags, "movablekeys") || len(args) < 3 {
			return 1, 0, 1
		}
		n, ok := resp.ParseInt(args[2])
		if !ok || n <= 0 || n > int64(len(args)-3) {
			return 1, 0, 1
		}
		return 3, 2 + int(n), 1
	}
	if last < 0 {
		last += len(args)
	}
	return first, min(last, len(args)-1), step
}

// prefixKeys prepends p to the key arguments first..last by step.
func prefixKeys(args [][]byte, p string, first, last, step int) {
	for i := first; i <= last; i += step {
		args[i] = append([]byte(p), args[i]...)
	}
}
